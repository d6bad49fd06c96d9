// Greedy decoding on the GPU submits its batches ahead of the host's reads (Executor::submitBatch): the
// tokens must be those of batches run one at a time and of the step-by-step loop that reads the logits, and
// a generation stopped while a later batch runs must leave the KV cache where a continuation expects it.
#include "runtime/exec/Generation.h"
#include "test/e2e/TinyModelTest.h"

#include <gtest/gtest.h>

using namespace gerbil;
using namespace gerbil::e2e;

namespace {

// Past two batches of 16, so that a third is in flight while the host reads the second.
constexpr int64_t kNewTokens = 41;

class GreedyBatchesTest : public TinyModelTest {
protected:
  exec::GenerationResult generate(const std::vector<int32_t> &prompt, exec::GenerationOptions options,
                                  bool fresh = true) {
    if (fresh) executor_->reset();
    return exec::generate(*executor_, prompt, options);
  }
};

exec::GenerationOptions greedy(int64_t tokens, uint32_t inFlight) {
  exec::GenerationOptions options;
  options.maxNewTokens = tokens;
  options.greedyBatchesInFlight = inFlight;
  return options;
}

TEST_F(GreedyBatchesTest, AheadMatchOneAtATimeAndTheLogitsLoop) {
  exec::GenerationResult ahead = generate(prompt_, greedy(kNewTokens, 2));
  ASSERT_EQ(ahead.output.size(), size_t(kNewTokens));
  EXPECT_EQ(executor_->position(), prompt_.size() + kNewTokens - 1);
  EXPECT_EQ(generate(prompt_, greedy(kNewTokens, 1)).output, ahead.output);
  // Reading the logits turns the GPU argmax off: the host picks each token from them.
  exec::GenerationOptions logits = greedy(kNewTokens, 2);
  logits.keepLogits = true;
  EXPECT_EQ(generate(prompt_, logits).output, ahead.output);
}

// Narrower barriers between a step's dispatches (gerbil-bench --dispatch-barrier): the same prefill logits
// and greedy tokens as the default ones, with the validation layers (where on) finding nothing.
TEST_F(GreedyBatchesTest, NarrowerDispatchBarriersDecodeTheSame) {
  executor_->reset();
  const std::vector<float> logits = executor_->step(prompt_, exec::Logits::All);
  const std::vector<int32_t> tokens = generate(prompt_, greedy(kNewTokens, 2)).output;
  for (vk::DispatchBarrier barrier : {vk::DispatchBarrier::Compute, vk::DispatchBarrier::Storage}) {
    vk::ContextOptions options;
    options.dispatchBarrier = barrier;
    vk::Context context(options);
    weights::Checkpoint checkpoint = weights::Checkpoint::open(fixture_.string());
    exec::Executor executor(context, plan_, exec::uploadWeights(context, plan_, checkpoint, nullptr));
    executor.reset();
    EXPECT_EQ(executor.step(prompt_, exec::Logits::All), logits) << vk::dispatchBarrierName(barrier);
    executor.reset();
    EXPECT_EQ(exec::generate(executor, prompt_, greedy(kNewTokens, 2)).output, tokens)
        << vk::dispatchBarrierName(barrier);
    EXPECT_EQ(context.validationErrors(), 0u) << vk::dispatchBarrierName(barrier);
  }
}

TEST_F(GreedyBatchesTest, StopWhileABatchRunsKeepsTheCacheOfTheAcceptedTokens) {
  const std::vector<int32_t> whole = generate(prompt_, greedy(kNewTokens, 2)).output;
  // Stopped at the 20th token, in the second batch: the third is in flight and is dropped.
  exec::GenerationOptions stopped = greedy(kNewTokens, 2);
  stopped.onToken = [n = 0](int32_t) mutable { return ++n < 20; };
  exec::GenerationResult first = generate(prompt_, stopped);
  ASSERT_EQ(first.output.size(), 20u);
  EXPECT_EQ(first.stopReason, "callback");
  EXPECT_EQ(std::vector<int32_t>(whole.begin(), whole.begin() + 20), first.output);
  EXPECT_EQ(executor_->position(), prompt_.size() + 19);
  // Continuing from the last token decodes what the uninterrupted run did.
  exec::GenerationResult rest = generate({first.output.back()}, greedy(kNewTokens - 20, 2), false);
  EXPECT_EQ(std::vector<int32_t>(whole.begin() + 20, whole.end()), rest.output);
}

TEST_F(GreedyBatchesTest, ExecutorRefusesMisuseAndStepsAfterBatchesInFlight) {
  executor_->reset();
  executor_->step(prompt_, exec::Logits::None);
  EXPECT_THROW(executor_->nextBatchTokens(), exec::RuntimeError);
  executor_->beginGreedy(executor_->greedyToken());
  executor_->submitBatch(4);
  executor_->submitBatch(4);
  EXPECT_THROW(executor_->submitBatch(4), exec::RuntimeError);
  EXPECT_THROW(executor_->submitBatch(0), exec::RuntimeError);
  EXPECT_EQ(executor_->nextBatchTokens().size(), 4u);
  // A step waits for the batch still in flight and drops it; its position counts that batch's steps.
  EXPECT_EQ(executor_->position(), prompt_.size() + 8);
  EXPECT_EQ(executor_->step({1}, exec::Logits::Last).size(), size_t(plan_.model.vocabSize));
  EXPECT_THROW(executor_->nextBatchTokens(), exec::RuntimeError);
  EXPECT_THROW(executor_->submitBatch(4), exec::RuntimeError); // the step ended the greedy run
  executor_->beginGreedy(1);
  EXPECT_THROW(executor_->submitBatch(uint32_t(plan_.limits.maxSequence)), exec::RuntimeError);
  // setPosition drops a batch without waiting for it; the next greedy run waits, then decodes as before.
  const uint32_t start = executor_->position();
  executor_->submitBatch(4);
  executor_->setPosition(start);
  EXPECT_THROW(executor_->nextBatchTokens(), exec::RuntimeError);
  executor_->beginGreedy(1);
  executor_->submitBatch(4);
  const std::vector<int32_t> again = executor_->nextBatchTokens();
  executor_->setPosition(start);
  executor_->beginGreedy(1);
  executor_->submitBatch(4);
  EXPECT_EQ(executor_->nextBatchTokens(), again);
}

} // namespace
