// Executor::prefill runs a prompt longer than the plan's prefill chunk in steps of it, as generation and
// gerbil-bench do: its logits must be those of one step over the whole prompt (a plan of a larger chunk).
#include "runtime/exec/Executor.h"
#include "runtime/exec/WeightLoader.h"
#include "runtime/plan/Plan.h"
#include "runtime/vulkan/Device.h"
#include "test/e2e/FixturePlan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

using namespace gerbil;
using namespace gerbil::e2e;

namespace {

// The largest difference of n values from the expected ones, relative to the largest expected value.
double relativeDifference(const float *got, const float *expected, size_t n) {
  double worst = 0, largest = 0;
  for (size_t i = 0; i < n; ++i) {
    largest = std::max(largest, double(std::fabs(expected[i])));
    worst = std::max(worst, std::fabs(double(got[i]) - expected[i]));
  }
  return worst / largest;
}

TEST(PrefillInStepsTest, MatchesOneStepOverThePrompt) {
  fs::path fixture = testData() / "fixtures/models/llama-tiny";
  plan::Plan stepped, whole;
  ASSERT_NO_FATAL_FAILURE(compileFixture(fixture, "--dtype f32 --max-seq 64 --prefill-chunk 16", stepped));
  ASSERT_NO_FATAL_FAILURE(compileFixture(fixture, "--dtype f32 --max-seq 64 --prefill-chunk 64", whole));
  std::string noDevice;
  std::unique_ptr<vk::Context> context = contextOrNull(noDevice);
  if (!context) GTEST_SKIP() << noDevice;
  weights::Checkpoint checkpoint = weights::Checkpoint::open(fixture.string());
  exec::Executor inSteps(*context, stepped, exec::uploadWeights(*context, stepped, checkpoint, nullptr));
  exec::Executor inOne(*context, whole, exec::uploadWeights(*context, whole, checkpoint, nullptr));
  const size_t vocab = size_t(stepped.model.vocabSize), tokens = 37; // steps of 16, 16 and 5
  std::vector<int32_t> prompt;
  for (size_t i = 0; i < tokens; ++i) prompt.push_back(int32_t((i * 53 + 7) % vocab));

  std::vector<float> expected = inOne.step(prompt, exec::Logits::All);
  int steps = 0;
  std::vector<float> all = inSteps.prefill(prompt, exec::Logits::All, [&] { ++steps; });
  EXPECT_EQ(steps, 3);
  EXPECT_EQ(inSteps.position(), tokens);
  ASSERT_EQ(all.size(), tokens * vocab);
  EXPECT_LE(relativeDifference(all.data(), expected.data(), all.size()), 2e-4);

  inSteps.reset();
  std::vector<float> last = inSteps.prefill(prompt, exec::Logits::Last);
  ASSERT_EQ(last.size(), vocab);
  EXPECT_LE(relativeDifference(last.data(), &expected[(tokens - 1) * vocab], vocab), 2e-4);

  inSteps.reset();
  EXPECT_TRUE(inSteps.prefill(prompt, exec::Logits::None).empty());
  EXPECT_EQ(inSteps.position(), tokens);
  EXPECT_THROW(inSteps.prefill({}, exec::Logits::None), exec::RuntimeError);
}

// Each step of a prefill is timed, the last one too when it is one token long: it used to be replayed from
// the recorded decode step, which has no timestamps, so gerbil-bench's prefill GPU time left it out.
TEST(PrefillInStepsTest, TimesEveryStepAOneTokenLastStepToo) {
  fs::path fixture = testData() / "fixtures/models/llama-tiny";
  plan::Plan stepped;
  ASSERT_NO_FATAL_FAILURE(compileFixture(fixture, "--dtype f32 --max-seq 64 --prefill-chunk 16", stepped));
  std::string noDevice;
  std::unique_ptr<vk::Context> context = contextOrNull(noDevice);
  if (!context) GTEST_SKIP() << noDevice;
  if (!context->info().timestamps) GTEST_SKIP() << "the device has no timestamps";
  weights::Checkpoint checkpoint = weights::Checkpoint::open(fixture.string());
  exec::Executor executor(*context, stepped, exec::uploadWeights(*context, stepped, checkpoint, nullptr));
  std::vector<int32_t> prompt(33); // steps of 16, 16 and 1
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t(i * 5 + 3);
  std::vector<double> gpuMs;
  executor.prefill(prompt, exec::Logits::Last, [&] { gpuMs.push_back(executor.lastStepGpuMs()); });
  ASSERT_EQ(gpuMs.size(), 3u);
  for (double ms : gpuMs) EXPECT_GT(ms, 0.0);
}

} // namespace
