// The GPU sampler's five launches, as codegen specialises them, against SamplerReference.h: the same token
// for each option (greedy with a penalty, temperature, top-k, top-p, both, min-p) over one and many
// workgroups, the state it leaves (token list, input id, the penalty's bits, counters at 0). And the
// reference itself against transformers' semantics (the host Sampler's cuts) and its draw's frequencies.
#include "compiler/codegen/SamplerKernel.h"
#include "test/unit/kernels/KernelTestBase.h"
#include "test/unit/kernels/SamplerReference.h"

#include <map>
#include <numeric>
#include <set>

using namespace gerbil;
using namespace gerbil::kerneltest;
using gerbil::exec::SamplingOptions;

namespace {

using samplertest::options;

// Rows that look like a model's: mostly far below a few likely tokens, some exact ties, a -inf.
std::vector<float> logitsRow(int64_t vocab, uint32_t seed, bool ties = true) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> row(static_cast<size_t>(vocab));
  for (float &v : row) v = normal(rng);
  for (int i = 0; i < 12; ++i) // the likely few, tied in fours
    row[rng() % vocab] = 8.0f + float(ties ? i % 4 : i) * 0.5f;
  row[rng() % vocab] = -INFINITY;
  return row;
}

class SamplerKernelTest : public KernelTestBase {
protected:
  static constexpr uint32_t kSeq = 64, kGenerated = 3;

  void prepare(int64_t vocab) {
    vocab_ = vocab;
    kernels_ = codegen::samplerKernels(vocab, kSeq);
    pipelines_.clear();
    for (int stage = 0; stage < codegen::SamplerKernels::kStages; ++stage) {
      const std::string name = "sampler stage " + std::to_string(stage);
      std::vector<uint32_t> spirv =
          compiler_.compile(codegen::writeKernel(kernels_.stages[size_t(stage)]), name);
      pipelines_.push_back(ctx_->createPipeline(spirv, 6, plan::kPushConstantBytes, name));
    }
    counters_ = ctx_->createBuffer(kernels_.counterBytes, "counters");
    ctx_->fill(counters_, 0);
    work_ = ctx_->createBuffer(kernels_.workBytes, "work");
    ctx_->fill(work_, 0xdeadbeefu); // garbage, as another kernel's partials leave it
    logits_ = ctx_->createBuffer(2 * vocab * 4, "logits");
    sampling_ = ctx_->createBuffer(plan::samplingWords(vocab) * 4, "sampling");
    token_ = ctx_->createBuffer(16, "token");
    state_ = ctx_->createBuffer((2 + kSeq) * 4, "state");
    std::vector<vk::BufferRange> ranges;
    for (const vk::Buffer *b : {&logits_, &token_, &sampling_, &counters_, &work_, &state_})
      ranges.push_back({b->handle(), 0, b->size()});
    sets_.clear();
    for (vk::Pipeline &pipeline : pipelines_) sets_.push_back(ctx_->createDescriptorSet(pipeline, ranges));
  }

