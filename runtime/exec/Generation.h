// Prefill then token-by-token decode through the KV cache: the generation loop every front end (token ids,
// text, chat) shares.
#pragma once

#include "runtime/exec/Executor.h"
#include "runtime/exec/Sampler.h"

#include <functional>
#include <string>
#include <vector>

namespace gerbil::exec {

struct GenerationOptions {
  int64_t maxNewTokens = 16;
  SamplingOptions sampling;
  std::vector<int64_t> stopTokenIds;  // generation ends after emitting one of these
  bool keepLogits = false;            // fill promptLogits and stepLogits
  // Greedy decoding on the GPU: batches submitted before the host has read the last (1: each batch waits
  // for the one before; at most vk::Context::kRecordedInFlight).
  uint32_t greedyBatchesInFlight = 2;
  // Called with each new token as soon as it is chosen; returning false stops generation.
  std::function<bool(int32_t)> onToken;
};

struct GenerationResult {
  std::vector<int32_t> output;     // the new tokens
  std::vector<float> promptLogits;  // [prompt, vocab] when keepLogits
  std::vector<float> stepLogits;    // [output, vocab]: the logits each new token was chosen from
  double prefillMs = 0, decodeMs = 0;
  std::string stopReason = "length";  // length | stop_token | callback
};

// Continues from the executor's current position (0 for a fresh conversation). The last new token is not
// written to the KV cache (nothing reads its logits): a continuation feeds it first. Throws RuntimeError.
GenerationResult generate(Executor &executor, const std::vector<int32_t> &prompt, const GenerationOptions &options);

} // namespace gerbil::exec
