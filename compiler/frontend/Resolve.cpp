// config.json + arch spec -> ModelDescription: hyperparameters, structure, rope, per-layer attention, special
// tokens, and the checkpoint source of every canonical weight.
#include "compiler/frontend/ArchSpec.h"
#include "compiler/frontend/CanonicalWeights.h"
#include "compiler/frontend/ConfigReader.h"
#include "compiler/frontend/Frontend.h"
#include "compiler/frontend/Registry.h"
#include "compiler/frontend/Rope.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace gerbil {

namespace {

std::string join(const std::vector<std::string> &items, const std::string &separator = ", ") {
  std::string joined;
  for (const auto &item : items) joined += (joined.empty() ? "" : separator) + item;
  return joined;
}

std::string quotedList(const std::vector<std::string> &items) {
  std::vector<std::string> quoted;
  for (const auto &item : items) quoted.push_back("'" + item + "'");
  return join(quoted);
}

// Kernels index tensors with 32-bit integers: no size may reach 2^31, no weight 2^32 elements. A config
// that claims more is garbled or lying; refusing it here keeps the compiler from building (or allocating)
// something absurd.
constexpr int64_t kLargestSize = (int64_t(1) << 31) - 1;
constexpr int64_t kLargestWeightElements = (int64_t(1) << 32) - 1;
// Far more than any released model has (the largest have about 130); a config with more is garbled, and
// the compiler would spend its memory unrolling the layers.
constexpr int64_t kMostLayers = 1024;

// Resolves the spec's hyperparameters against the config on demand, so that defaults may refer to each other
// ("head_dim: hidden_size / num_heads") in any order, and remembers which config key each came from so that
// messages use the names the user sees.
class Hyperparameters {
public:
  Hyperparameters(const ArchSpec &spec, const ConfigReader &config) : spec_(spec), config_(config) {}

  int64_t size(const std::string &name) {
    if (auto it = sizes_.find(name); it != sizes_.end()) return it->second;
    const HyperparameterSpec &parameter = spec_.hyperparameters.at(name);
    std::optional<int64_t> value;
    for (const auto &key : parameter.keys) {
      if ((value = config_.getInt(key))) {
        readFrom_[name] = key;
        break;
      }
    }
    if (!value) {
      if (!parameter.sizeDefault) failMissing(parameter.keys);
      if (!resolving_.insert(name).second)
        throw FrontendError(spec_.specFile + ": hyperparameters." + name +
                            ".default: the defaults refer to each other in a cycle");
      value = evaluateDefault(name, *parameter.sizeDefault);
      resolving_.erase(name);
    }
    if (*value <= 0 || *value > kLargestSize) {
      std::string problem = *value <= 0
                                ? "must be positive, got " + std::to_string(*value)
                                : "is " + std::to_string(*value) + ", more than gerbil compiles (at most " +
                                      std::to_string(kLargestSize) + ")";
      if (readFrom_.count(name)) config_.fail("key '" + readFrom_[name] + "' " + problem);
      config_.fail(keyName(name) + " (not in the config; the " + spec_.family + " spec's default " +
                   parameter.sizeDefault->text() + ") " + problem);
    }
    sizes_[name] = *value;
    return *value;
  }

  double real(const std::string &name) {
    const HyperparameterSpec &parameter = spec_.hyperparameters.at(name);
    for (const auto &key : parameter.keys) {
      if (auto value = config_.getNumber(key)) {
        if (!(*value > 0)) config_.fail("key '" + key + "' must be positive, got " + describe(*value));
        return *value;
      }
    }
    if (!parameter.realDefault) failMissing(parameter.keys);
    return *parameter.realDefault;
  }

  // The config key that messages call the hyperparameter by: the one it was read from, else the spec's first.
  std::string keyName(const std::string &name) const {
    if (auto it = readFrom_.find(name); it != readFrom_.end()) return it->second;
    const auto &keys = spec_.hyperparameters.at(name).keys;
    return keys.empty() ? name : keys.front();
  }

  // "num_attention_heads (32)"
  std::string describeSize(const std::string &name) {
    return keyName(name) + " (" + std::to_string(size(name)) + ")";
  }

