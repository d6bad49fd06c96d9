// The front end: arch specs + HuggingFace configs -> ModelDescription. Checks every fixture model in both
// config forms against its checkpoint, the real configs of each family, the rope scalings against independent
// computations, and that every kind of bad input gets a FrontendError naming the file and the key.
#include "compiler/frontend/Frontend.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <numbers>
#include <set>
#include <sstream>
#include <unistd.h>

namespace fs = std::filesystem;
using gerbil::FrontendError;
using gerbil::FrontendOptions;
using gerbil::ModelDescription;
using gerbil::WeightDescription;
using nlohmann::json;

namespace {

fs::path testDataDir() {
  if (const char *dir = std::getenv("GERBIL_TEST_DATA")) return dir;
  return fs::path(__FILE__).parent_path().parent_path();
}

fs::path sourceRoot() {
  return testDataDir().parent_path();
}
fs::path modelFixtures() {
  return testDataDir() / "fixtures" / "models";
}
fs::path realConfigs() {
  return testDataDir() / "fixtures" / "configs";
}

std::string readText(const fs::path &path) {
  std::ifstream stream(path, std::ios::binary);
  EXPECT_TRUE(stream) << "cannot read " << path;
  std::ostringstream text;
  text << stream.rdbuf();
  return text.str();
}

json readJson(const fs::path &path) {
  return json::parse(readText(path));
}

// The reference fixtures made by make_reference.py (other model folders, such as the text-mode one, lack
// its reference.json).
std::vector<std::string> fixtureNames() {
  std::vector<std::string> names;
  for (const auto &entry : fs::directory_iterator(modelFixtures()))
    if (fs::exists(entry.path() / "reference.json")) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// The tensors of a safetensors file: name -> shape (the JSON header after the 8-byte length).
std::map<std::string, std::vector<int64_t>> safetensorsShapes(const fs::path &path) {
  std::ifstream stream(path, std::ios::binary);
  uint64_t headerSize = 0;
  stream.read(reinterpret_cast<char *>(&headerSize), sizeof headerSize);
  std::string header(headerSize, '\0');
  stream.read(header.data(), static_cast<std::streamsize>(headerSize));
  std::map<std::string, std::vector<int64_t>> shapes;
  json parsed = json::parse(header);
  for (const auto &[name, tensor] : parsed.items())
    if (name != "__metadata__") shapes[name] = tensor.at("shape").get<std::vector<int64_t>>();
  return shapes;
}

// '*' matches any run of characters, as ModelDescription::ignoredKeys promises.
bool globMatches(const std::string &pattern, const std::string &text) {
  if (pattern.empty()) return text.empty();
  if (pattern[0] == '*')
    return globMatches(pattern.substr(1), text) || (!text.empty() && globMatches(pattern, text.substr(1)));
  return !text.empty() && pattern[0] == text[0] && globMatches(pattern.substr(1), text.substr(1));
}

ModelDescription resolve(const json &config, const FrontendOptions &options = {}) {
  return gerbil::resolveModel(config.dump(), "config.json", options);
}

ModelDescription loadFixture(const std::string &name, const std::string &file = "config.json",
                             const FrontendOptions &options = {}) {
  return gerbil::loadModel((modelFixtures() / name / file).string(), options);
}

json fixtureConfig(const std::string &name, const std::string &file = "config.json") {
  return readJson(modelFixtures() / name / file);
}

json realConfig(const std::string &name) {
  return readJson(realConfigs() / (name + ".json"));
}

// Expects `action` to throw a FrontendError whose message contains `expected`.
void expectFrontendError(const std::function<void()> &action, const std::string &expected) {
  try {
    action();
    ADD_FAILURE() << "no error; expected one containing: " << expected;
  } catch (const FrontendError &error) {
    EXPECT_NE(std::string(error.what()).find(expected), std::string::npos)
        << "message:  " << error.what() << "\nexpected: " << expected;
  } catch (const std::exception &error) {
    ADD_FAILURE() << "not a FrontendError: " << error.what();
  }
}

void expectConfigError(const json &config, const std::string &expected, const FrontendOptions &options = {}) {
  expectFrontendError([&] { resolve(config, options); }, expected);
}

const WeightDescription &weight(const ModelDescription &model, const std::string &name) {
  const WeightDescription *found = model.findWeight(name);
  if (!found) throw std::runtime_error("no weight " + name);
  return *found;
}

void expectNear(double expected, double actual, double relative, const std::string &what) {
  EXPECT_LE(std::fabs(expected - actual), relative * std::fabs(expected))
      << what << ": " << expected << " vs " << actual;
}

void expectSameDescription(const ModelDescription &a, const ModelDescription &b) {
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.family, b.family);
  EXPECT_EQ(a.specFile, b.specFile);
  EXPECT_EQ(a.hiddenSize, b.hiddenSize);
  EXPECT_EQ(a.numLayers, b.numLayers);
  EXPECT_EQ(a.numHeads, b.numHeads);
  EXPECT_EQ(a.numKVHeads, b.numKVHeads);
  EXPECT_EQ(a.headDim, b.headDim);
  EXPECT_EQ(a.intermediateSize, b.intermediateSize);
  EXPECT_EQ(a.vocabSize, b.vocabSize);
  EXPECT_EQ(a.maxPositionEmbeddings, b.maxPositionEmbeddings);
  EXPECT_EQ(a.normEps, b.normEps);
  EXPECT_EQ(a.norm, b.norm);
  EXPECT_EQ(a.mlp, b.mlp);
  EXPECT_EQ(a.activation, b.activation);
  EXPECT_EQ(a.positions, b.positions);
  EXPECT_EQ(a.attentionBias, b.attentionBias);
  EXPECT_EQ(a.outputBias, b.outputBias);
  EXPECT_EQ(a.mlpBias, b.mlpBias);
  EXPECT_EQ(a.qkNorm, b.qkNorm);
  EXPECT_EQ(a.tiedEmbeddings, b.tiedEmbeddings);
  EXPECT_EQ(a.attentionScale, b.attentionScale);
  EXPECT_EQ(a.rope.type, b.rope.type);
  EXPECT_EQ(a.rope.theta, b.rope.theta);
  EXPECT_EQ(a.rope.rotaryDim, b.rope.rotaryDim);
  EXPECT_EQ(a.rope.attentionScaling, b.rope.attentionScaling);
  ASSERT_EQ(a.rope.invFreq.size(), b.rope.invFreq.size());
  for (size_t i = 0; i < a.rope.invFreq.size(); ++i)
    expectNear(a.rope.invFreq[i], b.rope.invFreq[i], 1e-12, "invFreq[" + std::to_string(i) + "]");
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i)
    EXPECT_EQ(a.layers[i].slidingWindow, b.layers[i].slidingWindow);
  ASSERT_EQ(a.weights.size(), b.weights.size());
  for (size_t i = 0; i < a.weights.size(); ++i) {
    const auto &x = a.weights[i], &y = b.weights[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.shape, y.shape);
    EXPECT_EQ(x.source.keys, y.source.keys);
    EXPECT_EQ(x.source.transpose, y.source.transpose);
    EXPECT_EQ(x.source.sliceDim, y.source.sliceDim);
    EXPECT_EQ(x.source.sliceStart, y.source.sliceStart);
    EXPECT_EQ(x.source.sliceLength, y.source.sliceLength);
  }
  EXPECT_EQ(a.bosTokenIds, b.bosTokenIds);
  EXPECT_EQ(a.eosTokenIds, b.eosTokenIds);
  EXPECT_EQ(a.ignoredKeys, b.ignoredKeys);
}

// A scratch folder for extra arch specs, removed at the end of the test.
class ScratchDir {
public:
  ScratchDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() /
            ("gerbil-frontend-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path &path() const { return path_; }
  void write(const std::string &name, const std::string &text) const { std::ofstream(path_ / name) << text; }

private:
  fs::path path_;
};

std::string replaceAll(std::string text, const std::string &from, const std::string &to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

std::string builtinSpec(const std::string &file) {
  return readText(sourceRoot() / "arch-specs" / file);
}

} // namespace

// ---------------------------------------------------------------------------------------------------------------
// Fixture models

TEST(FrontendFixtures, ClassicAndTransformersConfigsAgree) {
  auto names = fixtureNames();
  ASSERT_GE(names.size(), 8u);
  for (const auto &name : names) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(fs::exists(modelFixtures() / name / "config.transformers.json"));
    expectSameDescription(loadFixture(name, "config.json"), loadFixture(name, "config.transformers.json"));
  }
}