  // The token the launches choose for the last of `tokens` rows, at `position`; checks the state.
  int32_t sampleOnGpu(const std::vector<float> &logits, uint32_t tokens, const std::vector<uint32_t> &params,
                      const std::vector<bool> &seen, uint32_t position) {
    ctx_->upload(logits_, 0, logits.data(), logits.size() * 4);
    std::vector<uint32_t> sampling = params;
    sampling.resize(plan::samplingWords(vocab_), 0);
    for (size_t i = 0; i < seen.size(); ++i)
      if (seen[i]) sampling[plan::kSamplingParamWords + i / 32] |= 1u << (i % 32);
    ctx_->upload(sampling_, 0, sampling.data(), sampling.size() * 4);
    const uint32_t greedy = 77;
    ctx_->upload(token_, 0, &greedy, 4);
    std::vector<uint32_t> stateWords(2 + kSeq, 0);
    stateWords[0] = position, stateWords[1] = kGenerated, stateWords[2 + kGenerated - 1] = greedy;
    ctx_->upload(state_, 0, stateWords.data(), stateWords.size() * 4);
    VkCommandBuffer cmd = ctx_->beginCommands();
    const uint32_t push[2] = {tokens, tokens - 1};
    for (size_t stage = 0; stage < pipelines_.size(); ++stage) {
      ctx_->dispatch(cmd, pipelines_[stage], sets_[stage], push, sizeof push, kernels_.grid[0], 1, 1);
      ctx_->computeBarrier(cmd);
    }
    ctx_->submitAndWait(cmd);

    int32_t chosen = -1;
    ctx_->download(token_, 0, &chosen, 4);
    ctx_->download(state_, 0, stateWords.data(), stateWords.size() * 4);
    if (params[plan::kAdvances]) { // in place of the argmax launch: appends and moves on
      EXPECT_EQ(stateWords[0], position + 1) << "the sampler moves the position on";
      EXPECT_EQ(stateWords[1], kGenerated + 1) << "and counts the token";
      EXPECT_EQ(int32_t(stateWords[2 + kGenerated]), chosen) << "the state's token list has the choice";
      EXPECT_EQ(stateWords[2 + kGenerated - 1], greedy) << "after the tokens before it";
    } else {
      EXPECT_EQ(stateWords[0], position) << "the sampler leaves the position alone";
      EXPECT_EQ(stateWords[1], kGenerated) << "and the count of tokens";
      EXPECT_EQ(int32_t(stateWords[2 + kGenerated - 1]), chosen) << "the state's token list has the choice";
    }
    std::vector<int32_t> counters(kernels_.counterBytes / 4, -1);
    ctx_->download(counters_, 0, counters.data(), kernels_.counterBytes);
    for (int32_t c : counters) EXPECT_EQ(c, 0) << "a counter was left behind";
    std::vector<uint32_t> after(sampling.size());
    ctx_->download(sampling_, 0, after.data(), after.size() * 4);
    if (chosen >= 0 && chosen < vocab_) {
      const size_t word = plan::kSamplingParamWords + size_t(chosen) / 32;
      EXPECT_EQ(after[word], sampling[word] | 1u << (chosen % 32)) << "the penalty sees the token chosen";
    }
    return chosen;
  }

  void expectSameAsReference(const SamplingOptions &o, const std::string &what, int rows = 3) {
    const std::vector<uint32_t> params = exec::samplingParamWords(o, vocab_);
    for (int r = 0; r < rows; ++r) {
      std::vector<float> row = logitsRow(vocab_, uint32_t(vocab_ + r));
      std::vector<bool> seen(size_t(vocab_), false);
      std::mt19937 rng{uint32_t(r)};
      for (int i = 0; i < 40; ++i) seen[rng() % vocab_] = true;
      std::vector<float> logits(row.size() * 2, 100.0f); // an earlier row, which must not count
      std::copy(row.begin(), row.end(), logits.begin() + vocab_);
      for (uint32_t position : {5u, 6u, 1000u}) {
        const int32_t expected = samplertest::sample(row.data(), vocab_, params, seen, position);
        EXPECT_EQ(sampleOnGpu(logits, 2, params, seen, position), expected)
            << what << ", vocabulary " << vocab_ << ", row " << r << ", position " << position;
        ASSERT_FALSE(HasFatalFailure());
      }
    }
  }

  int64_t vocab_ = 0;
  codegen::SamplerKernels kernels_;
  std::vector<vk::Pipeline> pipelines_;
  vk::Buffer counters_, work_, logits_, sampling_, token_, state_;
  std::vector<VkDescriptorSet> sets_;
};

