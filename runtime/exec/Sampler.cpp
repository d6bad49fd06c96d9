#include "runtime/exec/Sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace gerbil::exec {

int32_t argmax(const float *logits, int64_t vocab) {
  return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);  // first of equal maxima
}

Sampler::Sampler(const SamplingOptions &options) : options_(options), generator_(options.seed) {}

int32_t Sampler::next(const float *logits, int64_t vocab) {
  if (options_.temperature <= 0) return argmax(logits, vocab);
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  int64_t keep = options_.topK > 0 ? std::min(options_.topK, vocab) : vocab;
  std::partial_sort(order.begin(), order.begin() + keep, order.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  order.resize(keep);
  std::vector<double> probs(keep);
  double top = logits[order[0]], sum = 0;
  for (int64_t i = 0; i < keep; ++i) sum += probs[i] = std::exp((logits[order[i]] - top) / options_.temperature);
  double cumulative = 0;
  int64_t cut = keep;
  for (int64_t i = 0; i < keep; ++i) {
    probs[i] /= sum;
    cumulative += probs[i];
    if (cumulative >= options_.topP) {
      cut = i + 1;
      break;
    }
  }
  std::discrete_distribution<int64_t> pick(probs.begin(), probs.begin() + cut);
  return order[pick(generator_)];
}

} // namespace gerbil::exec
