// Chooses the next token from a row of logits with HuggingFace transformers' semantics and order: the
// repetition penalty first (it applies to greedy decoding too), then for sampling temperature, top-k, top-p
// and min-p, and a draw from a seeded Mersenne Twister. The draw uses no std:: distribution (their outputs
// differ between standard libraries), so a seed gives the same tokens everywhere.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace gerbil::exec {

struct SamplingOptions {
  double temperature = 0.0; // 0: greedy
  int64_t topK = 0;         // 0: all; ties with the k-th logit are kept, as in transformers
  double topP = 1.0;        // 1: off; the smallest most-likely set whose probability reaches p
  double minP = 0.0;        // 0: off; drops tokens less likely than minP × the most likely one
  double repetitionPenalty =
      1.0; // 1: off; a seen token's logit is divided by it if positive, else multiplied
  uint64_t seed = 0;
  // The tokens already in the context (the prompt, earlier turns of a chat) that the repetition penalty sees
  // before any token is generated.
  std::vector<int32_t> context;
  // Generation samples (a temperature or a repetition penalty) with the plan's GPU sampler where it has one,
  // in batches like greedy decoding; true: this Sampler draws on the host from each step's logits (another
  // random stream: the same seed gives other tokens).
  bool onHost = false;

  // Whether the choice is the plain argmax of the logits, with nothing to apply first: what a GPU argmax
  // can make on its own.
  bool plainArgmax() const { return temperature <= 0 && repetitionPenalty == 1.0; }
};

class Sampler {
public:
  // Throws std::invalid_argument naming the option that is out of range.
  explicit Sampler(const SamplingOptions &options);

  // Chooses from `logits` given the sampler's history (options.context, then every token it chose and every
  // observed one) and appends the choice to that history.
  int32_t next(const float *logits, int64_t vocab);
  // The same with an explicit history (prompt and output so far); the sampler's own history is neither read
  // nor changed.
  int32_t next(const float *logits, int64_t vocab, std::span<const int32_t> history);

  // Tokens that entered the context without being chosen here (a prompt, a user turn).
  void observe(std::span<const int32_t> tokens) {
    history_.insert(history_.end(), tokens.begin(), tokens.end());
  }
  const std::vector<int32_t> &history() const { return history_; }

private:
  SamplingOptions options_;
  std::mt19937_64 generator_;
  std::vector<int32_t> history_;
  std::vector<float> scores_;   // scratch: the penalised logits
  std::vector<int32_t> order_;  // scratch: candidate ids
  std::vector<double> weights_; // scratch: unnormalised probabilities of the candidates
  // scratch of top-p: each candidate's score bits in order, the weights and counts of their top 16 bits, the
  // keys of the bucket where the cut falls
  static constexpr uint32_t kBuckets = 65536;
  std::vector<uint32_t> keys_;
  std::vector<double> bucketWeights_;
  std::vector<uint32_t> bucketCounts_;
  std::vector<uint64_t> edgeKeys_;
};

int32_t argmax(const float *logits, int64_t vocab);

// transformers' RepetitionPenaltyLogitsProcessor on one row: each distinct id of `history` inside the
// vocabulary once.
void applyRepetitionPenalty(float *logits, int64_t vocab, std::span<const int32_t> history, double penalty);

} // namespace gerbil::exec
