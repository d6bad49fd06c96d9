// Decode against prefill. Decode steps run their own kernels (the one-token gemv, the grouped projections
// with RoPE and the KV-cache write in their epilogue, split-KV attention with its combine); prefill runs the
// tiled ones. For the same tokens both must give the same logits: greedy decoding of N tokens after a
// prompt of P, then one prefill of the prompt and those tokens, whose row P - 1 + i must match decode step
// i. Contexts reach well past the short greedy runs of the reference fixtures, so that attention spreads
// over several splits, and the synthetic shapes take the gemv through several input tiles and unaligned
// rows.
#include "runtime/weights/Safetensors.h"
#include "test/e2e/ToolRun.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;
using gerbil::weights::SafetensorsFile;
using gerbil::weights::TensorView;

using namespace gerbil::e2e;

namespace {

struct Case {
  std::string name;
  std::string config; // relative to the test data folder
  std::string dtype;
  std::string flags;  // more gerbilc options
  bool randomWeights; // gerbil-random-weights instead of the fixture's checkpoint
  int promptTokens;
  int newTokens;
};

void PrintTo(const Case &c, std::ostream *out) {
  *out << c.name;
}

class DecodeTest : public ::testing::TestWithParam<Case> {
protected:
  void SetUp() override {
    work_ =
        fs::temp_directory_path() / ("gerbil-decode-" + GetParam().name + "-" + std::to_string(::getpid()));
    fs::create_directories(work_);
  }
  void TearDown() override { fs::remove_all(work_); }

