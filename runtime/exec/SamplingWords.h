// The GPU sampler's parameter words (plan::SamplingParam) for a set of options: what Executor::setSampling
// writes before the penalty's bits, and what the sampler's tests hand its kernels.
#pragma once

#include "runtime/exec/Sampler.h"
#include "runtime/plan/Plan.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

namespace gerbil::exec {

// kSamplingParamWords words; kAdvances is 0 (the runtime sets it where steps leave the argmax launch out).
inline std::vector<uint32_t> samplingParamWords(const SamplingOptions &options, int64_t vocab) {
  auto bits = [](float f) { return std::bit_cast<uint32_t>(f); };
  std::vector<uint32_t> words(plan::kSamplingParamWords, 0);
  words[plan::kInverseTemperature] =
      bits(options.temperature > 0 ? static_cast<float>(1.0 / options.temperature) : 0.0f);
  words[plan::kTopK] = static_cast<uint32_t>(std::min<int64_t>(options.topK, vocab));
  // p as a fraction of 2^32: 1 (off) would not fit, and p just below it rounds down to a fraction that does.
  words[plan::kTopPFraction] =
      options.topP < 1.0 ? static_cast<uint32_t>(std::min(std::ldexp(options.topP, 32), 4294967295.0)) : 0u;
  words[plan::kMinPKey] =
      options.minP > 0 ? plan::samplingKey(static_cast<float>(std::log(options.minP))) : 0u;
  words[plan::kPenalty] = bits(static_cast<float>(options.repetitionPenalty));
  words[plan::kInversePenalty] = bits(static_cast<float>(1.0 / options.repetitionPenalty));
  words[plan::kSeedLow] = static_cast<uint32_t>(options.seed);
  words[plan::kSeedHigh] = static_cast<uint32_t>(options.seed >> 32);
  return words;
}

} // namespace gerbil::exec