  // A spec formula outside the hyperparameters (slice offsets); `location` names it in messages.
  int64_t evaluate(const SizeExpression &expression, const std::string &location) {
    try {
      return expression.evaluate([this](const std::string &name) { return size(name); });
    } catch (const SizeExpressionEvaluationError &error) {
      throw FrontendError(location + ": '" + expression.text() + "' " + evaluationProblem(error) + " for " +
                          config_.fileName());
    }
  }

private:
  static std::string describe(double value) {
    std::ostringstream text;
    text << value;
    return text.str();
  }

  [[noreturn]] void failMissing(const std::vector<std::string> &keys) const {
    config_.failMissing(keys.front(), keys.size() > 1
                                          ? "also accepted: " + quotedList({keys.begin() + 1, keys.end()})
                                          : std::string());
  }

  std::string operand(const std::string &text, int64_t value, bool isName) const {
    return (isName ? keyName(text) : "'" + text + "'") + " (" + std::to_string(value) + ")";
  }

  std::string evaluationProblem(const SizeExpressionEvaluationError &error) const {
    switch (error.kind) {
    case SizeExpressionEvaluationError::Kind::InexactDivision:
      return "needs " + operand(error.denominatorText, error.denominator, error.denominatorIsName) +
             " to divide " + operand(error.numeratorText, error.numerator, error.numeratorIsName);
    case SizeExpressionEvaluationError::Kind::DivisionByZero:
      return "divides by zero";
    case SizeExpressionEvaluationError::Kind::Overflow:
      break;
    }
    return "overflows";
  }

  int64_t evaluateDefault(const std::string &name, const SizeExpression &expression) {
    try {
      return expression.evaluate([this](const std::string &other) { return size(other); });
    } catch (const SizeExpressionEvaluationError &error) {
      std::string defaulted = "the config gives no " + keyName(name) + ", which the " + spec_.family +
                              " spec then defaults to " + expression.text();
      if (error.kind == SizeExpressionEvaluationError::Kind::InexactDivision)
        config_.fail(operand(error.denominatorText, error.denominator, error.denominatorIsName) +
                     " does not divide " +
                     operand(error.numeratorText, error.numerator, error.numeratorIsName) + "; " + defaulted);
      config_.fail(keyName(name) + ": " + defaulted + ", which " + evaluationProblem(error));
    }
  }

