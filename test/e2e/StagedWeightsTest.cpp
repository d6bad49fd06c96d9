// Weights loaded through the staging buffer (as on a discrete GPU) give the same step, bit for bit, as
// weights written into mapped memory (lavapipe's way): copied from the file, converted (f16 matrices with
// their folded norm weights) a run of rows at a time straight into the staging buffer's halves, or
// converted whole (transposed weights) and then copied in.
#include "runtime/exec/Executor.h"
#include "runtime/exec/WeightLoader.h"
#include "runtime/plan/Plan.h"
#include "runtime/vulkan/Device.h"
#include "test/e2e/FixturePlan.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace gerbil;
using namespace gerbil::e2e;

namespace {

std::vector<float> stepWith(const vk::ContextOptions &options, const plan::Plan &p,
                            const weights::Checkpoint &checkpoint, const std::vector<int32_t> &prompt) {
  vk::Context context(options);
  uint64_t total = 0;
  for (const plan::Weight &w : p.weights) total += w.bytes();
  // Progress: what the device has copied, never less than before, all of it at the last report.
  std::vector<uint64_t> reported;
  exec::LoadedWeights weights = exec::uploadWeights(context, p, checkpoint, [&](uint64_t done, uint64_t all) {
    EXPECT_EQ(all, total);
    reported.push_back(done);
  });
  EXPECT_EQ(weights.bytes, total);
  EXPECT_TRUE(std::is_sorted(reported.begin(), reported.end()));
  EXPECT_FALSE(reported.empty());
  if (!reported.empty()) {
    EXPECT_EQ(reported.back(), total);
  }
  exec::Executor executor(context, p, std::move(weights));
  executor.reset();
  return executor.step(prompt, exec::Logits::All);
}

// `path` names the loader's way that some weight of the fixture's plan takes (`takesPath`).
void expectStagedStepsMatch(const std::string &fixtureName, bool (*takesPath)(const plan::Weight &),
                            const char *path) {
  fs::path fixture = testData() / "fixtures/models" / fixtureName;
  plan::Plan p;
  ASSERT_NO_FATAL_FAILURE(compileFixture(fixture, "--dtype f16 --max-seq 64 --prefill-chunk 16", p));
  ASSERT_TRUE(std::any_of(p.weights.begin(), p.weights.end(), takesPath))
      << fixtureName << "'s plan should have weights " << path;
  std::string noDevice;
  if (!contextOrNull(noDevice)) GTEST_SKIP() << noDevice;
  weights::Checkpoint checkpoint = weights::Checkpoint::open(fixture.string());
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 11; ++i) prompt.push_back((i * 29 + 5) % int32_t(p.model.vocabSize));
  const std::vector<float> expected = stepWith(vk::ContextOptions{}, p, checkpoint, prompt);
  // 64 KiB: whole weights a half; 4 KiB (the least a context takes): every weight across many copies.
  for (uint64_t staging : {64u << 10, 4u << 10}) {
    vk::ContextOptions options;
    options.forceStaging = true;
    options.stagingChunkBytes = staging;
    EXPECT_EQ(stepWith(options, p, checkpoint, prompt), expected) << "staging of " << staging << " bytes";
  }
}

// llama-tiny's f16 matrices with their folded norm weights: converted into the staging buffer a run of
// rows at a time.
TEST(StagedWeightsTest, RowsConvertedIntoTheStagingBuffer) {
  expectStagedStepsMatch(
      "llama-tiny", [](const plan::Weight &w) { return w.scaleColumnsBy >= 0 && !w.transpose; },
      "with folded norm weights");
}

// gpt2-tiny's Conv1D weights are transposed: converted whole, then copied into the staging buffer.
TEST(StagedWeightsTest, TransposedWeightsConvertedWhole) {
  expectStagedStepsMatch(
      "gpt2-tiny", [](const plan::Weight &w) { return w.transpose; }, "transposed");
}

} // namespace