// Every weight comes from a tensor of the fixture's checkpoint with the right shape after transpose and
// slice, fused tensors are covered exactly by their slices, and every checkpoint tensor is used or ignored.
TEST(FrontendFixtures, WeightsMatchCheckpoint) {
  for (const auto &name : fixtureNames()) {
    SCOPED_TRACE(name);
    ModelDescription model = loadFixture(name);
    auto tensors = safetensorsShapes(modelFixtures() / name / "model.safetensors");
    std::set<std::string> used;
    std::map<std::string, int64_t> slicedRows; // source key -> rows taken by slices
    for (const auto &w : model.weights) {
      SCOPED_TRACE(w.name);
      auto key = std::find_if(w.source.keys.begin(), w.source.keys.end(),
                              [&](const std::string &k) { return tensors.count(k) != 0; });
      ASSERT_NE(key, w.source.keys.end()) << "no source key in the checkpoint: " << w.source.keys.front();
      used.insert(*key);
      std::vector<int64_t> shape = tensors[*key];
      if (w.source.transpose) {
        ASSERT_EQ(shape.size(), 2u);
        std::swap(shape[0], shape[1]);
      }
      if (w.source.sliceDim >= 0) {
        auto dim = static_cast<size_t>(w.source.sliceDim);
        ASSERT_LT(dim, shape.size());
        EXPECT_LE(w.source.sliceStart + w.source.sliceLength, shape[dim]);
        slicedRows[*key] += w.source.sliceLength;
        shape[dim] = w.source.sliceLength;
      }
      EXPECT_EQ(shape, w.shape);
    }
    for (const auto &[key, rows] : slicedRows) {
      std::vector<int64_t> shape = tensors[key];
      const WeightDescription *any = nullptr;
      for (const auto &w : model.weights)
        if (std::find(w.source.keys.begin(), w.source.keys.end(), key) != w.source.keys.end()) any = &w;
      ASSERT_NE(any, nullptr);
      EXPECT_EQ(rows, any->source.transpose ? shape[1] : shape[0]) << key << " is not covered exactly";
    }
    for (const auto &[key, shape] : tensors) {
      bool ignored = std::any_of(model.ignoredKeys.begin(), model.ignoredKeys.end(),
                                 [&](const std::string &pattern) { return globMatches(pattern, key); });
      EXPECT_TRUE(used.count(key) || ignored)
          << "checkpoint tensor " << key << " is neither used nor ignored";
    }
  }
}

TEST(FrontendFixtures, WeightOrderIsStable) {
  for (const auto &name : fixtureNames()) {
    SCOPED_TRACE(name);
    ModelDescription model = loadFixture(name);
    ASSERT_FALSE(model.weights.empty());
    EXPECT_EQ(model.weights.front().name, "embed_tokens.weight");
    std::string last = !model.tiedEmbeddings                       ? "lm_head.weight"
                       : model.norm == gerbil::NormKind::LayerNorm ? "final_norm.bias"
                                                                   : "final_norm.weight";
    EXPECT_EQ(model.weights.back().name, last);
    // Layers appear in order, each as one block.
    int64_t lastLayer = -1;
    for (const auto &w : model.weights) {
      if (w.name.rfind("layers.", 0) != 0) continue;
      int64_t layer = std::stoll(w.name.substr(7));
      EXPECT_TRUE(layer == lastLayer || layer == lastLayer + 1) << w.name;
      lastLayer = layer;
    }
    EXPECT_EQ(lastLayer, model.numLayers - 1);
    EXPECT_EQ(model.attentionScale, 1.0 / std::sqrt(static_cast<double>(model.headDim)));
  }
}

TEST(FrontendFixtures, Qwen2Tiny) {
  ModelDescription m = loadFixture("qwen2-tiny");
  EXPECT_EQ(m.family, "qwen2");
  EXPECT_EQ(m.specFile, "arch-specs/qwen2.yaml");
  EXPECT_EQ(m.numHeads, 4);
  EXPECT_EQ(m.numKVHeads, 2);
  EXPECT_EQ(m.headDim, 16);
  EXPECT_TRUE(m.attentionBias);
  EXPECT_FALSE(m.outputBias);
  EXPECT_TRUE(m.tiedEmbeddings);
  EXPECT_EQ(m.findWeight("lm_head.weight"), nullptr);
  EXPECT_NE(std::find(m.ignoredKeys.begin(), m.ignoredKeys.end(), "lm_head.weight"), m.ignoredKeys.end());
  EXPECT_EQ(weight(m, "layers.0.attn.k_proj.bias").shape, (std::vector<int64_t>{32}));
  EXPECT_EQ(m.rope.theta, 1e6);
  EXPECT_EQ(m.rope.type, "default");
  EXPECT_EQ(m.normEps, 1e-6);
  for (const auto &layer : m.layers) EXPECT_FALSE(layer.slidingWindow);
}