  fs::path work_;
};

TEST_P(DecodeTest, DecodeStepsMatchPrefill) {
  const Case &c = GetParam();
  fs::path config = testData() / c.config, plan = work_ / "model.plan";
  Result compiled = run((binDir() / "gerbilc").string() + " " + config.string() + " -o " + plan.string() +
                        " --dtype " + c.dtype + " " + c.flags);
  ASSERT_EQ(compiled.code, 0) << compiled.output;
  std::string exec = (binDir() / "gerbil-exec").string() + " " + plan.string();
  if (c.randomWeights) {
    fs::path weights = work_ / "weights";
    Result made = run((binDir() / "gerbil-random-weights").string() + " " + plan.string() + " -o " +
                      weights.string() + " --dtype f32");
    ASSERT_EQ(made.code, 0) << made.output;
    exec += " --weights " + weights.string();
  }

  std::vector<int64_t> prompt;
  for (int i = 0; i < c.promptTokens; ++i) prompt.push_back((i * 37 + 11) % 150 + 3);
  fs::path stepsFile = work_ / "steps.safetensors";
  Result decoded = run(exec + " --prompt-ids " + joinIds(prompt) + " --max-new-tokens " +
                       std::to_string(c.newTokens) + " --json --dump-logits " + stepsFile.string());
  if (decoded.code == 4 && decoded.output.find("no Vulkan device") != std::string::npos)
    GTEST_SKIP() << decoded.output;
  ASSERT_EQ(decoded.code, 0) << decoded.output;
  std::vector<int64_t> generated = outputIds(decoded.output);
  ASSERT_EQ(generated.size(), size_t(c.newTokens)) << decoded.output;

  // The same greedy run on the GPU alone (replayed command buffers, no logits read back) picks the same
  // tokens.
  Result gpuGreedy = run(exec + " --prompt-ids " + joinIds(prompt) + " --max-new-tokens " +
                         std::to_string(c.newTokens) + " --json");
  ASSERT_EQ(gpuGreedy.code, 0) << gpuGreedy.output;
  EXPECT_EQ(outputIds(gpuGreedy.output), generated);

  std::vector<int64_t> all = prompt;
  all.insert(all.end(), generated.begin(), generated.end() - 1);
  fs::path prefillFile = work_ / "prefill.safetensors";
  Result prefilled = run(exec + " --prompt-ids " + joinIds(all) +
                         " --max-new-tokens 0 --json --dump-logits " + prefillFile.string());
  ASSERT_EQ(prefilled.code, 0) << prefilled.output;

  SafetensorsFile stepsLogits(stepsFile.string()), prefillLogits(prefillFile.string());
  std::vector<float> steps = floats(stepsLogits.tensors().at("step_logits"));
  std::vector<float> rows = floats(prefillLogits.tensors().at("logits"));
  const size_t vocab = steps.size() / c.newTokens;
  ASSERT_EQ(rows.size(), all.size() * vocab);
  double largest = 0;
  for (float v : rows) largest = std::max(largest, double(std::fabs(v)));
  ASSERT_GT(largest, 0.0);
  const double tolerance = 2e-4 * largest;
  for (int i = 0; i < c.newTokens; ++i) {
    double worst = 0;
    for (size_t v = 0; v < vocab; ++v)
      worst = std::max(worst,
                       std::fabs(double(steps[i * vocab + v]) - rows[(c.promptTokens - 1 + i) * vocab + v]));
    ASSERT_LE(worst, tolerance) << "step " << i << " (position " << c.promptTokens - 1 + i
                                << "), largest logit " << largest;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, DecodeTest,
    ::testing::Values(
        // MQA (4 query heads on one kv head), llama3 rope scaling, a long context.
        Case{"llama_tiny", "fixtures/models/llama-tiny/config.json", "f32", "", false, 20, 150},
        Case{"llama_tiny_f16", "fixtures/models/llama-tiny/config.json", "f16", "", false, 20, 100},
        Case{"llama_tiny_no_subgroup_ops", "fixtures/models/llama-tiny/config.json", "f16",
             "--no-subgroup-ops", false, 20, 100},
        Case{"llama_tiny_bf16", "fixtures/models/llama-tiny-bf16/config.json", "f32", "", false, 10, 40},
        // q/k/v biases, GQA 2:1.
        Case{"qwen2_tiny", "fixtures/models/qwen2-tiny/config.json", "f32", "", false, 20, 120},
        // q/k norms between the projections and RoPE.
        Case{"qwen3_tiny", "fixtures/models/qwen3-tiny/config.json", "f16", "", false, 10, 60},
        // A sliding window of 8 positions.
        Case{"mistral_tiny", "fixtures/models/mistral-tiny/config.json", "f32", "", false, 20, 60},
        Case{"phi3_tiny", "fixtures/models/phi3-tiny/config.json", "f32", "", false, 10, 60},
        // LayerNorm, learned positions, fused c_attn, GELU (128 positions).
        Case{"gpt2_tiny", "fixtures/models/gpt2-tiny/config.json", "f32", "", false, 10, 100},
        // head_dim 8, 9 heads on 3 kv heads.
        Case{"smollm_tiny", "fixtures/models/smollm-tiny/config.json", "f16", "", false, 10, 60},
        // Partial rotary (a quarter of each head), q/k/v biases, LayerNorm.
        Case{"stablelm_tiny", "fixtures/models/stablelm-tiny/config.json", "f32", "", false, 20, 80},
        // down_proj reads 6160 inputs: 770 16-byte loads a row, so the lanes' unrolled strides end in a tail.
        Case{"wide_llama_f16", "fixtures/decode/wide-llama.json", "f16", "", true, 8, 16},
        Case{"wide_llama_f32", "fixtures/decode/wide-llama.json", "f32", "", true, 6, 10},
        // Rows of 84 and 90 weights (not 16-byte multiples), head_dim 14, 6 query heads on one kv head.
        Case{"odd_qwen2_f16", "fixtures/decode/odd-qwen2.json", "f16", "", true, 12, 100},
        Case{"odd_qwen2_no_subgroup_ops", "fixtures/decode/odd-qwen2.json", "f32", "--no-subgroup-ops", true,
             12, 60},
        // 320 positions: decode attention splits over three workgroups (4 warps here: 128 positions each) and
        // combines them through the scratch.
        Case{"odd_qwen2_three_splits", "fixtures/decode/odd-qwen2.json", "f32", "", true, 200, 120}),
    [](const auto &info) { return info.param.name; });

} // namespace
