// The greedy argmax, as codegen specialises it: over one and many workgroups (and more than one run of
// them), ties, -inf, the state it advances and the counters it leaves at 0.
#include "compiler/codegen/ArgmaxKernel.h"
#include "test/unit/kernels/KernelTestBase.h"

using namespace gerbil;
using namespace gerbil::kerneltest;

namespace {

class ArgmaxKernelTest : public KernelTestBase {
protected:
  // The token of the last of `tokens` rows of `logits` (vocab wide) over two steps: result, input id and the
  // state's token list and position, and the counter back at 0.
  void check(const std::vector<float> &logits, int64_t vocab, uint32_t tokens, int32_t expected) {
    codegen::ArgmaxKernel kernel = codegen::argmaxKernel(vocab, 8);
    std::vector<uint32_t> spirv =
        compiler_.compile(codegen::writeKernel(kernel.source), "argmax test kernel");
    std::vector<vk::Buffer> buffers;
    buffers.push_back(upload(logits, "logits"));
    buffers.push_back(output(1, "result"));
    buffers.push_back(output(1, "ids"));
    buffers.push_back(ctx_->createBuffer(kernel.scratchPartialBytes, "partial"));
    buffers.push_back(ctx_->createBuffer(kernel.scratchCounterBytes, "counters"));
    ctx_->fill(buffers.back(), 0);
    buffers.push_back(state(5));
    ASSERT_EQ(buffers.size(), kernel.source.bindings.size() + 1);
    for (uint32_t step = 0; step < 2; ++step) {
      run(spirv, buffers, kernel.grid, tokens, "argmax test kernel");
      int32_t result = 0, id = 0;
      ctx_->download(buffers[1], 0, &result, 4);
      ctx_->download(buffers[2], 0, &id, 4);
      std::vector<int32_t> counters(kernel.scratchCounterBytes / 4, -1);
      ctx_->download(buffers[4], 0, counters.data(), kernel.scratchCounterBytes);
      EXPECT_EQ(result, expected) << "vocab " << vocab << ", step " << step;
      EXPECT_EQ(id, expected) << "vocab " << vocab;
      for (int32_t counter : counters) EXPECT_EQ(counter, 0) << "a counter was left behind";
      std::vector<uint32_t> words(4);
      ctx_->download(buffers[5], 0, words.data(), 16);
      EXPECT_EQ(words[0], 5 + (step + 1) * tokens) << "the position advances by the step's tokens";
      EXPECT_EQ(words[1], step + 1) << "generated tokens";
      EXPECT_EQ(words[2 + step], static_cast<uint32_t>(expected)) << "the state's token list";
    }
  }
};

TEST_F(ArgmaxKernelTest, FindsTheFirstLargestLogitOfTheLastRow) {
  // 600000 logits: 293 workgroups, more than one run of 256, hand over in two segments.
  EXPECT_EQ(codegen::argmaxKernel(600000, 8).scratchCounterBytes, 3 * 4);
  for (int64_t vocab : {5l, 2048l, 2049l, 20000l, 128256l, 600000l}) {
    const uint32_t tokens = 3;
    std::mt19937 rng(static_cast<uint32_t>(vocab));
    std::uniform_real_distribution<float> uniform(-20.0f, 20.0f);
    std::vector<float> logits(tokens * vocab);
    for (float &v : logits) v = uniform(rng);
    float *last = &logits[(tokens - 1) * vocab];
    // Larger logits in the earlier rows, which must not count.
    logits[vocab / 3] = 100.0f;
    int64_t first = vocab * 2 / 3, later = vocab - 1;
    last[first] = last[later] = 50.0f; // a tie, across workgroups for the larger vocabularies
    check(logits, vocab, tokens, static_cast<int32_t>(first));
    ASSERT_FALSE(HasFatalFailure());
    // -inf everywhere but one logit; then all -inf, which gives the first index.
    std::fill(last, last + vocab, -INFINITY);
    last[vocab / 2] = -1e30f;
    check(logits, vocab, tokens, static_cast<int32_t>(vocab / 2));
    std::fill(last, last + vocab, -INFINITY);
    check(logits, vocab, tokens, 0);
    ASSERT_FALSE(HasFatalFailure());
  }
}

} // namespace