TEST_F(SamplerKernelTest, ChoosesWhatTheReferenceChooses) {
  // One workgroup; a few; Qwen2.5's vocabulary (~150 workgroups).
  for (int64_t vocab : {1000l, 5000l, 151936l}) {
    prepare(vocab);
    expectSameAsReference(options(0.0, 0, 1.0, 0.0, 1.3), "greedy with a penalty");
    expectSameAsReference(options(0.7), "temperature");
    expectSameAsReference(options(1.0, 20), "top-k 20");
    expectSameAsReference(options(1.0, 1), "top-k 1");
    expectSameAsReference(options(0.8, 0, 0.9), "top-p 0.9");
    expectSameAsReference(options(1.0, 0, 1e-6), "top-p near 0: the most likely token");
    expectSameAsReference(options(0.7, 20, 0.8, 0.0, 1.05, 99), "Qwen2.5's defaults");
    expectSameAsReference(options(2.0, 400, 0.5), "top-p reached above the top-k's bin");
    expectSameAsReference(options(2.0, 50000, 0.99), "top-k past the candidates");
    expectSameAsReference(options(1.0, 0, 1.0, 0.05), "min-p");
    ASSERT_FALSE(HasFatalFailure());
  }
}

// Gemma's 262144 tokens fill all 256 blocks of the draw's prefix; more take more than 4 a invocation.
TEST_F(SamplerKernelTest, LargeVocabulariesFillTheBlocks) {
  for (int64_t vocab : {262144l, 300001l}) {
    prepare(vocab);
    EXPECT_LE(kernels_.grid[0], 256u);
    expectSameAsReference(options(0.8, 0, 0.9), "top-p 0.9", 1);
    expectSameAsReference(options(1.0, 40, 0.8, 0.0, 1.1), "top-k and top-p", 1);
    ASSERT_FALSE(HasFatalFailure());
  }
}

TEST_F(SamplerKernelTest, GreedyTiesAndSeedsAreStable) {
  prepare(5000);
  std::vector<float> row(5000, -3.0f);
  row[4000] = row[1234] = 2.0f; // a tie across workgroups: the lower id
  const std::vector<bool> seen(5000, false);
  EXPECT_EQ(sampleOnGpu(row, 1, exec::samplingParamWords(options(0.0, 0, 1.0, 0.0, 1.1), 5000), seen, 3),
            1234);
  // Every token equally likely: the seed and position pick, the same each time.
  std::fill(row.begin(), row.end(), 0.0f);
  std::set<int32_t> drawn;
  for (uint32_t position = 0; position < 6; ++position) {
    const std::vector<uint32_t> params = exec::samplingParamWords(options(1.0, 0, 1.0, 0.0, 1.0, 123), 5000);
    const int32_t first = sampleOnGpu(row, 1, params, seen, position);
    EXPECT_EQ(sampleOnGpu(row, 1, params, seen, position), first);
    EXPECT_EQ(first, samplertest::sample(row.data(), 5000, params, seen, position));
    drawn.insert(first);
  }
  EXPECT_GT(drawn.size(), 4u) << "positions draw afresh";
}

// Where decode runs without its argmax launch, the sampler appends the token and moves the position on; the
// draw is that of the token's position, one past the fed token's.
TEST_F(SamplerKernelTest, AdvancesInPlaceOfTheArgmaxLaunch) {
  prepare(5000);
  const std::vector<bool> seen(5000, false);
  const std::vector<float> row = logitsRow(5000, 3);
  for (const SamplingOptions &o : {options(0.8, 20, 0.9), options(0.0, 0, 1.0, 0.0, 1.2)}) {
    std::vector<uint32_t> params = exec::samplingParamWords(o, 5000);
    params[plan::kAdvances] = 1;
    for (uint32_t position : {9u, 10u})
      EXPECT_EQ(sampleOnGpu(row, 1, params, seen, position),
                samplertest::sample(row.data(), 5000, params, seen, position + 1))
          << "temperature " << o.temperature;
  }
  // No candidate (a NaN maximum): the greedy token all the same.
  std::vector<float> nan(5000, NAN);
  std::vector<uint32_t> params = exec::samplingParamWords(options(1.0), 5000);
  params[plan::kAdvances] = 1;
  EXPECT_GE(sampleOnGpu(nan, 1, params, seen, 4), 0);
}

