// A prefill step submitted in parts (Executor::setPrefillSubmitDispatches: the GPU runs each part while the
// host records the next) computes what one submission does, bit for bit, with and without per-dispatch
// timestamps, and leaves the context ready for the next step.
#include "runtime/exec/Executor.h"
#include "runtime/exec/WeightLoader.h"
#include "runtime/plan/Plan.h"
#include "runtime/vulkan/Device.h"
#include "test/e2e/FixturePlan.h"

#include <gtest/gtest.h>

using namespace gerbil;
using namespace gerbil::e2e;

namespace {

TEST(PrefillPartsTest, MatchOneSubmission) {
  fs::path fixture = testData() / "fixtures/models/llama-tiny";
  plan::Plan p;
  ASSERT_NO_FATAL_FAILURE(compileFixture(fixture, "--dtype f32 --max-seq 64 --prefill-chunk 16", p));

  std::string noDevice;
  std::unique_ptr<vk::Context> context = contextOrNull(noDevice);
  if (!context) GTEST_SKIP() << noDevice;
  weights::Checkpoint checkpoint = weights::Checkpoint::open(fixture.string());
  exec::Executor executor(*context, p, exec::uploadWeights(*context, p, checkpoint, nullptr));
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 13; ++i) prompt.push_back((i * 37 + 11) % int32_t(p.model.vocabSize));
  executor.setPrefillSubmitDispatches(0);
  executor.reset();
  const std::vector<float> expected = executor.step(prompt, exec::Logits::All);

  const uint32_t dispatches = static_cast<uint32_t>(p.prefill.size());
  for (bool profiling : {false, true})
    for (uint32_t parts : {1u, 2u, 5u, dispatches - 1, dispatches + 3}) {
      executor.setProfiling(profiling);
      executor.setPrefillSubmitDispatches(parts, parts == 5 ? 3 : 0); // a first part of its own size
      executor.reset();
      EXPECT_EQ(executor.step(prompt, exec::Logits::All), expected)
          << "parts of " << parts << " dispatches, profiling " << profiling;
      if (profiling) {
        EXPECT_EQ(executor.lastDispatchMs().size(), dispatches);
      }
      // A decode step after it, in one submission as always.
      EXPECT_EQ(executor.step({3}, exec::Logits::All).size(), size_t(p.model.vocabSize));
    }
}

} // namespace
