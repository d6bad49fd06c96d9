// Chooses the next token from a row of logits: greedy at temperature 0, else temperature, top-k and top-p
// sampling with a seeded generator so that runs are reproducible.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace gerbil::exec {

struct SamplingOptions {
  double temperature = 0.0;  // 0: greedy
  int64_t topK = 0;          // 0: all
  double topP = 1.0;
  uint64_t seed = 0;
};

class Sampler {
public:
  explicit Sampler(const SamplingOptions &options);
  int32_t next(const float *logits, int64_t vocab);

private:
  SamplingOptions options_;
  std::mt19937_64 generator_;
};

int32_t argmax(const float *logits, int64_t vocab);

} // namespace gerbil::exec
