// End to end: gerbilc compiles each fixture's config.json, gerbil-exec runs it on the Vulkan device
// (lavapipe in CI) and its logits and greedy tokens are compared with HuggingFace transformers' reference.
#include "test/e2e/ToolRun.h"
#include "runtime/weights/Safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;
using gerbil::weights::SafetensorsFile;
using gerbil::weights::TensorDType;
using gerbil::weights::TensorView;

using namespace gerbil::e2e;

namespace {

std::vector<int64_t> ints(const TensorView &t) {
  std::vector<int64_t> v(t.numElements());
  std::memcpy(v.data(), t.data, t.bytes);
  return v;
}

// The greedy steps of the reference that a path whose logits stay within `tolerance` of its own must
// reproduce: all of them, or up to the first near-tie (top two logits less than 2 · tolerance apart), which
// either token may win; after it the contexts may differ. Each step's top two tokens in `top`.
size_t decidedSteps(const std::vector<float> &logits, size_t vocab, double tolerance,
                    std::vector<std::pair<int64_t, int64_t>> &top) {
  const size_t steps = logits.size() / vocab;
  for (size_t s = 0; s < steps; ++s) {
    const float *row = logits.data() + s * vocab;
    int64_t first = 0, second = -1;
    for (size_t i = 1; i < vocab; ++i)
      if (row[i] > row[first])
        second = first, first = int64_t(i);
      else if (second < 0 || row[i] > row[second])
        second = int64_t(i);
    top.emplace_back(first, second);
    if (row[first] - row[second] < 2 * tolerance) return s + 1;
  }
  return steps;
}

double maxAbsDifference(const std::vector<float> &a, const std::vector<float> &b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])));
  return worst;
}

class ModelTest : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    model_ = testData() / "fixtures" / "models" / GetParam();
    work_ = fs::temp_directory_path() / ("gerbil-e2e-" + GetParam() + "-" + std::to_string(::getpid()));
    fs::create_directories(work_);
  }
  void TearDown() override { fs::remove_all(work_); }

  // Compiles the fixture with f32 or f16 weights and more gerbilc flags, for the target profile
  // GERBIL_E2E_TARGET names (generic by default); returns the plan path.
  fs::path compile(const std::string &dtype, const std::string &flags) {
    fs::path plan = work_ / (dtype + ".plan");
    const char *targetVariable = std::getenv("GERBIL_E2E_TARGET");
    std::string target = targetVariable && *targetVariable ? targetVariable : "generic";
    std::string command = (binDir() / "gerbilc").string() + " " + (model_ / "config.json").string() + " -o " +
                          plan.string() + " --dtype " + dtype + " " + flags;
    command += " --target ";
    command += target;
    Result r = run(command);
    EXPECT_EQ(r.code, 0) << r.output;
    return plan;
  }

  // Runs the plan; skips the test when there is no Vulkan device.
  Result execute(const fs::path &plan, const std::string &ids, int newTokens, const fs::path &logits) {
    Result r = run((binDir() / "gerbil-exec").string() + " " + plan.string() + " --prompt-ids " + ids +
                " --max-new-tokens " + std::to_string(newTokens) + " --temperature 0 --json --dump-logits " +
                logits.string());
    if (r.code == 4 && r.output.find("no Vulkan device") != std::string::npos) skipped_ = true;
    return r;
  }

  void checkAgainstReference(const std::string &dtype, double tolerance, const std::string &flags = "") {
    SafetensorsFile reference((model_ / "reference.safetensors").string());
    const auto &ref = reference.tensors();
    fs::path plan = compile(dtype, flags);

    // Every prompt position of one prefill.
    std::vector<int64_t> inputIds = ints(ref.at("input_ids"));
    fs::path prefillLogits = work_ / "prefill.safetensors";
    Result prefill = execute(plan, joinIds(inputIds), 0, prefillLogits);
    if (skipped_) GTEST_SKIP() << "no Vulkan device: " << prefill.output;
    ASSERT_EQ(prefill.code, 0) << prefill.output;
    SafetensorsFile got(prefillLogits.string());
    const TensorView &logits = got.tensors().at("logits");
    EXPECT_EQ(logits.shape, ref.at("logits").shape);
    EXPECT_LE(maxAbsDifference(floats(logits), floats(ref.at("logits"))), tolerance) << "prompt logits";

    // Greedy decoding through the KV cache.
    std::vector<int64_t> prompt = ints(ref.at("greedy_prompt"));
    std::vector<int64_t> expected = ints(ref.at("greedy_output"));
    int newTokens = static_cast<int>(expected.size() - prompt.size());
    fs::path decodeLogits = work_ / "decode.safetensors";
    Result decode = execute(plan, joinIds(prompt), newTokens, decodeLogits);
    ASSERT_EQ(decode.code, 0) << decode.output;
    std::vector<int64_t> want(expected.begin() + prompt.size(), expected.end());
    const std::vector<float> refSteps = floats(ref.at("greedy_logits"));
    const size_t vocab = refSteps.size() / want.size();
    std::vector<std::pair<int64_t, int64_t>> top;
    const size_t decided = decidedSteps(refSteps, vocab, tolerance, top);
    std::vector<int64_t> tokens = outputIds(decode.output);
    ASSERT_EQ(tokens.size(), want.size()) << decode.output;
    for (size_t s = 0; s < decided; ++s) {
      const bool tie = s + 1 == decided && decided < want.size();
      if (tie) // a near-tie of the reference: either of its two tokens
        EXPECT_TRUE(tokens[s] == top[s].first || tokens[s] == top[s].second)
            << "step " << s << ": " << tokens[s] << ", not " << top[s].first << " or " << top[s].second;
      else
        EXPECT_EQ(tokens[s], want[s]) << "step " << s << " of " << decode.output;
    }
    SafetensorsFile steps(decodeLogits.string());
    std::vector<float> gotSteps = floats(steps.tensors().at("step_logits"));
    gotSteps.resize(std::min(gotSteps.size(), decided * vocab));
    EXPECT_LE(
        maxAbsDifference(gotSteps, std::vector<float>(refSteps.begin(), refSteps.begin() + decided * vocab)),
        tolerance)
        << "decode step logits (" << decided << " steps before the reference's first near-tie)";
  }

  fs::path model_, work_;
  bool skipped_ = false;
};

