#include "runtime/exec/Sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <string>

namespace gerbil::exec {
namespace {
// A float's bits as an unsigned integer in the floats' order (-0 as +0, which compare equal).
uint32_t orderedBits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value == 0.0f ? 0.0f : value);
  return bits & 0x80000000u ? ~bits : bits | 0x80000000u;
}
} // namespace

int32_t argmax(const float *logits, int64_t vocab) {
  return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits); // first of equal maxima
}

void applyRepetitionPenalty(float *logits, int64_t vocab, std::span<const int32_t> history, double penalty) {
  if (penalty == 1.0 || history.empty()) return;
  std::vector<int32_t> seen(history.begin(), history.end());
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  for (int32_t id : seen) {
    if (id < 0 || id >= vocab) continue;
    float &x = logits[id];
    x = x < 0 ? static_cast<float>(x * penalty) : static_cast<float>(x / penalty);
  }
}

Sampler::Sampler(const SamplingOptions &options)
    : options_(options), generator_(options.seed), history_(options.context) {
  auto check = [](bool ok, const std::string &what) {
    if (!ok) throw std::invalid_argument("sampling: " + what);
  };
  check(options.temperature >= 0 && std::isfinite(options.temperature), "temperature must be >= 0");
  check(options.topK >= 0, "top-k must be >= 0");
  check(options.topP >= 0 && options.topP <= 1, "top-p must be in [0, 1]");
  check(options.minP >= 0 && options.minP <= 1, "min-p must be in [0, 1]");
  check(options.repetitionPenalty > 0 && std::isfinite(options.repetitionPenalty),
        "the repetition penalty must be > 0");
}

int32_t Sampler::next(const float *logits, int64_t vocab) {
  int32_t token = next(logits, vocab, history_);
  history_.push_back(token);
  return token;
}

int32_t Sampler::next(const float *logits, int64_t vocab, std::span<const int32_t> history) {
  const float *scores = logits;
  if (options_.repetitionPenalty != 1.0 && !history.empty()) {
    scores_.assign(logits, logits + vocab);
    applyRepetitionPenalty(scores_.data(), vocab, history, options_.repetitionPenalty);
    scores = scores_.data();
  }
  if (options_.temperature <= 0) return argmax(scores, vocab);

  // A strict order (higher logit first, then lower id) so that ties never depend on the sort algorithm.
  auto before = [scores](int32_t a, int32_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  };
  order_.resize(static_cast<size_t>(vocab));
  std::iota(order_.begin(), order_.end(), 0);

  // top-k: every token at least as likely as the k-th.
  if (options_.topK > 0 && options_.topK < vocab) {
    std::nth_element(order_.begin(), order_.begin() + (options_.topK - 1), order_.end(), before);
    float kth = scores[order_[static_cast<size_t>(options_.topK - 1)]];
    order_.erase(std::remove_if(order_.begin(), order_.end(), [&](int32_t id) { return scores[id] < kth; }),
                 order_.end());
    // Back to id order: the draw below must not depend on how nth_element left them.
    std::sort(order_.begin(), order_.end());
  }

  // Temperature, relative to the best candidate so that exp() cannot overflow. In float: twice as fast as
  // double over a 150k vocabulary, and far more precise than sampling needs; the sums are in double.
  float best = static_cast<int64_t>(order_.size()) == vocab
                   ? *std::max_element(scores, scores + vocab)
                   : scores[*std::min_element(order_.begin(), order_.end(), before)];
  const float inverseTemperature = static_cast<float>(1.0 / options_.temperature);
  weights_.resize(order_.size());
  double total = 0;
  for (size_t i = 0; i < order_.size(); ++i)
    total += weights_[i] = std::exp((scores[order_[i]] - best) * inverseTemperature);

  // top-p: the most likely tokens until their probability reaches p (at least one). A histogram rather than a
  // sort: the candidates' weights are summed by the top 16 bits of their score's order, whole buckets from
  // the most likely down are kept while their sum stays below p, and only the bucket where it reaches p is
  // sorted (by score, then the lower id). A few passes over the vocabulary, where ranking 150k tokens a draw
  // took ~7 ms on the build machine.
  if (options_.topP < 1.0) {
    const double needed = options_.topP * total;
    keys_.resize(order_.size());
    bucketWeights_.assign(kBuckets, 0.0);
    bucketCounts_.assign(kBuckets, 0);
    for (size_t i = 0; i < order_.size(); ++i) {
      keys_[i] = orderedBits(scores[order_[i]]);
      bucketWeights_[keys_[i] >> 16] += weights_[i];
      ++bucketCounts_[keys_[i] >> 16];
    }
    // The bucket where the kept weight reaches p: the most likely one that has candidates at least, and the
    // least likely one with candidates if rounding never lets the sum reach p.
    double kept = 0;
    uint32_t edge = kBuckets;
    for (uint32_t b = kBuckets; b-- > 0;) {
      if (bucketCounts_[b] == 0) continue;
      edge = b;
      if (kept + bucketWeights_[b] >= needed) break;
      kept += bucketWeights_[b];
    }
    // Within it, the most likely first (the lower id among equals: the candidates are in id order).
    std::vector<uint64_t> &ranked = edgeKeys_;
    ranked.clear();
    for (size_t i = 0; i < order_.size(); ++i)
      if (keys_[i] >> 16 == edge)
        ranked.push_back(uint64_t{keys_[i]} << 32 | (0xffffffffu - static_cast<uint32_t>(i)));
    std::sort(ranked.begin(), ranked.end(), std::greater<>());
    auto place = [](uint64_t k) { return static_cast<size_t>(0xffffffffu - static_cast<uint32_t>(k)); };
    size_t end = 0;
    while (end < ranked.size()) {
      kept += weights_[place(ranked[end++])];
      if (kept >= needed) break;
    }
    for (size_t i = 0; i < order_.size(); ++i)
      if (keys_[i] >> 16 < edge) weights_[i] = 0;
    for (size_t r = end; r < ranked.size(); ++r) weights_[place(ranked[r])] = 0;
  }

  // min-p: relative to the most likely token, whose weight is exp(0) = 1.
  if (options_.minP > 0)
    for (double &w : weights_)
      if (w < options_.minP) w = 0;

  // The draw: 53 random bits as a double in [0, 1), walked over the weights in id order.
  double sum = std::accumulate(weights_.begin(), weights_.end(), 0.0);
  double u = static_cast<double>(generator_() >> 11) * 0x1.0p-53 * sum;
  double cumulative = 0;
  int32_t last = order_.front();
  for (size_t i = 0; i < order_.size(); ++i) {
    if (weights_[i] == 0) continue;
    cumulative += weights_[i];
    last = order_[i];
    if (u < cumulative) return last;
  }
  return last; // rounding left u at the very end
}

} // namespace gerbil::exec
