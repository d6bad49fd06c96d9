// What the GPU sampler (sample.glsl) must choose, computed plainly on the host: the candidates' weights and
// keys as the kernel makes them, the cuts found by sorting instead of histograms, and the same draw.
#pragma once

#include "runtime/exec/Sampler.h"
#include "runtime/exec/SamplingWords.h"
#include "runtime/plan/Plan.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace gerbil::samplertest {

// Philox4x32-10 of (counter, 0, 0, 0): the first word.
inline uint32_t philox(uint32_t counter, uint32_t key0, uint32_t key1) {
  uint32_t c[4] = {counter, 0, 0, 0};
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(0xD2511F53u) * c[0], p1 = uint64_t(0xCD9E8D57u) * c[2];
    const uint32_t next[4] = {uint32_t(p1 >> 32) ^ c[1] ^ key0, uint32_t(p1),
                              uint32_t(p0 >> 32) ^ c[3] ^ key1, uint32_t(p0)};
    std::memcpy(c, next, sizeof c);
    key0 += 0x9E3779B9u;
    key1 += 0xBB67AE85u;
  }
  return c[0];
}

inline exec::SamplingOptions options(double temperature, int64_t topK = 0, double topP = 1.0,
                                     double minP = 0.0, double penalty = 1.0, uint64_t seed = 7) {
  exec::SamplingOptions o;
  o.temperature = temperature;
  o.topK = topK;
  o.topP = topP;
  o.minP = minP;
  o.repetitionPenalty = penalty;
  o.seed = seed;
  return o;
}

struct Candidate {
  uint32_t id, key, weight;
};

// The kernel's candidates of a logits row (weight > 0), in id order; `best`: the penalised argmax.
inline std::vector<Candidate> candidates(const float *row, int64_t vocab, const std::vector<uint32_t> &params,
                                         const std::vector<bool> &seen, uint32_t &best) {
  float penalty, inversePenalty, inverseTemperature;
  std::memcpy(&penalty, &params[plan::kPenalty], 4);
  std::memcpy(&inversePenalty, &params[plan::kInversePenalty], 4);
  std::memcpy(&inverseTemperature, &params[plan::kInverseTemperature], 4);
  std::vector<float> logits(row, row + vocab);
  if (penalty != 1.0f)
    for (int64_t i = 0; i < vocab; ++i)
      if (seen[size_t(i)]) logits[size_t(i)] *= logits[size_t(i)] < 0 ? penalty : inversePenalty;
  best = static_cast<uint32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  std::vector<Candidate> out;
  if (inverseTemperature == 0) return out;
  for (int64_t i = 0; i < vocab; ++i) {
    volatile float s = (logits[size_t(i)] - logits[best]) * inverseTemperature; // no contraction
    if (!(s >= plan::kSamplingMinScaled)) continue;
    uint32_t q = static_cast<uint32_t>(std::min(std::exp(float(s)), 1.0f) * 2147483648.0f);
    if (q) out.push_back({uint32_t(i), plan::samplingKey(s), q});
  }
  return out;
}

// The smallest key the sampler keeps (top-k, then top-p over the top-k's weight, min-p).
inline uint32_t cutKey(const std::vector<Candidate> &c, const std::vector<uint32_t> &params) {
  std::vector<Candidate> byKey = c;
  std::sort(byKey.begin(), byKey.end(), [](const Candidate &a, const Candidate &b) { return a.key > b.key; });
  uint32_t cutK = 0, cutP = 0;
  const uint32_t k = params[plan::kTopK];
  if (k > 0 && k < byKey.size()) cutK = byKey[k - 1].key;
  if (uint32_t fraction = params[plan::kTopPFraction]) {
    uint64_t kept = 0;
    for (const Candidate &x : byKey)
      if (x.key >= cutK) kept += x.weight;
    uint64_t target = static_cast<uint64_t>((static_cast<unsigned __int128>(kept) * fraction) >> 32);
    target = std::max<uint64_t>(target, 1);
    uint64_t sum = 0;
    for (size_t i = 0; i < byKey.size(); ++i) {
      sum += byKey[i].weight;
      // A key's tokens all count before it is compared.
      if ((i + 1 == byKey.size() || byKey[i + 1].key != byKey[i].key) && sum >= target) {
        cutP = byKey[i].key;
        break;
      }
    }
  }
  return std::max({cutK, cutP, params[plan::kMinPKey]});
}

// The token the GPU sampler chooses for the token at `position`.
inline int32_t sample(const float *row, int64_t vocab, const std::vector<uint32_t> &params,
                      const std::vector<bool> &seen, uint32_t position) {
  uint32_t best = 0;
  std::vector<Candidate> c = candidates(row, vocab, params, seen, best);
  if (c.empty()) return static_cast<int32_t>(best);
  const uint32_t cut = cutKey(c, params);
  uint64_t total = 0;
  for (const Candidate &x : c)
    if (x.key >= cut) total += x.weight;
  const uint32_t draw = philox(position, params[plan::kSeedLow], params[plan::kSeedHigh]);
  const uint64_t target = static_cast<uint64_t>((static_cast<unsigned __int128>(total) * draw) >> 32);
  uint64_t sum = 0;
  for (const Candidate &x : c)
    if (x.key >= cut && (sum += x.weight) > target) return static_cast<int32_t>(x.id);
  return -1;
}

} // namespace gerbil::samplertest