// transformers' cuts (the host Sampler's semantics, HF's order): what the reference keeps is the exact set
// where no other token lies within a key of its edge.
TEST(SamplerReference, KeepsTransformersSetsAwayFromTies) {
  const int64_t vocab = 3000;
  int compared = 0;
  for (uint32_t seed = 0; seed < 40; ++seed) {
    std::vector<float> row = logitsRow(vocab, seed, false);
    for (const SamplingOptions &o :
         {options(0.8, 0, 0.9), options(1.0, 30), options(1.3, 100, 0.7), options(1.0, 0, 1.0, 0.02)}) {
      const std::vector<uint32_t> params = exec::samplingParamWords(o, vocab);
      uint32_t best = 0;
      const std::vector<samplertest::Candidate> c =
          samplertest::candidates(row.data(), vocab, params, std::vector<bool>(vocab, false), best);
      const uint32_t cut = samplertest::cutKey(c, params);
      std::set<uint32_t> kept, nearEdge;
      for (const samplertest::Candidate &x : c) {
        if (x.key >= cut) kept.insert(x.id);
        if (x.key + 1 >= cut && x.key <= cut + 1) nearEdge.insert(x.id);
      }
      if (nearEdge.size() > 1) continue; // a tie at the edge: kept whole by design
      // The exact set: sort by logit, take top-k (ties kept), then the nucleus over their softmax, then
      // min-p.
      std::vector<int32_t> order(static_cast<size_t>(vocab));
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
      size_t end = order.size();
      if (o.topK > 0 && o.topK < vocab) {
        end = size_t(o.topK);
        while (end < order.size() && row[order[end]] == row[order[end - 1]]) ++end;
      }
      const double m = row[order[0]];
      std::vector<double> w(end);
      double total = 0;
      for (size_t i = 0; i < end; ++i) total += w[i] = std::exp((row[order[i]] - m) / o.temperature);
      if (o.topP < 1.0) {
        double sum = 0;
        for (size_t i = 0; i < end; ++i)
          if ((sum += w[i]) >= o.topP * total) {
            end = i + 1;
            break;
          }
      }
      std::set<uint32_t> exact;
      for (size_t i = 0; i < end; ++i)
        if (w[i] >= o.minP && w[i] >= std::ldexp(1.0, -31)) exact.insert(uint32_t(order[i]));
      EXPECT_EQ(kept, exact) << "seed " << seed << ", temperature " << o.temperature << ", top-k " << o.topK
                             << ", top-p " << o.topP << ", min-p " << o.minP;
      ++compared;
    }
  }
  EXPECT_GT(compared, 100) << "too many rows had ties at the edge to compare";
}

// The draw's frequencies over positions follow the softmax.
TEST(SamplerReference, DrawsInProportion) {
  const std::vector<float> row = {0.0f, 1.0f, 2.0f, -1.0f, 0.5f};
  const std::vector<uint32_t> params = exec::samplingParamWords(options(1.0, 0, 1.0, 0.0, 1.0, 42), 5);
  std::map<int32_t, int> counts;
  const int draws = 40000;
  for (uint32_t position = 0; position < draws; ++position)
    ++counts[samplertest::sample(row.data(), 5, params, std::vector<bool>(5, false), position)];
  double total = 0;
  for (float v : row) total += std::exp(v);
  for (int id = 0; id < 5; ++id) {
    const double p = std::exp(row[id]) / total;
    EXPECT_NEAR(counts[id] / double(draws), p, 4 * std::sqrt(p * (1 - p) / draws)) << "token " << id;
  }
}

} // namespace