TEST(FrontendFixtures, Qwen3Tiny) {
  ModelDescription m = loadFixture("qwen3-tiny");
  EXPECT_TRUE(m.qkNorm);
  EXPECT_EQ(m.headDim, 32); // != 64 / 4
  EXPECT_EQ(weight(m, "layers.1.attn.q_proj.weight").shape, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(weight(m, "layers.1.attn.o_proj.weight").shape, (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(weight(m, "layers.1.attn.q_norm.weight").shape, (std::vector<int64_t>{32}));
  EXPECT_EQ(weight(m, "layers.1.attn.k_norm.weight").source.keys.front(),
            "model.layers.1.self_attn.k_norm.weight");
  EXPECT_FALSE(m.attentionBias);
  EXPECT_EQ(m.findWeight("layers.0.attn.o_proj.bias"), nullptr);
  EXPECT_EQ(m.rope.invFreq.size(), 16u);
  EXPECT_DOUBLE_EQ(m.attentionScale, 1.0 / std::sqrt(32.0));
}

TEST(FrontendFixtures, LlamaTiny) {
  ModelDescription m = loadFixture("llama-tiny");
  EXPECT_EQ(m.numKVHeads, 1);
  EXPECT_FALSE(m.tiedEmbeddings);
  EXPECT_EQ(weight(m, "lm_head.weight").shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(weight(m, "layers.0.attn.k_proj.weight").shape, (std::vector<int64_t>{16, 64}));
  EXPECT_EQ(m.rope.type, "llama3");
  EXPECT_EQ(m.activation, gerbil::Activation::SiLU);
  EXPECT_EQ(m.bosTokenIds, (std::vector<int64_t>{1}));
  EXPECT_EQ(m.eosTokenIds, (std::vector<int64_t>{2}));
  // head_dim 16, theta 5e5, original context 32: wavelength 2*pi*theta^(i/8). Index 0 (6.3 < 8) keeps its
  // frequency; the others (> 32) are divided by the factor 8.
  for (int i = 0; i < 8; ++i) {
    double base = 1.0 / std::pow(500000.0, i / 8.0);
    double wavelength = 2 * std::numbers::pi / base;
    double expected = wavelength > 32 ? base / 8 : base;
    if (i == 0) {
      ASSERT_LT(wavelength, 8);
    }
    expectNear(expected, m.rope.invFreq[static_cast<size_t>(i)], 1e-12, "invFreq[" + std::to_string(i) + "]");
  }
}

TEST(FrontendFixtures, MistralTiny) {
  ModelDescription m = loadFixture("mistral-tiny");
  ASSERT_EQ(m.layers.size(), 2u);
  for (const auto &layer : m.layers) EXPECT_EQ(layer.slidingWindow, 8);
  EXPECT_FALSE(m.attentionBias);
}

TEST(FrontendFixtures, Phi3TinySplitsFusedTensors) {
  ModelDescription m = loadFixture("phi3-tiny");
  struct Expected {
    std::string name;
    int64_t start, length;
    std::string key;
  };
  for (const auto &e : std::vector<Expected>{
           {"layers.1.attn.q_proj.weight", 0, 64, "model.layers.1.self_attn.qkv_proj.weight"},
           {"layers.1.attn.k_proj.weight", 64, 64, "model.layers.1.self_attn.qkv_proj.weight"},
           {"layers.1.attn.v_proj.weight", 128, 64, "model.layers.1.self_attn.qkv_proj.weight"},
           {"layers.1.mlp.gate_proj.weight", 0, 128, "model.layers.1.mlp.gate_up_proj.weight"},
           {"layers.1.mlp.up_proj.weight", 128, 128, "model.layers.1.mlp.gate_up_proj.weight"},
       }) {
    SCOPED_TRACE(e.name);
    const auto &w = weight(m, e.name);
    EXPECT_EQ(w.source.keys, (std::vector<std::string>{e.key}));
    EXPECT_FALSE(w.source.transpose);
    EXPECT_EQ(w.source.sliceDim, 0);
    EXPECT_EQ(w.source.sliceStart, e.start);
    EXPECT_EQ(w.source.sliceLength, e.length);
    EXPECT_EQ(w.shape[0], e.length);
    EXPECT_EQ(w.shape[1], 64);
  }
  EXPECT_EQ(weight(m, "layers.0.attn.o_proj.weight").source.sliceDim, -1);
  EXPECT_EQ(m.rope.rotaryDim, 16);
}

TEST(FrontendFixtures, Phi3GroupedQueryAttentionSlices) {
  json config = fixtureConfig("phi3-tiny");
  config["num_key_value_heads"] = 2;
  ModelDescription m = resolve(config);
  EXPECT_EQ(weight(m, "layers.0.attn.k_proj.weight").source.sliceStart, 64);
  EXPECT_EQ(weight(m, "layers.0.attn.k_proj.weight").source.sliceLength, 32);
  EXPECT_EQ(weight(m, "layers.0.attn.v_proj.weight").source.sliceStart, 96);
  EXPECT_EQ(weight(m, "layers.0.attn.v_proj.weight").source.sliceLength, 32);
}

TEST(FrontendFixtures, Gpt2Tiny) {
  ModelDescription m = loadFixture("gpt2-tiny");
  EXPECT_EQ(m.family, "gpt2");
  EXPECT_EQ(m.norm, gerbil::NormKind::LayerNorm);
  EXPECT_EQ(m.mlp, gerbil::MlpKind::Plain);
  EXPECT_EQ(m.positions, gerbil::PositionKind::Learned);
  EXPECT_EQ(m.activation, gerbil::Activation::GELUTanh);
  EXPECT_TRUE(m.attentionBias && m.outputBias && m.mlpBias && m.tiedEmbeddings);
  EXPECT_EQ(m.intermediateSize, 256); // n_inner absent / null: 4 * n_embd
  EXPECT_EQ(m.maxPositionEmbeddings, 128);
  EXPECT_EQ(m.normEps, 1e-5);
  EXPECT_EQ(m.rope.type, "none");
  EXPECT_TRUE(m.rope.invFreq.empty());
  EXPECT_EQ(m.findWeight("lm_head.weight"), nullptr);
  EXPECT_EQ(m.findWeight("layers.0.mlp.gate_proj.weight"), nullptr);
  EXPECT_EQ(weight(m, "embed_positions.weight").shape, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(weight(m, "embed_positions.weight").source.keys,
            (std::vector<std::string>{"transformer.wpe.weight", "wpe.weight"}));
  EXPECT_EQ(m.weights[1].name, "embed_positions.weight");

  const auto &k = weight(m, "layers.1.attn.k_proj.weight");
  EXPECT_EQ(k.source.keys,
            (std::vector<std::string>{"transformer.h.1.attn.c_attn.weight", "h.1.attn.c_attn.weight"}));
  EXPECT_TRUE(k.source.transpose);
  EXPECT_EQ(k.source.sliceDim, 0);
  EXPECT_EQ(k.source.sliceStart, 64);
  EXPECT_EQ(k.source.sliceLength, 64);
  EXPECT_EQ(k.shape, (std::vector<int64_t>{64, 64}));
  const auto &vBias = weight(m, "layers.1.attn.v_proj.bias");
  EXPECT_FALSE(vBias.source.transpose);
  EXPECT_EQ(vBias.source.keys.front(), "transformer.h.1.attn.c_attn.bias");
  EXPECT_EQ(vBias.source.sliceStart, 128);
  EXPECT_EQ(vBias.source.sliceLength, 64);
  const auto &up = weight(m, "layers.0.mlp.up_proj.weight");
  EXPECT_EQ(up.source.keys.front(), "transformer.h.0.mlp.c_fc.weight");
  EXPECT_TRUE(up.source.transpose);
  EXPECT_EQ(up.shape, (std::vector<int64_t>{256, 64}));
  EXPECT_EQ(weight(m, "layers.0.mlp.down_proj.weight").shape, (std::vector<int64_t>{64, 256}));
  EXPECT_EQ(weight(m, "layers.0.mlp.down_proj.bias").source.keys.back(), "h.0.mlp.c_proj.bias");
  EXPECT_EQ(weight(m, "final_norm.bias").source.keys.front(), "transformer.ln_f.bias");

  for (const std::string key : {"transformer.h.0.attn.bias", "h.11.attn.bias", "h.3.attn.masked_bias"})
    EXPECT_TRUE(std::any_of(m.ignoredKeys.begin(), m.ignoredKeys.end(), [&](const std::string &pattern) {
      return globMatches(pattern, key);
    })) << key;
  for (const std::string key : {"transformer.h.0.attn.c_attn.bias", "h.0.attn.c_proj.weight"})
    EXPECT_FALSE(std::any_of(m.ignoredKeys.begin(), m.ignoredKeys.end(), [&](const std::string &pattern) {
      return globMatches(pattern, key);
    })) << key;
}

TEST(FrontendFixtures, SmolLMTiny) {
  ModelDescription m = loadFixture("smollm-tiny");
  EXPECT_EQ(m.family, "llama");
  EXPECT_EQ(m.numHeads, 9);
  EXPECT_EQ(m.numKVHeads, 3);
  EXPECT_EQ(m.headDim, 8);
  EXPECT_TRUE(m.tiedEmbeddings);
  EXPECT_EQ(m.findWeight("lm_head.weight"), nullptr);
}

// ---------------------------------------------------------------------------------------------------------------
// Real configs

TEST(FrontendRealConfigs, Llama3_8B) {
  ModelDescription m = resolve(realConfig("llama-3-8b"));
  EXPECT_EQ(m.numLayers, 32);
  EXPECT_EQ(m.hiddenSize, 4096);
  EXPECT_EQ(m.numHeads, 32);
  EXPECT_EQ(m.numKVHeads, 8);
  EXPECT_EQ(m.headDim, 128);
  EXPECT_EQ(m.intermediateSize, 14336);
  EXPECT_EQ(m.vocabSize, 128256);
  EXPECT_EQ(m.maxPositionEmbeddings, 8192);
  EXPECT_FALSE(m.tiedEmbeddings);
  EXPECT_EQ(m.rope.type, "default");
  EXPECT_EQ(m.rope.theta, 500000.0);
  EXPECT_EQ(m.normEps, 1e-5);
  EXPECT_EQ(m.bosTokenIds, (std::vector<int64_t>{128000}));
  EXPECT_EQ(m.eosTokenIds, (std::vector<int64_t>{128001}));
  EXPECT_EQ(m.weights.size(), 1u + 32u * 9u + 2u);
  EXPECT_EQ(weight(m, "layers.31.attn.v_proj.weight").shape, (std::vector<int64_t>{1024, 4096}));
}

TEST(FrontendRealConfigs, Llama32_1B) {
  ModelDescription m = resolve(realConfig("llama-3.2-1b"));
  EXPECT_EQ(m.numLayers, 16);
  EXPECT_EQ(m.hiddenSize, 2048);
  EXPECT_EQ(m.numHeads, 32);
  EXPECT_EQ(m.numKVHeads, 8);
  EXPECT_EQ(m.headDim, 64);
  EXPECT_EQ(m.intermediateSize, 8192);
  EXPECT_TRUE(m.tiedEmbeddings);
  EXPECT_EQ(m.findWeight("lm_head.weight"), nullptr);
  EXPECT_EQ(m.rope.type, "llama3");
  EXPECT_EQ(m.rope.rotaryDim, 64);
  ASSERT_EQ(m.rope.invFreq.size(), 32u);
  EXPECT_EQ(m.rope.attentionScaling, 1.0);
}

// Llama 3.1/3.2 scaling, recomputed here from the formulas of Meta's reference code: theta 5e5, dim 64,
// factor 32, low/high frequency factors 1 and 4, original context 8192.
TEST(FrontendRope, Llama3MatchesIndependentComputation) {
  ModelDescription m = resolve(realConfig("llama-3.2-1b"));
  const double theta = 500000.0, factor = 32.0, oldContext = 8192.0;
  auto unscaled = [&](int i) { return std::pow(theta, -2.0 * i / 64.0); };
  // i = 0: wavelength 2*pi < 8192 / 4: kept.
  expectNear(1.0, m.rope.invFreq[0], 1e-12, "invFreq[0]");
  // i = 31: wavelength 2*pi*theta^(62/64) > 8192: divided by 32.
  ASSERT_GT(2 * std::numbers::pi / unscaled(31), oldContext);
  expectNear(unscaled(31) / factor, m.rope.invFreq[31], 1e-12, "invFreq[31]");
  // i = 16: theta^(-1/2); wavelength 2*pi*sqrt(5e5) = 4442.9, between 2048 and 8192: smoothed.
  double inv16 = 1.0 / std::sqrt(theta);
  double wavelength16 = 2 * std::numbers::pi * std::sqrt(theta);
  ASSERT_GT(wavelength16, oldContext / 4);
  ASSERT_LT(wavelength16, oldContext);
  double smooth = (oldContext / wavelength16 - 1.0) / (4.0 - 1.0);
  expectNear((1 - smooth) * inv16 / factor + smooth * inv16, m.rope.invFreq[16], 1e-12, "invFreq[16]");
  // i = 10 is a high frequency: unchanged.
  expectNear(unscaled(10), m.rope.invFreq[10], 1e-12, "invFreq[10]");
}

TEST(FrontendRope, LinearScaling) {
  json config = fixtureConfig("smollm-tiny");
  config["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  ModelDescription m = resolve(config);
  EXPECT_EQ(m.rope.type, "linear");
  ASSERT_EQ(m.rope.invFreq.size(), 4u);
  for (int i = 0; i < 4; ++i)
    expectNear(std::pow(10000.0, -2.0 * i / 8.0) / 4.0, m.rope.invFreq[static_cast<size_t>(i)], 1e-12,
               "linear");

  json transformers = fixtureConfig("smollm-tiny", "config.transformers.json");
  transformers["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 4.0}, {"rope_theta", 10000.0}};
  expectSameDescription(m, resolve(transformers));
}

TEST(FrontendRope, DefaultThetaAndNullScaling) {
  json config = fixtureConfig("qwen2-tiny"); // rope_theta 1e6
  config.erase("rope_theta");
  config["rope_scaling"] = nullptr;
  ModelDescription m = resolve(config);
  EXPECT_EQ(m.rope.theta, 10000.0);
  EXPECT_EQ(m.rope.type, "default");
}

namespace {

// A Phi-3 long-context config: head_dim 16, so 8 factors; context extended 256 -> 1024 (factor 4).
json longRopeConfig() {
  json config = fixtureConfig("phi3-tiny");
  config["max_position_embeddings"] = 1024;
  config["original_max_position_embeddings"] = 256;
  config["rope_scaling"] = {{"type", "longrope"},
                            {"short_factor", {1.0, 1.0, 1.1, 1.2, 1.3, 1.5, 1.8, 2.0}},
                            {"long_factor", {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0}}};
  return config;
}

} // namespace

TEST(FrontendRope, LongRopePicksFactorsByMaxSequence) {
  json config = longRopeConfig();
  auto expected = [&](const char *which, int i) {
    return 1.0 / (config["rope_scaling"][which][i].get<double>() * std::pow(10000.0, 2.0 * i / 16.0));
  };
  for (int64_t maxSequence : {0, 100, 256, 257, 1024}) {
    SCOPED_TRACE(maxSequence);
    FrontendOptions options;
    options.maxSequence = maxSequence;
    ModelDescription m = resolve(config, options);
    EXPECT_EQ(m.rope.type, "longrope");
    ASSERT_EQ(m.rope.invFreq.size(), 8u);
    const char *which = maxSequence > 256 ? "long_factor" : "short_factor";
    for (int i = 0; i < 8; ++i)
      expectNear(expected(which, i), m.rope.invFreq[static_cast<size_t>(i)], 1e-12, which);
    // sqrt(1 + ln(4) / ln(256)) = sqrt(1.25)
    expectNear(std::sqrt(1.25), m.rope.attentionScaling, 1e-12, "attentionScaling");
  }
}

TEST(FrontendRope, LongRopeVariants) {
  json config = longRopeConfig();
  // "su" was Phi-3's first name for it.
  json su = config;
  su["rope_scaling"]["type"] = "su";
  expectSameDescription(resolve(config), resolve(su));

  // transformers 5 form: everything inside rope_parameters.
  json transformers = config;
  transformers.erase("rope_scaling");
  transformers.erase("rope_theta");
  transformers["rope_parameters"] = config["rope_scaling"];
  transformers["rope_parameters"].erase("type");
  transformers["rope_parameters"]["rope_type"] = "longrope";
  transformers["rope_parameters"]["rope_theta"] = 10000.0;
  transformers["rope_parameters"]["original_max_position_embeddings"] = 256;
  transformers.erase("original_max_position_embeddings");
  expectSameDescription(resolve(config), resolve(transformers));

  json explicitFactor = config;
  explicitFactor["rope_scaling"]["attention_factor"] = 1.5;
  EXPECT_EQ(resolve(explicitFactor).rope.attentionScaling, 1.5);

  // No context extension: no scaling (Phi-3-mini-4k with longrope-style factors).
  json unextended = config;
  unextended["max_position_embeddings"] = 256;
  EXPECT_EQ(resolve(unextended).rope.attentionScaling, 1.0);
}

TEST(FrontendRope, PartialRotaryFactor) {
  json config = fixtureConfig("phi3-tiny");
  config["partial_rotary_factor"] = 0.75; // head_dim 16 -> 12 rotated dims
  ModelDescription m = resolve(config);
  EXPECT_EQ(m.rope.rotaryDim, 12);
  ASSERT_EQ(m.rope.invFreq.size(), 6u);
  expectNear(std::pow(10000.0, -2.0 / 12.0), m.rope.invFreq[1], 1e-12, "invFreq[1]");

  json transformers = fixtureConfig("phi3-tiny", "config.transformers.json");
  transformers["rope_parameters"]["partial_rotary_factor"] = 0.75;
  expectSameDescription(m, resolve(transformers));
}

// ---------------------------------------------------------------------------------------------------------------
// Real configs, continued

TEST(FrontendRealConfigs, Mistral7B) {
  ModelDescription m = resolve(realConfig("mistral-7b-v0.1"));
  EXPECT_EQ(m.family, "mistral");
  EXPECT_EQ(m.numLayers, 32);
  EXPECT_EQ(m.hiddenSize, 4096);
  EXPECT_EQ(m.numKVHeads, 8);
  EXPECT_EQ(m.headDim, 128);
  EXPECT_EQ(m.vocabSize, 32000);
  ASSERT_EQ(m.layers.size(), 32u);
  for (const auto &layer : m.layers) EXPECT_EQ(layer.slidingWindow, 4096);
}

TEST(FrontendRealConfigs, Phi3Mini4k) {
  ModelDescription m = resolve(realConfig("phi-3-mini-4k"));
  EXPECT_EQ(m.family, "phi3");
  EXPECT_EQ(m.numLayers, 32);
  EXPECT_EQ(m.hiddenSize, 3072);
  EXPECT_EQ(m.numHeads, 32);
  EXPECT_EQ(m.numKVHeads, 32);
  EXPECT_EQ(m.headDim, 96);
  EXPECT_EQ(m.intermediateSize, 8192);
  EXPECT_EQ(m.vocabSize, 32064);
  EXPECT_EQ(m.eosTokenIds, (std::vector<int64_t>{32000}));
  EXPECT_EQ(m.rope.rotaryDim, 96);
  for (const auto &layer : m.layers) EXPECT_EQ(layer.slidingWindow, 2047);
  EXPECT_EQ(weight(m, "layers.5.attn.v_proj.weight").source.sliceStart, 6144);
  EXPECT_EQ(weight(m, "layers.5.attn.v_proj.weight").source.sliceLength, 3072);
  EXPECT_EQ(weight(m, "layers.5.mlp.up_proj.weight").source.sliceStart, 8192);
  EXPECT_EQ(weight(m, "layers.5.mlp.up_proj.weight").source.sliceLength, 8192);
}

TEST(FrontendRealConfigs, Qwen25_05B) {
  ModelDescription m = resolve(realConfig("qwen2.5-0.5b"));
  EXPECT_EQ(m.family, "qwen2");
  EXPECT_EQ(m.numLayers, 24);
  EXPECT_EQ(m.hiddenSize, 896);
  EXPECT_EQ(m.numHeads, 14);
  EXPECT_EQ(m.numKVHeads, 2);
  EXPECT_EQ(m.headDim, 64);
  EXPECT_EQ(m.intermediateSize, 4864);
  EXPECT_EQ(m.vocabSize, 151936);
  EXPECT_TRUE(m.tiedEmbeddings);
  EXPECT_TRUE(m.attentionBias);
  // sliding_window 32768 is given, but use_sliding_window is false.
  for (const auto &layer : m.layers) EXPECT_FALSE(layer.slidingWindow);
  EXPECT_EQ(weight(m, "layers.0.attn.k_proj.bias").shape, (std::vector<int64_t>{128}));
}

TEST(FrontendRealConfigs, Qwen3_06B) {
  ModelDescription m = resolve(realConfig("qwen3-0.6b"));
  EXPECT_EQ(m.family, "qwen3");
  EXPECT_EQ(m.numLayers, 28);
  EXPECT_EQ(m.hiddenSize, 1024);
  EXPECT_EQ(m.numHeads, 16);
  EXPECT_EQ(m.numKVHeads, 8);
  EXPECT_EQ(m.headDim, 128); // not 1024 / 16
  EXPECT_TRUE(m.qkNorm);
  EXPECT_TRUE(m.tiedEmbeddings);
  EXPECT_EQ(m.rope.theta, 1e6); // an integer in the config
  EXPECT_EQ(weight(m, "layers.0.attn.q_proj.weight").shape, (std::vector<int64_t>{2048, 1024}));
  EXPECT_EQ(weight(m, "layers.0.attn.o_proj.weight").shape, (std::vector<int64_t>{1024, 2048}));
  EXPECT_EQ(weight(m, "layers.27.attn.q_norm.weight").shape, (std::vector<int64_t>{128}));
  EXPECT_EQ(m.eosTokenIds, (std::vector<int64_t>{151645}));
}

TEST(FrontendRealConfigs, SmolLM135M) {
  ModelDescription m = resolve(realConfig("smollm-135m"));
  EXPECT_EQ(m.family, "llama");
  EXPECT_EQ(m.numLayers, 30);
  EXPECT_EQ(m.hiddenSize, 576);
  EXPECT_EQ(m.numHeads, 9);
  EXPECT_EQ(m.numKVHeads, 3);
  EXPECT_EQ(m.headDim, 64);
  EXPECT_EQ(m.intermediateSize, 1536);
  EXPECT_EQ(m.vocabSize, 49152);
  EXPECT_TRUE(m.tiedEmbeddings);
  EXPECT_EQ(m.bosTokenIds, (std::vector<int64_t>{0}));
  EXPECT_EQ(m.eosTokenIds, (std::vector<int64_t>{0}));
}

TEST(FrontendRealConfigs, Gpt2) {
  ModelDescription m = resolve(realConfig("gpt2"));
  EXPECT_EQ(m.family, "gpt2");
  EXPECT_EQ(m.numLayers, 12);
  EXPECT_EQ(m.hiddenSize, 768);
  EXPECT_EQ(m.numHeads, 12);
  EXPECT_EQ(m.numKVHeads, 12);
  EXPECT_EQ(m.headDim, 64);
  EXPECT_EQ(m.intermediateSize, 3072);
  EXPECT_EQ(m.vocabSize, 50257);
  EXPECT_EQ(m.maxPositionEmbeddings, 1024);
  EXPECT_TRUE(m.tiedEmbeddings); // GPT-2 ties by default
  EXPECT_EQ(m.bosTokenIds, (std::vector<int64_t>{50256}));
  EXPECT_EQ(m.weights.size(), 2u + 12u * 16u + 2u);
  EXPECT_EQ(weight(m, "layers.11.attn.v_proj.weight").source.sliceStart, 1536);
}

TEST(FrontendRealConfigs, EveryConfigResolves) {
  for (const auto &entry : fs::directory_iterator(realConfigs())) {
    SCOPED_TRACE(entry.path().filename().string());
    EXPECT_NO_THROW(gerbil::loadModel(entry.path().string()));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Config variations that are supported

TEST(FrontendVariants, TokenIdForms) {
  json config = fixtureConfig("llama-tiny");
  config["eos_token_id"] = {128001, 128008, 128009};
  config["bos_token_id"] = nullptr;
  ModelDescription m = resolve(config);
  EXPECT_EQ(m.eosTokenIds, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_TRUE(m.bosTokenIds.empty());
  config.erase("bos_token_id"); // LlamaConfig's default
  EXPECT_EQ(resolve(config).bosTokenIds, (std::vector<int64_t>{1}));
}

TEST(FrontendVariants, LlamaAttentionBias) {
  json config = fixtureConfig("llama-tiny");
  config["attention_bias"] = true;
  ModelDescription m = resolve(config);
  EXPECT_TRUE(m.attentionBias);
  EXPECT_TRUE(m.outputBias);
  EXPECT_EQ(weight(m, "layers.0.attn.k_proj.bias").shape, (std::vector<int64_t>{16}));
  EXPECT_EQ(weight(m, "layers.0.attn.o_proj.bias").source.keys.front(),
            "model.layers.0.self_attn.o_proj.bias");
}

TEST(FrontendVariants, Qwen3AttentionBias) {
  json config = fixtureConfig("qwen3-tiny");
  config["attention_bias"] = true;
  ModelDescription m = resolve(config);
  EXPECT_EQ(weight(m, "layers.1.attn.q_proj.bias").shape, (std::vector<int64_t>{128}));
  EXPECT_EQ(weight(m, "layers.1.attn.o_proj.bias").shape, (std::vector<int64_t>{64}));
}

TEST(FrontendVariants, HeadDimDefaultsAndNull) {
  json config = fixtureConfig("smollm-tiny", "config.transformers.json");
  config["head_dim"] = nullptr; // null: derive it
  EXPECT_EQ(resolve(config).headDim, 8);
  config.erase("num_key_value_heads");
  EXPECT_EQ(resolve(config).numKVHeads, 9);
}

TEST(FrontendVariants, MistralSlidingWindowDefaults) {
  json config = fixtureConfig("mistral-tiny");
  config["sliding_window"] = nullptr;
  for (const auto &layer : resolve(config).layers) EXPECT_FALSE(layer.slidingWindow);
  config.erase("sliding_window"); // MistralConfig's default
  for (const auto &layer : resolve(config).layers) EXPECT_EQ(layer.slidingWindow, 4096);
}

TEST(FrontendVariants, Qwen2SlidingWindow) {
  json config = fixtureConfig("qwen2-tiny");
  config["use_sliding_window"] = true;
  config["sliding_window"] = 16;
  config["max_window_layers"] = 0; // layers i >= 0 slide: all of them
  for (const auto &layer : resolve(config).layers) EXPECT_EQ(layer.slidingWindow, 16);
  config["max_window_layers"] = 2; // none of the 2 layers slides
  for (const auto &layer : resolve(config).layers) EXPECT_FALSE(layer.slidingWindow);
  config.erase("max_window_layers"); // Qwen2Config's 28
  for (const auto &layer : resolve(config).layers) EXPECT_FALSE(layer.slidingWindow);

  json transformers = fixtureConfig("qwen2-tiny", "config.transformers.json");
  transformers["use_sliding_window"] = true;
  transformers["sliding_window"] = 16;
  transformers["layer_types"] = {"sliding_attention", "sliding_attention"};
  for (const auto &layer : resolve(transformers).layers) EXPECT_EQ(layer.slidingWindow, 16);
  // Without use_sliding_window, transformers clears the window, so the layer types don't matter.
  transformers["use_sliding_window"] = false;
  transformers["layer_types"] = {"full_attention", "sliding_attention"};
  for (const auto &layer : resolve(transformers).layers) EXPECT_FALSE(layer.slidingWindow);
}

TEST(FrontendVariants, Gpt2Variants) {
  json config = fixtureConfig("gpt2-tiny");
  config["n_inner"] = 100;
  config["activation_function"] = "gelu";
  config["tie_word_embeddings"] = false;
  ModelDescription m = resolve(config);
  EXPECT_EQ(m.intermediateSize, 100);
  EXPECT_EQ(m.activation, gerbil::Activation::GELU);
  EXPECT_EQ(weight(m, "lm_head.weight").source.keys, (std::vector<std::string>{"lm_head.weight"}));
  EXPECT_EQ(m.weights.back().name, "lm_head.weight");
  config["activation_function"] = "gelu_pytorch_tanh";
  config["n_inner"] = nullptr;
  m = resolve(config);
  EXPECT_EQ(m.activation, gerbil::Activation::GELUTanh);
  EXPECT_EQ(m.intermediateSize, 256);
  // The common key names work as well (GPT2Config's attribute_map).
  json renamed = fixtureConfig("gpt2-tiny");
  renamed.erase("n_embd");
  renamed["hidden_size"] = 64;
  EXPECT_EQ(resolve(renamed).hiddenSize, 64);
}

TEST(FrontendVariants, MaxSequenceWithinLearnedPositions) {
  FrontendOptions options;
  options.maxSequence = 128;
  EXPECT_NO_THROW(loadFixture("gpt2-tiny", "config.json", options));
  options.maxSequence = 100000; // rotary positions extrapolate; only learned tables have an end
  EXPECT_NO_THROW(loadFixture("llama-tiny", "config.json", options));
}

TEST(FrontendVariants, DenseConfigWithZeroExperts) {
  json config = fixtureConfig("qwen2-tiny");
  config["num_experts"] = 0;
  EXPECT_NO_THROW(resolve(config));
}

// ---------------------------------------------------------------------------------------------------------------
// Errors

TEST(FrontendErrors, UnreadableAndInvalidInput) {
  expectFrontendError([] { gerbil::loadModel("/nonexistent/config.json"); },
                      "/nonexistent/config.json: cannot read the config");
  expectFrontendError([] { gerbil::loadModel(modelFixtures().string()); }, "is a folder");
  expectFrontendError([] { gerbil::resolveModel("{\"architectures\": [", "config.json"); },
                      "config.json: invalid JSON");
  expectFrontendError([] { gerbil::resolveModel("", "config.json"); }, "config.json: invalid JSON");
  expectFrontendError([] { gerbil::resolveModel("[1, 2]", "config.json"); },
                      "config.json: expected a JSON object at the top level");
}

TEST(FrontendErrors, Architectures) {
  json config = fixtureConfig("llama-tiny");
  config.erase("architectures");
  expectConfigError(config, "config.json: missing key 'architectures'");
  config["architectures"] = json::array();
  expectConfigError(config, "config.json: key 'architectures' must be a non-empty list of model class names");
  config["architectures"] = "LlamaForCausalLM";
  expectConfigError(config, "key 'architectures' must be a non-empty list");
  config["architectures"] = {"FooForCausalLM"};
  expectConfigError(config, "config.json: architectures[0] 'FooForCausalLM' is not supported; known: "
                            "GPT2LMHeadModel, LlamaForCausalLM, MistralForCausalLM, Phi3ForCausalLM, "
                            "Qwen2ForCausalLM, Qwen3ForCausalLM");
}

TEST(FrontendErrors, MissingKeys) {
  json config = fixtureConfig("llama-tiny");
  config.erase("num_attention_heads");
  expectConfigError(config, "config.json: missing key 'num_attention_heads'");
  config = fixtureConfig("llama-tiny");
  config["vocab_size"] = nullptr;
  expectConfigError(config, "config.json: missing key 'vocab_size'");
  json gpt2 = fixtureConfig("gpt2-tiny");
  gpt2.erase("n_head");
  expectConfigError(gpt2, "config.json: missing key 'n_head' (also accepted: 'num_attention_heads')");
  json llama3 = fixtureConfig("llama-tiny");
  llama3["rope_scaling"].erase("low_freq_factor");
  expectConfigError(llama3, "config.json: missing key 'rope_scaling.low_freq_factor'");
  json linear = fixtureConfig("llama-tiny");
  linear["rope_scaling"] = {{"rope_type", "linear"}};
  expectConfigError(linear, "config.json: missing key 'rope_scaling.factor'");
  json longRope = longRopeConfig();
  longRope["rope_scaling"].erase("long_factor");
  expectConfigError(longRope, "missing key 'rope_scaling.long_factor'");
}

TEST(FrontendErrors, WrongTypes) {
  auto withValue = [](const std::string &fixture, const std::string &key, const json &value) {
    json config = fixtureConfig(fixture);
    config[key] = value;
    return config;
  };
  expectConfigError(withValue("llama-tiny", "hidden_size", "64"),
                    "config.json: key 'hidden_size' must be an integer, got \"64\"");
  expectConfigError(withValue("llama-tiny", "hidden_size", 64.5),
                    "key 'hidden_size' must be an integer, got 64.5");
  expectConfigError(withValue("llama-tiny", "rms_norm_eps", "small"), "key 'rms_norm_eps' must be a number");
  expectConfigError(withValue("llama-tiny", "tie_word_embeddings", 1),
                    "key 'tie_word_embeddings' must be true or false, got 1");
  expectConfigError(withValue("llama-tiny", "hidden_act", json::object()),
                    "key 'hidden_act' must be a string");
  expectConfigError(withValue("llama-tiny", "bos_token_id", "<s>"),
                    "key 'bos_token_id' must be an integer, a list of integers or null");
  expectConfigError(withValue("llama-tiny", "eos_token_id", {1, "x"}),
                    "key 'eos_token_id' must be an integer");
  expectConfigError(withValue("llama-tiny", "rope_scaling", "llama3"),
                    "key 'rope_scaling' must be an object");
  expectConfigError(withValue("llama-tiny", "rope_theta", "big"), "key 'rope_theta' must be a number");
  expectConfigError(withValue("qwen2-tiny", "use_sliding_window", "yes"),
                    "key 'use_sliding_window' must be true or false");
  expectConfigError(withValue("qwen2-tiny", "num_experts", "many"), "key 'num_experts' must be a number");
  json longRope = longRopeConfig();
  longRope["rope_scaling"]["short_factor"] = {1, 2, "x", 4, 5, 6, 7, 8};
  expectConfigError(longRope, "key 'rope_scaling.short_factor' must be a list of numbers");
}

// Found by fuzz-config: a value of arrays nested 200000 deep overflowed the stack while the message quoting
// it was written, as json::dump recurses once per level. The message now quotes only its start.
TEST(FrontendErrors, DeeplyNestedValueGivesAShortMessage) {
  std::string deep = std::string(200'000, '[') + std::string(200'000, ']');
  auto withText = [](const std::string &key, const std::string &valueText) {
    json config = fixtureConfig("llama-tiny");
    config.erase(key);
    std::string text = config.dump();
    return text.substr(0, text.size() - 1) + ",\"" + key + "\":" + valueText + "}";
  };
  for (const char *key : {"hidden_size", "rope_scaling", "eos_token_id"}) {
    try {
      gerbil::resolveModel(withText(key, deep), "config.json");
      ADD_FAILURE() << key << ": no error";
    } catch (const FrontendError &error) {
      std::string message = error.what();
      EXPECT_NE(message.find("key '" + std::string(key) + "' must be "), std::string::npos) << message;
      EXPECT_NE(message.find(", got " + std::string(60, '[') + "..."), std::string::npos) << message;
    }
  }
  // Short values are quoted whole, as before.
  expectFrontendError(
      [&] { gerbil::resolveModel(withText("hidden_size", R"([1, {"a": [2]}])"), "config.json"); },
      R"(must be an integer, got [1,{"a":[2]}])");
}

TEST(FrontendErrors, NonPositiveSizes) {
  json config = fixtureConfig("llama-tiny");
  config["hidden_size"] = 0;
  expectConfigError(config, "config.json: key 'hidden_size' must be positive, got 0");
  config = fixtureConfig("llama-tiny");
  config["num_hidden_layers"] = -2;
  expectConfigError(config, "config.json: key 'num_hidden_layers' must be positive, got -2");
  config = fixtureConfig("qwen3-tiny");
  config["head_dim"] = 0;
  expectConfigError(config, "key 'head_dim' must be positive, got 0");
  config = fixtureConfig("llama-tiny");
  config["rms_norm_eps"] = 0;
  expectConfigError(config, "key 'rms_norm_eps' must be positive");
  config = fixtureConfig("mistral-tiny");
  config["sliding_window"] = 0;
  expectConfigError(config, "key 'sliding_window' must be positive or null, got 0");
  config = fixtureConfig("llama-tiny");
  config["rope_scaling"]["factor"] = -8;
  expectConfigError(config, "key 'rope_scaling.factor' must be positive");
  config = fixtureConfig("llama-tiny");
  config["rope_theta"] = 0;
  expectConfigError(config, "key 'rope_theta' must be positive");
}

TEST(FrontendErrors, HeadsMustDivide) {
  json config = fixtureConfig("smollm-tiny"); // no head_dim: hidden_size / heads
  config["hidden_size"] = 70;
  expectConfigError(config,
                    "config.json: num_attention_heads (9) does not divide hidden_size (70); the config "
                    "gives no head_dim");
  json gpt2 = fixtureConfig("gpt2-tiny");
  gpt2["n_head"] = 5;
  expectConfigError(gpt2, "config.json: n_head (5) does not divide n_embd (64)");
  config = fixtureConfig("llama-tiny");
  config["num_key_value_heads"] = 3;
  expectConfigError(config, "config.json: num_key_value_heads (3) does not divide num_attention_heads (4)");
  config["num_key_value_heads"] = 8;
  expectConfigError(config, "num_key_value_heads (8) does not divide num_attention_heads (4)");
  // An explicit head_dim lifts the divisibility requirement.
  config = fixtureConfig("smollm-tiny");
  config["hidden_size"] = 70;
  config["head_dim"] = 8;
  EXPECT_EQ(resolve(config).headDim, 8);
}

TEST(FrontendErrors, MixtureOfExperts) {
  json mixtral = fixtureConfig("mistral-tiny");
  mixtral["num_local_experts"] = 8;
  expectConfigError(mixtral, "config.json: num_local_experts = 8 asks for mixture-of-experts layers");
  json qwen = fixtureConfig("qwen2-tiny");
  qwen["num_experts"] = 60;
  expectConfigError(qwen, "num_experts = 60 asks for mixture-of-experts layers");
  json llama = fixtureConfig("llama-tiny");
  llama["n_routed_experts"] = 64;
  llama.erase("intermediate_size"); // the MoE refusal comes before the missing key
  expectConfigError(llama, "n_routed_experts = 64 asks for mixture-of-experts layers");
  json phi = fixtureConfig("phi3-tiny");
  phi["num_local_experts"] = 16;
  expectConfigError(phi, "which gerbil does not support (Phi3ForCausalLM, arch-specs/phi3.yaml)");
}

TEST(FrontendErrors, MixedAttentionLayouts) {
  json transformers = fixtureConfig("qwen2-tiny", "config.transformers.json");
  transformers["use_sliding_window"] = true;
  transformers["sliding_window"] = 16;
  transformers["layer_types"] = {"full_attention", "sliding_attention"};
  expectConfigError(transformers,
                    "config.json: key 'layer_types' mixes sliding-window and full-attention layers "
                    "(1 of 2 layers use the window of 16)");
  transformers["layer_types"] = {"full_attention", "chunked_attention"};
  expectConfigError(transformers, "key 'layer_types[1]' is 'chunked_attention'");
  transformers["layer_types"] = {"full_attention"};
  expectConfigError(transformers, "key 'layer_types' has 1 entries for 2 layers");

  json classic = fixtureConfig("qwen2-tiny");
  classic["use_sliding_window"] = true;
  classic["sliding_window"] = 16;
  classic["max_window_layers"] = 1;
  expectConfigError(classic,
                    "config.json: key 'max_window_layers' mixes sliding-window and full-attention layers");
  json qwen3 = fixtureConfig("qwen3-tiny");
  qwen3["use_sliding_window"] = true;
  qwen3["max_window_layers"] = 1;
  expectConfigError(qwen3,
                    "key 'max_window_layers' mixes sliding-window and full-attention layers (1 of 2 layers "
                    "use the window of 4096)");
}

TEST(FrontendErrors, UnsupportedActivations) {
  json config = fixtureConfig("llama-tiny");
  config["hidden_act"] = "relu";
  expectConfigError(config, "config.json: hidden_act 'relu' is not supported (supported: silu, swish)");
  json gpt2 = fixtureConfig("gpt2-tiny");
  gpt2["activation_function"] = "relu";
  expectConfigError(gpt2,
                    "activation_function 'relu' is not supported (supported: gelu_new, gelu_pytorch_tanh, "
                    "gelu)");
}

TEST(FrontendErrors, UnsupportedBiasesAndFeatures) {
  json llama = fixtureConfig("llama-tiny");
  llama["mlp_bias"] = true;
  expectConfigError(llama, "config.json: mlp_bias = true asks for biases in the gated MLP");
  json mistral = fixtureConfig("mistral-tiny");
  mistral["attention_bias"] = true;
  expectConfigError(mistral, "attention_bias = true asks for attention biases (Mistral has none)");
  json phi = fixtureConfig("phi3-tiny");
  phi["attention_bias"] = true;
  expectConfigError(phi, "attention_bias = true asks for attention biases");
  json gpt2 = fixtureConfig("gpt2-tiny");
  gpt2["scale_attn_by_inverse_layer_idx"] = true;
  expectConfigError(
      gpt2, "scale_attn_by_inverse_layer_idx = true asks for attention scores scaled by 1 / (layer + 1)");
  gpt2 = fixtureConfig("gpt2-tiny");
  gpt2["scale_attn_weights"] = false;
  expectConfigError(gpt2, "scale_attn_weights = false asks for unscaled attention scores");
  // false / null values of the same keys are fine.
  llama["mlp_bias"] = false;
  EXPECT_NO_THROW(resolve(llama));
  gpt2["scale_attn_weights"] = true;
  EXPECT_NO_THROW(resolve(gpt2));
}

TEST(FrontendErrors, UnsupportedRope) {
  json config = fixtureConfig("llama-tiny");
  config["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  expectConfigError(config,
                    "config.json: rope_scaling.rope_type 'dynamic' is not supported (supported: default, "
                    "linear, llama3, longrope)");
  config["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}};
  expectConfigError(config, "config.json: rope_scaling.type 'yarn' is not supported");
  json transformers = fixtureConfig("llama-tiny", "config.transformers.json");
  transformers["rope_parameters"] = {{"rope_type", "dynamic"}, {"factor", 2.0}, {"rope_theta", 10000.0}};
  expectConfigError(transformers, "config.json: rope_parameters.rope_type 'dynamic' is not supported");
  transformers["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}}},
                                     {"sliding_attention", {{"rope_type", "default"}}}};
  expectConfigError(transformers,
                    "rope_parameters.full_attention': per-layer-type rope parameters are not supported");

  json longRope = longRopeConfig();
  longRope["rope_scaling"]["short_factor"] = {1.0, 1.0, 1.0};
  expectConfigError(longRope,
                    "config.json: key 'rope_scaling.short_factor' has 3 entries, expected 8 (rotary dim 16 "
                    "/ 2)");
  json llama3 = fixtureConfig("llama-tiny");
  llama3["rope_scaling"]["high_freq_factor"] = 1.0;
  expectConfigError(
      llama3, "key 'rope_scaling.high_freq_factor' must be greater than 'rope_scaling.low_freq_factor'");
  json partial = fixtureConfig("phi3-tiny");
  partial["partial_rotary_factor"] = 0;
  expectConfigError(partial, "key 'partial_rotary_factor' must be in (0, 1]");
  partial["partial_rotary_factor"] = 0.01; // 16 * 0.01 rounds down to no rotary dimension at all
  expectConfigError(partial, "must be even and at least 2");
}

TEST(FrontendErrors, SequenceBeyondLearnedPositions) {
  FrontendOptions options;
  options.maxSequence = 256;
  expectFrontendError(
      [&] { loadFixture("gpt2-tiny", "config.json", options); },
      "config.json: the maximum sequence length 256 exceeds n_positions (128), the size of the "
      "learned position table");
  options.maxSequence = -1;
  expectFrontendError([&] { loadFixture("llama-tiny", "config.json", options); }, "must not be negative");
}

// ---------------------------------------------------------------------------------------------------------------
// The registry and extra spec folders

TEST(FrontendRegistry, ListsAllFamilies) {
  auto entries = gerbil::listArchitectures();
  std::map<std::string, std::string> families;
  for (const auto &entry : entries) {
    families[entry.architecture] = entry.family;
    EXPECT_EQ(entry.specFile, "arch-specs/" + entry.family + ".yaml");
  }
  EXPECT_EQ(families, (std::map<std::string, std::string>{{"GPT2LMHeadModel", "gpt2"},
                                                          {"LlamaForCausalLM", "llama"},
                                                          {"MistralForCausalLM", "mistral"},
                                                          {"Phi3ForCausalLM", "phi3"},
                                                          {"Qwen2ForCausalLM", "qwen2"},
                                                          {"Qwen3ForCausalLM", "qwen3"},
                                                          {"StableLmForCausalLM", "stablelm"}}));
  EXPECT_TRUE(std::is_sorted(entries.begin(), entries.end(),
                             [](const auto &a, const auto &b) { return a.architecture < b.architecture; }));
}

// A new family is just a YAML file; a spec for a built-in architecture replaces the built-in one.
TEST(FrontendRegistry, ExtraSpecsAddAndOverride) {
  ScratchDir dir;
  std::string llama = builtinSpec("llama.yaml");
  dir.write("foo.yaml", replaceAll(replaceAll(llama, "family: llama", "family: foo"),
                                   "architectures: [LlamaForCausalLM]", "architectures: [FooForCausalLM]"));
  dir.write("llama-override.yaml", replaceAll(llama, "family: llama", "family: llama-override"));
  dir.write("notes.txt", "not a spec");
  FrontendOptions options;
  options.extraSpecDir = dir.path().string();

  auto entries = gerbil::listArchitectures(options.extraSpecDir);
  EXPECT_EQ(entries.size(), 8u); // seven built-in families and foo
  json config = fixtureConfig("llama-tiny");
  ModelDescription builtin = resolve(config);
  ModelDescription overridden = resolve(config, options);
  EXPECT_EQ(overridden.family, "llama-override");
  EXPECT_EQ(overridden.specFile, (dir.path() / "llama-override.yaml").string());
  EXPECT_EQ(overridden.weights.size(), builtin.weights.size());

  config["architectures"] = {"FooForCausalLM"};
  ModelDescription foo = resolve(config, options);
  EXPECT_EQ(foo.family, "foo");
  EXPECT_EQ(foo.architecture, "FooForCausalLM");
  EXPECT_EQ(foo.hiddenSize, builtin.hiddenSize);
  expectFrontendError([&] { resolve(config); }, "architectures[0] 'FooForCausalLM' is not supported");
}

TEST(FrontendRegistry, ExtraSpecFolderErrors) {
  expectFrontendError([] { gerbil::listArchitectures("/nonexistent/specs"); },
                      "/nonexistent/specs: the extra arch-spec folder does not exist");
  ScratchDir dir;
  std::string llama = builtinSpec("llama.yaml");
  dir.write("a.yaml", llama);
  dir.write("b.yaml", llama);
  expectFrontendError([&] { gerbil::listArchitectures(dir.path().string()); },
                      "architecture 'LlamaForCausalLM' is already handled by " +
                          (dir.path() / "a.yaml").string());
}

// Broken specs fail when they are loaded, naming the file, the line and the YAML key.
TEST(FrontendRegistry, BrokenSpecs) {
  std::string llama = builtinSpec("llama.yaml");
  struct Case {
    std::string from, to, expected;
  };
  for (const auto &c : std::vector<Case>{
           {"    attn.q_proj.weight: model.layers.{i}.self_attn.q_proj.weight",
            "    attn.qkv_proj.weight: model.layers.{i}.self_attn.q_proj.weight",
            "weights.layer.attn.qkv_proj.weight: 'attn.qkv_proj.weight' is not a canonical layer weight"},
           {"default: hidden_size / num_heads", "default: hiden_size / num_heads",
            "hyperparameters.head_dim.default: unknown size 'hiden_size' in 'hiden_size / num_heads'"},
           {"default: hidden_size / num_heads", "default: hidden_size / (num_heads",
            "hyperparameters.head_dim.default: bad formula 'hidden_size / (num_heads': expected ')'"},
           {"  vocab_size: {keys: [vocab_size]}\n", "", "hyperparameters: missing key 'vocab_size'"},
           {"  norm: rms_norm", "  norm: rms", "structure.norm: 'rms' is not one of rms_norm | layer_norm"},
           {"  qk_norm: false", "  qk_norm: false\n  qk_nrom: false", "structure.qk_nrom: unknown key"},
           {"  mlp_bias: false", "  mlp_bias: {keys: [mlp_bias], default: false}",
            "structure.mlp_bias: a gated MLP cannot have biases"},
           {"model.layers.{i}.input_layernorm.weight", "model.layers.input_layernorm.weight",
            "has no {i}: every layer would read the same tensor"},
           {"accepted: {silu: silu, swish: silu}", "accepted: {silu: swiglu}",
            "structure.activation.accepted.silu: 'swiglu' is not one of silu | gelu_tanh | gelu"},
           {"family: llama", "family: [llama", "invalid YAML"},
       }) {
    SCOPED_TRACE(c.expected);
    ASSERT_NE(llama.find(c.from), std::string::npos) << c.from;
    ScratchDir dir;
    dir.write("broken.yaml", replaceAll(llama, c.from, c.to));
    expectFrontendError([&] { gerbil::listArchitectures(dir.path().string()); }, c.expected);
    expectFrontendError([&] { gerbil::listArchitectures(dir.path().string()); },
                        (dir.path() / "broken.yaml").string() + ":");
  }
}

// A spec that lacks the source of a weight some config needs says so when that config arrives.
TEST(FrontendRegistry, SpecWithoutANeededWeight) {
  ScratchDir dir;
  dir.write("llama.yaml", replaceAll(builtinSpec("llama.yaml"),
                                     "    attn.q_proj.bias: model.layers.{i}.self_attn.q_proj.bias\n", ""));
  FrontendOptions options;
  options.extraSpecDir = dir.path().string();
  json config = fixtureConfig("llama-tiny");
  EXPECT_NO_THROW(resolve(config, options));
  config["attention_bias"] = true;
  expectConfigError(config,
                    "llama.yaml: weights.layer has no source for 'attn.q_proj.bias', which config.json needs "
                    "(attention bias)",
                    options);
}
