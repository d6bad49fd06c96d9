// A test fixture that runs llama-tiny (f32, 96 positions, prefill steps of 16) through an executor on the
// default device, checking that validation reported nothing: what the greedy-batch and sampled-decode tests
// share.
#pragma once

#include "runtime/exec/Executor.h"
#include "runtime/exec/WeightLoader.h"
#include "test/e2e/FixturePlan.h"

#include <memory>
#include <string>

namespace gerbil::e2e {

class TinyModelTest : public ::testing::Test {
protected:
  void SetUp() override {
    fixture_ = testData() / "fixtures/models/llama-tiny";
    ASSERT_NO_FATAL_FAILURE(compileFixture(fixture_, "--dtype f32 --max-seq 96 --prefill-chunk 16", plan_));
    ASSERT_TRUE(plan_.gpuArgmax);
    std::string noDevice;
    context_ = contextOrNull(noDevice);
    if (!context_) GTEST_SKIP() << noDevice;
    weights::Checkpoint checkpoint = weights::Checkpoint::open(fixture_.string());
    executor_ = std::make_unique<exec::Executor>(*context_, plan_,
                                                 exec::uploadWeights(*context_, plan_, checkpoint, nullptr));
  }
  void TearDown() override {
    executor_.reset();
    if (context_) {
      EXPECT_EQ(context_->validationErrors(), 0u);
    }
  }

  fs::path fixture_;
  plan::Plan plan_;
  std::unique_ptr<vk::Context> context_;
  std::unique_ptr<exec::Executor> executor_;
  const std::vector<int32_t> prompt_ = {5, 77, 12, 200, 3};
};

} // namespace gerbil::e2e