  const ArchSpec &spec_;
  const ConfigReader &config_;
  std::map<std::string, int64_t> sizes_;
  std::map<std::string, std::string> readFrom_;
  std::set<std::string> resolving_;
};

std::string readArchitecture(const ConfigReader &config) {
  const nlohmann::json *value = config.find("architectures");
  if (!value) config.failMissing("architectures", "the model class, e.g. [\"LlamaForCausalLM\"]");
  if (!value->is_array() || value->empty() || !(*value)[0].is_string())
    config.failType("architectures", "a non-empty list of model class names");
  return (*value)[0].get<std::string>();
}

// Spec-listed config values that ask for something gerbil cannot compile (MoE, unsupported biases, ...).
void applyRefusals(const ArchSpec &spec, const ConfigReader &config, const std::string &architecture) {
  for (const auto &refusal : spec.refusals) {
    const nlohmann::json *value = config.find(refusal.key);
    if (!value) continue;
    bool refused = false;
    switch (refusal.when) {
    case RefusalSpec::Condition::IsTrue:
      refused = config.getBool(refusal.key).value();
      break;
    case RefusalSpec::Condition::IsFalse:
      refused = !config.getBool(refusal.key).value();
      break;
    case RefusalSpec::Condition::Positive:
      refused = config.getNumber(refusal.key).value() > 0;
      break;
    case RefusalSpec::Condition::NotNull:
      refused = true;
      break;
    }
    if (refused)
      config.fail(refusal.key + " = " + describeJsonValue(*value) + " asks for " + refusal.reason +
                  ", which gerbil does not support (" + architecture + ", " + spec.specFile + ")");
  }
}

bool resolveFlag(const FlagSpec &flag, const ConfigReader &config) {
  for (const auto &key : flag.keys)
    if (auto value = config.getBool(key)) return *value;
  return flag.defaultValue;
}

Activation resolveActivation(const ActivationSpec &spec, const ConfigReader &config) {
  std::string name = spec.defaultName;
  std::string key = spec.keys.front();
  for (const auto &candidate : spec.keys) {
    if (auto value = config.getString(candidate)) {
      name = *value;
      key = candidate;
      break;
    }
  }
  std::vector<std::string> accepted;
  for (const auto &[spelling, activation] : spec.accepted) {
    if (spelling == name) return activation;
    accepted.push_back(spelling);
  }
  config.fail(key + " '" + name + "' is not supported (supported: " + join(accepted) + ")");
}

// An integer where null and absent differ: absent takes the spec default, null means none.
std::optional<int64_t> resolveOptionalInt(const OptionalIntSpec &spec, const ConfigReader &config,
                                          std::string &keyUsed) {
  keyUsed = spec.keys.front();
  for (const auto &key : spec.keys) {
    if (config.isExplicitNull(key)) {
      keyUsed = key;
      return std::nullopt;
    }
    if (auto value = config.getInt(key)) {
      keyUsed = key;
      return value;
    }
  }
  return spec.defaultValue;
}

// Per-layer sliding windows. The generator takes one per layer, but gerbil compiles uniform attention only,
// so a layout that mixes windowed and full layers is refused rather than approximated.
std::vector<LayerDescription> resolveLayers(const ArchSpec &spec, const ConfigReader &config,
                                            int64_t numLayers) {
  std::vector<LayerDescription> layers(static_cast<size_t>(numLayers));
  const SlidingWindowSpec &sliding = spec.slidingWindow;
  if (!sliding.present) return layers;

  std::string windowKey;
  std::optional<int64_t> window = resolveOptionalInt(sliding.window, config, windowKey);
  if (window && *window <= 0)
    config.fail("key '" + windowKey + "' must be positive or null, got " + std::to_string(*window));
  if (sliding.enabled && !resolveFlag(*sliding.enabled, config)) window.reset();

  std::string layoutKey; // the key that decided which layers slide, for the message
  std::vector<bool> slides(layers.size(), true);
  if (!sliding.layerTypesKey.empty() && config.has(sliding.layerTypesKey)) {
    layoutKey = sliding.layerTypesKey;
    std::vector<std::string> types = *config.getStringList(layoutKey);
    if (static_cast<int64_t>(types.size()) != numLayers)
      config.fail("key '" + layoutKey + "' has " + std::to_string(types.size()) + " entries for " +
                  std::to_string(numLayers) + " layers");
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i] != "full_attention" && types[i] != "sliding_attention")
        config.fail("key '" + layoutKey + "[" + std::to_string(i) + "]' is '" + types[i] +
                    "' (supported: full_attention, sliding_attention)");
      slides[i] = types[i] == "sliding_attention";
    }
  } else if (sliding.fullAttentionLayers && window) {
    // Qwen2Config: layers i >= max_window_layers use the window.
    std::optional<int64_t> fullLayers = resolveOptionalInt(*sliding.fullAttentionLayers, config, layoutKey);
    if (!fullLayers) fullLayers = sliding.fullAttentionLayers->defaultValue.value_or(0);
    for (size_t i = 0; i < slides.size(); ++i) slides[i] = static_cast<int64_t>(i) >= *fullLayers;
  }
  if (!window) return layers;

  int64_t slidingCount = std::count(slides.begin(), slides.end(), true);
  if (slidingCount != 0 && slidingCount != numLayers)
    config.fail("key '" + layoutKey + "' mixes sliding-window and full-attention layers (" +
                std::to_string(slidingCount) + " of " + std::to_string(numLayers) +
                " layers use the window of " + std::to_string(*window) +
                "); gerbil compiles only models whose layers all attend alike");
  for (size_t i = 0; i < layers.size(); ++i)
    if (slides[i]) layers[i].slidingWindow = window;
  return layers;
}

std::vector<int64_t> resolveTokenIds(const TokenIdsSpec &spec, const ConfigReader &config) {
  for (const auto &key : spec.keys) {
    if (config.isExplicitNull(key)) return {};
    if (auto ids = config.getIntOrIntList(key)) {
      for (int64_t id : *ids)
        if (id < 0) config.fail("key '" + key + "' holds a negative token id " + std::to_string(id));
      return *ids;
    }
  }
  return spec.defaultIds;
}

