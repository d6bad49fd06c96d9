#include "runtime/exec/Generation.h"

#include <algorithm>
#include <chrono>

namespace gerbil::exec {
namespace {
using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point start) { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); }
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

  // Prefill in chunks of the plan's prefill size.
  auto prefillStart = Clock::now();
  std::vector<float> last;
  for (size_t begin = 0; begin < prompt.size(); begin += plan.limits.prefillChunk) {
    size_t end = std::min(prompt.size(), begin + plan.limits.prefillChunk);
    std::vector<int32_t> chunk(prompt.begin() + begin, prompt.begin() + end);
    std::vector<float> logits = executor.step(chunk, options.keepLogits);
    if (options.keepLogits) result.promptLogits.insert(result.promptLogits.end(), logits.begin(), logits.end());
    last.assign(logits.end() - vocab, logits.end());
  }
  result.prefillMs = msSince(prefillStart);

  auto decodeStart = Clock::now();
  Sampler sampler(options.sampling);
  for (int64_t i = 0; i < options.maxNewTokens; ++i) {
    if (options.keepLogits) result.stepLogits.insert(result.stepLogits.end(), last.begin(), last.end());
    int32_t token = sampler.next(last.data(), vocab);
    result.output.push_back(token);
    if (options.onToken && !options.onToken(token)) {
      result.stopReason = "callback";
      break;
    }
    if (std::find(options.stopTokenIds.begin(), options.stopTokenIds.end(), token) != options.stopTokenIds.end()) {
      result.stopReason = "stop_token";
      break;
    }
    // The last token needs no step: nothing reads its logits.
    if (i + 1 == options.maxNewTokens) break;
    last = executor.step({token}, false);
  }
  result.decodeMs = msSince(decodeStart);
  return result;
}

} // namespace gerbil::exec
