#include "runtime/exec/Generation.h"

#include "runtime/support/Clock.h"

#include <algorithm>

namespace gerbil::exec {
namespace {
using support::Clock;
using support::msSince;
// Greedy tokens decoded per submit: the host waits once per batch. A stop token wastes at most this many - 1.
constexpr int64_t kGreedyBatch = 16;
} // namespace

GenerationResult generate(Executor &executor, const std::vector<int32_t> &prompt, const GenerationOptions &options) {
  if (prompt.empty()) throw RuntimeError("the prompt is empty");
  const plan::Plan &plan = executor.plan();
  const int64_t vocab = plan.model.vocabSize;
  const uint64_t needed = executor.position() + prompt.size() + static_cast<uint64_t>(options.maxNewTokens);
  if (needed > plan.limits.maxSequence + 1ull)
    throw RuntimeError("the prompt of " + std::to_string(prompt.size()) + " tokens and " +
                       std::to_string(options.maxNewTokens) + " new tokens exceed the plan's --max-seq " +
                       std::to_string(plan.limits.maxSequence));
  GenerationResult result;

  // Decoding without logits runs on the GPU: its argmax or sampler feeds each token to the next step.
  const bool gpuGreedy = plan.gpuArgmax && options.sampling.plainArgmax() && !options.keepLogits;
  const bool gpuSampling =
      !gpuGreedy && !plan.sampler.empty() && !options.sampling.onHost && !options.keepLogits;
  const bool onGpu = gpuGreedy || gpuSampling;
  const Logits wanted = options.keepLogits ? Logits::All : onGpu ? Logits::None : Logits::Last;
  if (gpuSampling) executor.setSampling(options.sampling, options.sampling.context);

  auto prefillStart = Clock::now();
  std::vector<float> logits = executor.prefill(prompt, wanted), last;
  if (!onGpu) last.assign(logits.end() - vocab, logits.end());
  if (options.keepLogits) result.promptLogits = std::move(logits);
  result.prefillMs = msSince(prefillStart);

  auto decodeStart = Clock::now();
  // Takes a new token; false once generation has to end.
  auto accept = [&](int32_t token) {
    result.output.push_back(token);
    if (options.onToken && !options.onToken(token)) {
      result.stopReason = "callback";
      return false;
    }
    if (std::find(options.stopTokenIds.begin(), options.stopTokenIds.end(), token) != options.stopTokenIds.end()) {
      result.stopReason = "stop_token";
      return false;
    }
    return static_cast<int64_t>(result.output.size()) < options.maxNewTokens;
  };
  if (options.maxNewTokens > 0 && onGpu) {
    const int32_t first = gpuSampling ? executor.sampledToken() : executor.greedyToken();
    if (accept(first)) {
      // Batches go in ahead of the host's reads: the GPU decodes one while the host hands on the last.
      const uint32_t base = executor.position();
      if (gpuSampling)
        executor.beginSampling(first);
      else
        executor.beginGreedy(first);
      int64_t queued = static_cast<int64_t>(result.output.size()); // accepted or in a batch
      const uint32_t inFlight =
          std::max(1u, std::min(options.greedyBatchesInFlight, vk::Context::kRecordedInFlight));
      uint32_t submitted = 0, read = 0, decoded = 0;
      for (bool going = true; going;) {
        while (submitted - read < inFlight && queued < options.maxNewTokens) {
          int64_t batch = std::min(kGreedyBatch, options.maxNewTokens - queued);
          executor.submitBatch(static_cast<uint32_t>(batch));
          queued += batch;
          ++submitted;
        }
        std::vector<int32_t> tokens = executor.nextBatchTokens();
        ++read;
        for (size_t i = 0; i < tokens.size() && going; ++i, ++decoded) going = accept(tokens[i]);
      }
      // The cache keeps the fed tokens: the first and every accepted one but the last. Batches decoded past a
      // stop are dropped.
      executor.setPosition(base + decoded);
    }
  } else if (options.maxNewTokens > 0) {
    Sampler sampler(options.sampling);
    for (;;) {
      if (options.keepLogits) result.stepLogits.insert(result.stepLogits.end(), last.begin(), last.end());
      int32_t token = sampler.next(last.data(), vocab);
      // The last token needs no step: nothing reads its logits.
      if (!accept(token)) break;
      last = executor.step({token}, Logits::Last);
    }
  }
  result.decodeMs = msSince(decodeStart);
  return result;
}

} // namespace gerbil::exec
