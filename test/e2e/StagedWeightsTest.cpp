// Weights loaded through the staging buffer (as on a discrete GPU) give the same step, bit for bit, as
// weights written into mapped memory (lavapipe's way): copied from the file, and converted (f16 matrices
// with their folded norm weights) a run of rows at a time straight into the staging buffer's halves, or
// whole where a row does not fit half of it.
#include "runtime/exec/Executor.h"
#include "runtime/exec/WeightLoader.h"
#include "runtime/plan/Plan.h"
#include "runtime/vulkan/Device.h"
#include "test/e2e/FixturePlan.h"

#include <gtest/gtest.h>

using namespace gerbil;
using namespace gerbil::e2e;

namespace {

std::vector<float> stepWith(const vk::ContextOptions &options, const plan::Plan &p,
                            const weights::Checkpoint &checkpoint, const std::vector<int32_t> &prompt) {
  vk::Context context(options);
  exec::LoadedWeights weights = exec::uploadWeights(context, p, checkpoint, nullptr);
  EXPECT_EQ(weights.bytes, [&] {
    uint64_t total = 0;
    for (const plan::Weight &w : p.weights) total += w.bytes();
    return total;
  }());
  exec::Executor executor(context, p, std::move(weights));
  executor.reset();
  return executor.step(prompt, exec::Logits::All);
}

TEST(StagedWeightsTest, SameStepAsMappedWeights) {
  fs::path fixture = testData() / "fixtures/models/llama-tiny";
  plan::Plan p;
  ASSERT_NO_FATAL_FAILURE(compileFixture(fixture, "--dtype f16 --max-seq 64 --prefill-chunk 16", p));
  bool converted = false;
  for (const plan::Weight &w : p.weights) converted = converted || w.scaleColumnsBy >= 0;
  ASSERT_TRUE(converted) << "the fixture's plan should fold its norm weights into matrices";

  std::string noDevice;
  if (!contextOrNull(noDevice)) GTEST_SKIP() << noDevice;
  weights::Checkpoint checkpoint = weights::Checkpoint::open(fixture.string());
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 11; ++i) prompt.push_back((i * 29 + 5) % int32_t(p.model.vocabSize));
  const std::vector<float> expected = stepWith(vk::ContextOptions{}, p, checkpoint, prompt);
  // 64 KiB: whole weights a half; 512 bytes: a run of a few 128-byte rows, the down projection's 352-byte
  // rows converted whole, every weight across many copies.
  for (uint64_t staging : {64u << 10, 512u}) {
    vk::ContextOptions options;
    options.forceStaging = true;
    options.stagingChunkBytes = staging;
    EXPECT_EQ(stepWith(options, p, checkpoint, prompt), expected) << "staging of " << staging << " bytes";
  }
}

} // namespace