// f32 weights: the tolerance of the reference, 1e-3 (a correct implementation lands near 1e-5).
TEST_P(ModelTest, F32MatchesTransformers) { checkAgainstReference("f32", 1e-3); }

// f16 weight matrices (norms and biases stay f32, activations are f32): the rounding of the weights moves
// the logits of these models (|logits| up to 37) by at most ~0.04; the greedy tokens must not change, up to
// a near-tie of the reference that the tolerance allows either way (qwen3-tiny's third step: 50 ahead of
// 406 by 0.0037, which folding the norm weights into f16 matrices turned round).
TEST_P(ModelTest, F16KeepsGreedyTokens) { checkAgainstReference("f16", 0.1); }

// And with the KV cache in f16 (--kv-dtype f16; transformers' own cache holds the model's dtype): the keys
// and values rounded to f16 move these logits by much less than the weights' rounding; the same tolerance.
TEST_P(ModelTest, F16CacheKeepsGreedyTokens) {
  checkAgainstReference("f16", 0.1, "--kv-dtype f16");
}

// The embedding read by decode's first q/k/v gemv (--fuse-embedding): the rows it looks up and writes out are
// the embedding launch's, f32 (4 a load) and f16 (8 halves a load) alike.
TEST_P(ModelTest, F32WithFusedEmbeddingMatchesTransformers) {
  checkAgainstReference("f32", 1e-3, "--fuse-embedding");
}
TEST_P(ModelTest, F16WithFusedEmbeddingKeepsGreedyTokens) {
  checkAgainstReference("f16", 0.1, "--fuse-embedding");
}

// Reductions through shared memory only (--no-subgroup-ops, for devices without subgroup arithmetic): the
// gemvs', the decode attention's and the norms' workgroup sums, which the default plans take through
// subgroup operations.
TEST_P(ModelTest, F32WithoutSubgroupOpsMatchesTransformers) {
  checkAgainstReference("f32", 1e-3, "--no-subgroup-ops");
}

// Kernels that reach their buffers through device addresses (--buffer-addresses) compute what they compute
// through descriptors: the f32 path's tolerance.
TEST_P(ModelTest, F32ByBufferAddressesMatchesTransformers) {
  checkAgainstReference("f32", 1e-3, "--buffer-addresses");
}

// The opt-in decode levers together, as the benchmark's "all" variant compiles them (with --spread-pages,
// which the generic target gives no page words to): the f16 cache, kernels by address, the fused embedding.
TEST_P(ModelTest, F16WithEveryDecodeOptionKeepsGreedyTokens) {
  checkAgainstReference("f16", 0.1, "--kv-dtype f16 --buffer-addresses --fuse-embedding --spread-pages");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ModelTest,
                         ::testing::Values("llama-tiny", "llama-tiny-bf16", "qwen2-tiny", "qwen3-tiny", "mistral-tiny",
                                           "phi3-tiny", "gpt2-tiny", "smollm-tiny", "stablelm-tiny"),
                         [](const auto &info) {
                           std::string name = info.param;
                           for (char &c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

} // namespace
