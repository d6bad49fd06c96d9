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

std::string joinIds(const std::vector<int64_t> &ids, size_t count) {
  std::string s;
  for (size_t i = 0; i < count; ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s;
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

  // Compiles the fixture (for the target profile GERBIL_E2E_TARGET names, generic by default); returns the
  // plan path.
  fs::path compile(const std::string &dtype) {
    fs::path plan = work_ / (dtype + ".plan");
    const char *targetVariable = std::getenv("GERBIL_E2E_TARGET");
    std::string target = targetVariable && *targetVariable ? targetVariable : "generic";
    std::string command = (binDir() / "gerbilc").string() + " " + (model_ / "config.json").string() + " -o " +
                          plan.string() + " --dtype " + dtype;
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

  void checkAgainstReference(const std::string &dtype, double tolerance) {
    SafetensorsFile reference((model_ / "reference.safetensors").string());
    const auto &ref = reference.tensors();
    fs::path plan = compile(dtype);

    // Every prompt position of one prefill.
    std::vector<int64_t> inputIds = ints(ref.at("input_ids"));
    fs::path prefillLogits = work_ / "prefill.safetensors";
    Result prefill = execute(plan, joinIds(inputIds, inputIds.size()), 0, prefillLogits);
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
    Result decode = execute(plan, joinIds(prompt, prompt.size()), newTokens, decodeLogits);
    ASSERT_EQ(decode.code, 0) << decode.output;
    std::vector<int64_t> want(expected.begin() + prompt.size(), expected.end());
    std::string wantJson = "\"output_ids\":[" + joinIds(want, want.size()) + "]";
    EXPECT_NE(decode.output.find(wantJson), std::string::npos) << "expected " << wantJson << " in " << decode.output;
    SafetensorsFile steps(decodeLogits.string());
    EXPECT_LE(maxAbsDifference(floats(steps.tensors().at("step_logits")), floats(ref.at("greedy_logits"))), tolerance)
        << "decode step logits";
  }

  fs::path model_, work_;
  bool skipped_ = false;
};

// f32 weights: the tolerance of the reference, 1e-3 (a correct implementation lands near 1e-5).
TEST_P(ModelTest, F32MatchesTransformers) { checkAgainstReference("f32", 1e-3); }

// f16 weight matrices (norms and biases stay f32, activations are f32): the rounding of the weights moves
// the logits of these models (|logits| up to 37) by at most ~0.04; the greedy tokens must not change.
TEST_P(ModelTest, F16KeepsGreedyTokens) { checkAgainstReference("f16", 0.1); }

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
