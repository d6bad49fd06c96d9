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

  // Greedy decoding without logits runs on the GPU: its argmax feeds each token to the next step.
  const bool gpuGreedy = plan.gpuArgmax && options.sampling.plainArgmax() && !options.keepLogits;
  const Logits wanted = options.keepLogits ? Logits::All : gpuGreedy ? Logits::None : Logits::Last;

  // Prefill in chunks of the plan's prefill size.
  auto prefillStart = Clock::now();
  std::vector<float> last;
  for (size_t begin = 0; begin < prompt.size(); begin += plan.limits.prefillChunk) {
    size_t end = std::min(prompt.size(), begin + plan.limits.prefillChunk);
    std::vector<int32_t> chunk(prompt.begin() + begin, prompt.begin() + end);
    std::vector<float> logits = executor.step(chunk, wanted);
    if (options.keepLogits) result.promptLogits.insert(result.promptLogits.end(), logits.begin(), logits.end());
    if (!gpuGreedy) last.assign(logits.end() - vocab, logits.end());
  }
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
  if (options.maxNewTokens > 0 && gpuGreedy) {
    int32_t token = executor.greedyToken();
    bool going = accept(token);
    while (going) {
      uint32_t batch = static_cast<uint32_t>(
          std::min<int64_t>(kGreedyBatch, options.maxNewTokens - static_cast<int64_t>(result.output.size())));
      uint32_t start = executor.position();
      std::vector<int32_t> tokens = executor.decodeGreedy(token, batch);
      for (uint32_t i = 0; i < batch && going; ++i) {
        going = accept(tokens[i]);
        // Tokens past a stop were decoded for nothing: the cache keeps the fed token and those accepted.
        if (!going && i + 1 < batch) executor.setPosition(start + i + 1);
      }
      token = tokens.back();
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