std::vector<std::string> expandKeys(const WeightSourceSpec &source, int64_t layer) {
  std::vector<std::string> keys;
  for (const auto &keyTemplate : source.templates) {
    std::string key = keyTemplate;
    if (size_t marker = key.find("{i}"); marker != std::string::npos)
      key.replace(marker, 3, std::to_string(layer));
    for (const auto &prefix : source.keyPrefixes)
      if (std::find(keys.begin(), keys.end(), prefix + key) == keys.end()) keys.push_back(prefix + key);
  }
  return keys;
}

std::vector<WeightDescription> resolveWeights(const ArchSpec &spec, const ModelDescription &model,
                                              Hyperparameters &hyperparameters,
                                              const std::string &configName) {
  std::vector<WeightDescription> weights;
  for (const auto &canonical : requiredWeights(model)) {
    bool perLayer = canonical.layer >= 0;
    const auto &table = perLayer ? spec.layerWeights : spec.modelWeights;
    auto it = table.find(canonical.leaf);
    if (it == table.end())
      throw FrontendError(spec.specFile + ": weights." + (perLayer ? "layer" : "model") +
                          " has no source for '" + canonical.leaf + "', which " + configName + " needs" +
                          (canonical.neededBecause.empty() ? "" : " (" + canonical.neededBecause + ")"));
    const WeightSourceSpec &source = it->second;

    WeightDescription weight;
    weight.name = canonical.name;
    weight.shape = canonical.shape;
    weight.source.keys = expandKeys(source, canonical.layer);
    weight.source.transpose = source.transpose;
    if (source.slice) {
      const SliceSpec &slice = *source.slice;
      if (static_cast<size_t>(slice.dim) >= canonical.shape.size())
        throw FrontendError(source.location + ".slice.dim: " + canonical.leaf + " has only " +
                            std::to_string(canonical.shape.size()) + " dimension(s)");
      weight.source.sliceDim = slice.dim;
      weight.source.sliceStart = hyperparameters.evaluate(slice.start, source.location + ".slice.start");
      weight.source.sliceLength = canonical.shape[static_cast<size_t>(slice.dim)];
      if (slice.length) {
        int64_t length = hyperparameters.evaluate(*slice.length, source.location + ".slice.length");
        if (length != weight.source.sliceLength)
          throw FrontendError(source.location + ".slice.length: '" + slice.length->text() + "' is " +
                              std::to_string(length) + " for " + configName + ", but " + canonical.leaf +
                              " has " + std::to_string(weight.source.sliceLength) + " along dimension " +
                              std::to_string(slice.dim));
      }
      if (weight.source.sliceStart < 0)
        throw FrontendError(source.location + ".slice.start: '" + slice.start.text() + "' is negative for " +
                            configName);
    }
    weights.push_back(std::move(weight));
  }
  return weights;
}

