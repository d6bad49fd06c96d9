// Generation's prefill computes the logits of the last prompt row only (Plan::lastRowLogits: the decode
// schedule's one-row gemv, told the row by the firstRow push constant, in place of the prefill's projection
// of every row). That row and the GPU argmax's token must be those of a prefill that computes every row.
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

class LastRowLogitsTest : public ::testing::TestWithParam<const char *> {};

TEST_P(LastRowLogitsTest, EqualTheLastRowOfAFullPrefill) {
  const std::string model = GetParam();
  fs::path fixture = testData() / "fixtures/models" / model;
  plan::Plan p;
  ASSERT_NO_FATAL_FAILURE(compileFixture(fixture, "--dtype f32 --max-seq 64 --prefill-chunk 16", p));
  ASSERT_GE(p.lastRowLogits.prefill, 0) << "the plan pairs no one-row logits dispatch";
  ASSERT_EQ(p.prefill[size_t(p.lastRowLogits.prefill)].label, "lm_head");

  std::string noDevice;
  std::unique_ptr<vk::Context> context = contextOrNull(noDevice);
  if (!context) GTEST_SKIP() << noDevice;
  weights::Checkpoint checkpoint = weights::Checkpoint::open(fixture.string());
  exec::Executor executor(*context, p, exec::uploadWeights(*context, p, checkpoint, nullptr));
  const size_t vocab = size_t(p.model.vocabSize);
  for (size_t tokens : {2u, 9u, 16u}) {
    std::vector<int32_t> prompt;
    for (size_t i = 0; i < tokens; ++i) prompt.push_back(int32_t((i * 37 + 11) % vocab));
    executor.reset();
    std::vector<float> all = executor.step(prompt, exec::Logits::All);
    ASSERT_EQ(all.size(), tokens * vocab);
    const float *expected = &all[(tokens - 1) * vocab];
    executor.reset();
    std::vector<float> last = executor.step(prompt, exec::Logits::Last);
    ASSERT_EQ(last.size(), vocab);
    double largest = 0, worst = 0;
    for (size_t v = 0; v < vocab; ++v) {
      largest = std::max(largest, double(std::fabs(expected[v])));
      worst = std::max(worst, std::fabs(double(last[v]) - expected[v]));
    }
    EXPECT_LE(worst, 2e-4 * largest) << model << ", " << tokens << " tokens";
    if (p.gpuArgmax) {
      executor.reset();
      executor.step(prompt, exec::Logits::None);
      EXPECT_EQ(executor.greedyToken(), int32_t(std::max_element(expected, expected + vocab) - expected))
          << model << ", " << tokens << " tokens";
    }
  }
}

// Llama (norm prologue into an untied lm_head), GPT-2 (LayerNorm, tied to the embeddings), Qwen2.
INSTANTIATE_TEST_SUITE_P(Models, LastRowLogitsTest,
                         ::testing::Values("llama-tiny", "gpt2-tiny", "qwen2-tiny"), [](const auto &info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

} // namespace
