// Sampling on the GPU (the plan's sampler, Executor::setSampling / beginSampling): a generation's tokens
// must be what SamplerReference.h draws from the logits of each step, batched ahead or one batch at a time,
// the same for the same seed; greedy decoding with a repetition penalty must agree with the host's Sampler.
#include "runtime/exec/Generation.h"
#include "test/e2e/TinyModelTest.h"
#include "test/unit/kernels/SamplerReference.h"

#include <gtest/gtest.h>

using namespace gerbil;
using namespace gerbil::e2e;

namespace {

constexpr int64_t kNewTokens = 41; // past two batches of 16

class SampledDecodeTest : public TinyModelTest {
protected:
  void SetUp() override {
    TinyModelTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_FALSE(plan_.sampler.empty()) << "a plan with a GPU argmax has a sampler";
  }

  exec::GenerationOptions sampled(exec::SamplingOptions sampling, uint32_t inFlight = 2) {
    exec::GenerationOptions options;
    options.maxNewTokens = kNewTokens;
    options.greedyBatchesInFlight = inFlight;
    options.sampling = sampling;
    options.sampling.context = prompt_; // what the penalty sees, as the tools set it
    return options;
  }
  std::vector<int32_t> generate(const exec::GenerationOptions &options) {
    executor_->reset();
    return exec::generate(*executor_, prompt_, options).output;
  }

  // What the reference draws, step by step from the logits the host reads, fed the tokens `output` has.
  std::vector<int32_t> reference(const exec::SamplingOptions &sampling, const std::vector<int32_t> &output) {
    const int64_t vocab = plan_.model.vocabSize;
    const std::vector<uint32_t> params = exec::samplingParamWords(sampling, vocab);
    std::vector<bool> seen(size_t(vocab), false);
    for (int32_t id : prompt_) seen[size_t(id)] = true;
    executor_->reset();
    std::vector<float> row = executor_->step(prompt_, exec::Logits::Last);
    std::vector<int32_t> drawn;
    for (int32_t token : output) {
      drawn.push_back(samplertest::sample(row.data(), vocab, params, seen, executor_->position()));
      seen[size_t(token)] = true;
      row = executor_->step({token}, exec::Logits::Last);
    }
    return drawn;
  }
};

// (temperature, top-k, top-p, penalty, seed)
exec::SamplingOptions options(double temperature, int64_t topK, double topP, double penalty, uint64_t seed) {
  return samplertest::options(temperature, topK, topP, 0.0, penalty, seed);
}

TEST_F(SampledDecodeTest, TokensAreTheReferencesDrawsFromEachStepsLogits) {
  for (const exec::SamplingOptions &o :
       {options(1.0, 0, 1.0, 1.0, 5), options(0.8, 40, 0.9, 1.1, 6), options(1.5, 0, 0.95, 1.0, 7)}) {
    const std::vector<int32_t> ahead = generate(sampled(o));
    ASSERT_EQ(ahead.size(), size_t(kNewTokens));
    EXPECT_EQ(executor_->position(), prompt_.size() + kNewTokens - 1);
    EXPECT_EQ(generate(sampled(o, 1)), ahead) << "one batch at a time";
    EXPECT_EQ(generate(sampled(o)), ahead) << "the same seed again";
    EXPECT_EQ(reference(o, ahead), ahead)
        << "temperature " << o.temperature << ", top-k " << o.topK << ", top-p " << o.topP;
  }
  // Another seed draws otherwise (41 tokens at temperature 1.5 over the fixture's vocabulary).
  EXPECT_NE(generate(sampled(options(1.5, 0, 1.0, 1.0, 8))), generate(sampled(options(1.5, 0, 1.0, 1.0, 9))));
}

TEST_F(SampledDecodeTest, GreedyWithAPenaltyMatchesTheHostSampler) {
  exec::SamplingOptions penalised = options(0.0, 0, 1.0, 1.8, 0);
  const std::vector<int32_t> onGpu = generate(sampled(penalised));
  penalised.onHost = true;
  EXPECT_EQ(generate(sampled(penalised)), onGpu);
  // The penalty changes what greedy decoding picks on this fixture (else the test would show nothing).
  EXPECT_NE(generate(sampled(options(0.0, 0, 1.0, 1.0, 0))), onGpu);
}

TEST_F(SampledDecodeTest, StopWhileABatchRunsThenContinue) {
  const exec::SamplingOptions o = options(1.0, 0, 1.0, 1.0, 11);
  const std::vector<int32_t> whole = generate(sampled(o));
  exec::GenerationOptions stopped = sampled(o);
  stopped.onToken = [n = 0](int32_t) mutable { return ++n < 20; };
  executor_->reset();
  exec::GenerationResult first = exec::generate(*executor_, prompt_, stopped);
  ASSERT_EQ(first.output.size(), 20u);
  EXPECT_EQ(std::vector<int32_t>(whole.begin(), whole.begin() + 20), first.output);
  // The continuation feeds the last token: its draws are at the positions the whole run drew them at.
  exec::GenerationOptions rest = sampled(o);
  rest.maxNewTokens = kNewTokens - 20;
  exec::GenerationResult second = exec::generate(*executor_, {first.output.back()}, rest);
  EXPECT_EQ(std::vector<int32_t>(whole.begin() + 20, whole.end()), second.output);
}

// Plans whose logits gemv picks the greedy token (--fuse-logits-argmax: the sampler shares the scratch's
// counters with its hand-over) or whose kernels reach buffers by address draw the same tokens.
TEST_F(SampledDecodeTest, OtherPlansDrawTheSame) {
  const exec::SamplingOptions o = options(0.9, 30, 0.9, 1.2, 21);
  const std::vector<int32_t> expected = generate(sampled(o));
  for (const std::string flags : {"--fuse-logits-argmax", "--buffer-addresses"}) {
    plan::Plan other;
    ASSERT_NO_FATAL_FAILURE(
        compileFixture(fixture_, "--dtype f32 --max-seq 96 --prefill-chunk 16 " + flags, other));
    vk::ContextOptions contextOptions = exec::contextOptionsFor(other);
    vk::Context context(contextOptions);
    weights::Checkpoint checkpoint = weights::Checkpoint::open(fixture_.string());
    exec::Executor executor(context, other, exec::uploadWeights(context, other, checkpoint, nullptr));
    EXPECT_EQ(exec::generate(executor, prompt_, sampled(o)).output, expected) << flags;
    EXPECT_EQ(context.validationErrors(), 0u) << flags;
  }
}

TEST_F(SampledDecodeTest, MisuseIsRefused) {
  executor_->reset();
  EXPECT_THROW(executor_->sampledToken(), exec::RuntimeError); // before setSampling
  EXPECT_THROW(executor_->beginSampling(1), exec::RuntimeError);
  exec::SamplingOptions bad = options(-1.0, 0, 1.0, 1.0, 0);
  EXPECT_THROW(executor_->setSampling(bad, {}), std::invalid_argument);
}

} // namespace