ModelDescription resolveWithSpec(const ArchSpec &spec, const ConfigReader &config,
                                 const std::string &architecture, const FrontendOptions &options) {
  ModelDescription model;
  model.architecture = architecture;
  model.family = spec.family;
  model.specFile = spec.specFile;

  // Refusals first: a mixture-of-experts config should hear that, not that some dense key is missing.
  applyRefusals(spec, config, architecture);

  Hyperparameters hyperparameters(spec, config);
  model.hiddenSize = hyperparameters.size("hidden_size");
  model.numLayers = hyperparameters.size("num_layers");
  model.numHeads = hyperparameters.size("num_heads");
  model.numKVHeads = hyperparameters.size("num_kv_heads");
  model.headDim = hyperparameters.size("head_dim");
  model.intermediateSize = hyperparameters.size("intermediate_size");
  model.vocabSize = hyperparameters.size("vocab_size");
  model.maxPositionEmbeddings = hyperparameters.size("max_position_embeddings");
  model.normEps = hyperparameters.real("norm_eps");
  if (model.numLayers > kMostLayers)
    config.fail(hyperparameters.describeSize("num_layers") +
                " is more layers than gerbil compiles (at most " + std::to_string(kMostLayers) + ")");
  if (model.numHeads % model.numKVHeads != 0)
    config.fail(hyperparameters.describeSize("num_kv_heads") + " does not divide " +
                hyperparameters.describeSize("num_heads"));

  model.norm = spec.norm;
  model.mlp = spec.mlp;
  model.positions = spec.positions;
  model.activation = resolveActivation(spec.activation, config);
  model.attentionBias = resolveFlag(spec.attentionBias, config);
  model.outputBias = resolveFlag(spec.outputBias, config);
  model.mlpBias = resolveFlag(spec.mlpBias, config);
  model.qkNorm = resolveFlag(spec.qkNorm, config);
  model.tiedEmbeddings = resolveFlag(spec.tiedEmbeddings, config);
  model.attentionScale = 1.0 / std::sqrt(static_cast<double>(model.headDim));

  if (model.positions == PositionKind::Rotary) {
    model.rope =
        resolveRope(config, spec.rope, model.headDim, model.maxPositionEmbeddings, options.maxSequence);
  } else {
    model.rope = RopeDescription{};
    model.rope.type = "none";
    model.rope.theta = 0;
    // A learned table has no rows past its end: running longer would read out of bounds.
    if (options.maxSequence > model.maxPositionEmbeddings)
      config.fail("the maximum sequence length " + std::to_string(options.maxSequence) + " exceeds " +
                  hyperparameters.describeSize("max_position_embeddings") +
                  ", the size of the learned position table");
  }

  model.layers = resolveLayers(spec, config, model.numLayers);
  model.bosTokenIds = resolveTokenIds(spec.bosTokens, config);
  model.eosTokenIds = resolveTokenIds(spec.eosTokens, config);
  model.weights = resolveWeights(spec, model, hyperparameters, config.fileName());
  for (const WeightDescription &weight : model.weights) {
    int64_t elements = 1;
    std::string shape;
    for (int64_t dimension : weight.shape) {
      // Each dimension is below 2^31, so the product stays far from overflowing until it passes the limit.
      elements = elements > kLargestWeightElements ? elements : elements * dimension;
      shape += (shape.empty() ? "" : ", ") + std::to_string(dimension);
    }
    if (elements > kLargestWeightElements)
      config.fail("the weight '" + weight.name + "' would be [" + shape +
                  "], more elements than a kernel can index (2^32)");
  }

  model.ignoredKeys = spec.ignoredKeys;
  // Tied checkpoints sometimes store the head anyway (a copy of embed_tokens); it is not a weight of the
  // graph.
  if (model.tiedEmbeddings) {
    if (auto it = spec.modelWeights.find(weight_names::kLMHead); it != spec.modelWeights.end())
      for (const auto &key : expandKeys(it->second, -1))
        if (std::find(model.ignoredKeys.begin(), model.ignoredKeys.end(), key) == model.ignoredKeys.end())
          model.ignoredKeys.push_back(key);
  }
  return model;
}

} // namespace

ModelDescription resolveModel(const std::string &configJson, const std::string &configName,
                              const FrontendOptions &options) {
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(configJson);
  } catch (const nlohmann::json::exception &error) {
    throw FrontendError(configName + ": invalid JSON: " + error.what());
  }
  if (!root.is_object()) throw FrontendError(configName + ": expected a JSON object at the top level");
  if (options.maxSequence < 0)
    throw FrontendError(configName + ": the maximum sequence length must not be negative, got " +
                        std::to_string(options.maxSequence));

  ConfigReader config(root, configName);
  std::string architecture = readArchitecture(config);
  SpecRegistry registry = loadSpecRegistry(options.extraSpecDir);
  const ArchSpec *spec = registry.find(architecture);
  if (!spec)
    config.fail("architectures[0] '" + architecture +
                "' is not supported; known: " + join(registry.architectures()));
  return resolveWithSpec(*spec, config, architecture, options);
}

ModelDescription loadModel(const std::string &configPath, const FrontendOptions &options) {
  std::error_code error;
  if (std::filesystem::is_directory(configPath, error))
    throw FrontendError(configPath + ": is a folder; expected a config.json file");
  std::ifstream stream(configPath, std::ios::binary);
  if (!stream) throw FrontendError(configPath + ": cannot read the config: " + std::strerror(errno));
  std::ostringstream text;
  text << stream.rdbuf();
  if (stream.bad()) throw FrontendError(configPath + ": cannot read the config");
  return resolveModel(text.str(), configPath, options);
}

} // namespace gerbil
