#include "compiler/frontend/ArchSpec.h"

#include "compiler/frontend/CanonicalWeights.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>

namespace gerbil {

const std::vector<HyperparameterInfo> &hyperparameterTable() {
  static const std::vector<HyperparameterInfo> table = {
      {"hidden_size", HyperparameterKind::Size}, {"num_layers", HyperparameterKind::Size},
      {"num_heads", HyperparameterKind::Size},   {"num_kv_heads", HyperparameterKind::Size},
      {"head_dim", HyperparameterKind::Size},    {"intermediate_size", HyperparameterKind::Size},
      {"vocab_size", HyperparameterKind::Size},  {"max_position_embeddings", HyperparameterKind::Size},
      {"norm_eps", HyperparameterKind::Real},
  };
  return table;
}

const char *activationName(Activation activation) {
  switch (activation) {
  case Activation::SiLU:
    return "silu";
  case Activation::GELUTanh:
    return "gelu_tanh";
  case Activation::GELU:
    return "gelu";
  }
  return "?";
}

namespace {

std::string join(const std::vector<std::string> &items, const std::string &separator = ", ") {
  std::string joined;
  for (const auto &item : items) joined += (joined.empty() ? "" : separator) + item;
  return joined;
}

// YAML reading with messages "<file>:<line>: <yaml.key.path>: <message>".
class SpecReader {
public:
  explicit SpecReader(std::string file) : file_(std::move(file)) {}

  const std::string &file() const { return file_; }

  std::string location(const YAML::Node &node, const std::string &path) const {
    std::string where = file_;
    // append() rather than ":" + to_string(): GCC 12 warns falsely (-Wrestrict) about the latter here.
    if (node.IsDefined() && !node.Mark().is_null())
      where.append(":").append(std::to_string(node.Mark().line + 1));
    if (!path.empty()) where.append(": ").append(path);
    return where;
  }

  [[noreturn]] void fail(const YAML::Node &node, const std::string &path, const std::string &message) const {
    throw FrontendError(location(node, path) + ": " + message);
  }

  void expectMap(const YAML::Node &node, const std::string &path) const {
    if (!node.IsMap()) fail(node, path, "expected a mapping");
  }

  // Every key of `node` must be one of `allowed`: unknown keys are typos more often than not.
  void checkKeys(const YAML::Node &node, const std::string &path,
                 const std::vector<std::string> &allowed) const {
    expectMap(node, path);
    std::set<std::string> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      std::string key = keyOf(it->first, path);
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
        fail(it->first, child(path, key), "unknown key (allowed here: " + join(allowed) + ")");
      if (!seen.insert(key).second) fail(it->first, child(path, key), "duplicate key");
    }
  }

  // The entries of a mapping with free-form keys (weights, hyperparameters), duplicates refused.
  std::vector<std::pair<std::string, YAML::Node>> entries(const YAML::Node &node,
                                                          const std::string &path) const {
    expectMap(node, path);
    std::vector<std::pair<std::string, YAML::Node>> result;
    std::set<std::string> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      std::string key = keyOf(it->first, path);
      if (!seen.insert(key).second) fail(it->first, child(path, key), "duplicate key");
      result.emplace_back(key, it->second);
    }
    return result;
  }

  YAML::Node required(const YAML::Node &map, const std::string &key, const std::string &path) const {
    YAML::Node value = map[key];
    if (!value.IsDefined()) fail(map, path, "missing key '" + key + "'");
    return value;
  }

  std::string scalar(const YAML::Node &node, const std::string &path) const {
    if (!node.IsScalar()) fail(node, path, "expected a single value");
    return node.Scalar();
  }

  bool boolean(const YAML::Node &node, const std::string &path) const {
    bool value = false;
    if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value))
      fail(node, path, "expected true or false");
    return value;
  }

  double real(const YAML::Node &node, const std::string &path) const {
    double value = 0;
    if (!node.IsScalar() || !YAML::convert<double>::decode(node, value))
      fail(node, path, "expected a number");
    return value;
  }

  int64_t integer(const YAML::Node &node, const std::string &path) const {
    long long value = 0;
    if (!node.IsScalar() || !YAML::convert<long long>::decode(node, value))
      fail(node, path, "expected an integer");
    return value;
  }

  // A single string or a list of them.
  std::vector<std::string> strings(const YAML::Node &node, const std::string &path) const {
    std::vector<std::string> result;
    if (node.IsScalar()) {
      result.push_back(node.Scalar());
    } else if (node.IsSequence()) {
      for (size_t i = 0; i < node.size(); ++i)
        result.push_back(scalar(node[i], path + "[" + std::to_string(i) + "]"));
    } else {
      fail(node, path, "expected a string or a list of strings");
    }
    return result;
  }

  SizeExpression formula(const YAML::Node &node, const std::string &path) const {
    std::string text = scalar(node, path);
    SizeExpression expression;
    try {
      expression = SizeExpression::parse(text);
    } catch (const SizeExpressionSyntaxError &error) {
      fail(node, path, error.what());
    }
    for (const auto &name : expression.names()) {
      const auto &table = hyperparameterTable();
      auto it = std::find_if(table.begin(), table.end(), [&](const auto &info) { return info.name == name; });
      if (it == table.end() || it->kind != HyperparameterKind::Size)
        fail(node, path, "unknown size '" + name + "' in '" + text + "' (known: " + sizeNames() + ")");
    }
    return expression;
  }

  static std::string child(const std::string &path, const std::string &key) {
    return path.empty() ? key : path + "." + key;
  }

private:
  std::string keyOf(const YAML::Node &key, const std::string &path) const {
    if (!key.IsScalar()) fail(key, path, "keys must be plain names");
    return key.Scalar();
  }

  static std::string sizeNames() {
    std::vector<std::string> names;
    for (const auto &info : hyperparameterTable())
      if (info.kind == HyperparameterKind::Size) names.push_back(info.name);
    return join(names);
  }

  std::string file_;
};

std::vector<std::string> readKeys(const SpecReader &reader, const YAML::Node &node, const std::string &path) {
  YAML::Node keys = node["keys"];
  if (!keys.IsDefined()) return {};
  auto result = reader.strings(keys, path + ".keys");
  if (result.empty()) reader.fail(keys, path + ".keys", "expected at least one config key");
  return result;
}

HyperparameterSpec readHyperparameter(const SpecReader &reader, const YAML::Node &node,
                                      const std::string &path, HyperparameterKind kind) {
  reader.checkKeys(node, path, {"keys", "default"});
  HyperparameterSpec spec;
  spec.keys = readKeys(reader, node, path);
  YAML::Node defaultNode = node["default"];
  if (defaultNode.IsDefined()) {
    if (kind == HyperparameterKind::Size)
      spec.sizeDefault = reader.formula(defaultNode, path + ".default");
    else
      spec.realDefault = reader.real(defaultNode, path + ".default");
  }
  if (spec.keys.empty() && !defaultNode.IsDefined())
    reader.fail(node, path, "needs config keys, a default, or both");
  return spec;
}

FlagSpec readFlag(const SpecReader &reader, const YAML::Node &parent, const std::string &key,
                  const std::string &parentPath) {
  std::string path = SpecReader::child(parentPath, key);
  YAML::Node node = reader.required(parent, key, parentPath);
  FlagSpec flag;
  if (node.IsScalar()) {
    flag.defaultValue = reader.boolean(node, path);
    return flag;
  }
  reader.checkKeys(node, path, {"keys", "default"});
  flag.keys = readKeys(reader, node, path);
  if (flag.keys.empty())
    reader.fail(node, path, "needs config keys (or write true / false for a fixed flag)");
  flag.defaultValue = reader.boolean(reader.required(node, "default", path), path + ".default");
  return flag;
}

OptionalIntSpec readOptionalInt(const SpecReader &reader, const YAML::Node &node, const std::string &path) {
  reader.checkKeys(node, path, {"keys", "default"});
  OptionalIntSpec spec;
  spec.keys = readKeys(reader, node, path);
  if (spec.keys.empty()) reader.fail(node, path, "needs config keys");
  YAML::Node defaultNode = reader.required(node, "default", path);
  if (!defaultNode.IsNull()) spec.defaultValue = reader.integer(defaultNode, path + ".default");
  return spec;
}

template <typename Enum>
Enum choiceOf(const SpecReader &reader, const YAML::Node &node, const std::string &path,
              const std::vector<std::pair<std::string, Enum>> &choices) {
  std::string value = reader.scalar(node, path);
  std::vector<std::string> names;
  for (const auto &[name, choice] : choices) {
    if (name == value) return choice;
    names.push_back(name);
  }
  reader.fail(node, path, "'" + value + "' is not one of " + join(names, " | "));
}

template <typename Enum>
Enum readChoice(const SpecReader &reader, const YAML::Node &parent, const std::string &key,
                const std::string &parentPath, const std::vector<std::pair<std::string, Enum>> &choices) {
  return choiceOf(reader, reader.required(parent, key, parentPath), SpecReader::child(parentPath, key),
                  choices);
}

const std::vector<std::pair<std::string, Activation>> kActivations = {
    {"silu", Activation::SiLU}, {"gelu_tanh", Activation::GELUTanh}, {"gelu", Activation::GELU}};

ActivationSpec readActivation(const SpecReader &reader, const YAML::Node &node, const std::string &path) {
  reader.checkKeys(node, path, {"keys", "default", "accepted"});
  ActivationSpec spec;
  spec.keys = readKeys(reader, node, path);
  if (spec.keys.empty()) reader.fail(node, path, "needs config keys");
  for (const auto &[spelling, value] :
       reader.entries(reader.required(node, "accepted", path), path + ".accepted"))
    spec.accepted.emplace_back(spelling,
                               choiceOf(reader, value, path + ".accepted." + spelling, kActivations));
  if (spec.accepted.empty()) reader.fail(node, path + ".accepted", "expected at least one activation");
  YAML::Node defaultNode = reader.required(node, "default", path);
  spec.defaultName = reader.scalar(defaultNode, path + ".default");
  if (std::none_of(spec.accepted.begin(), spec.accepted.end(),
                   [&](const auto &entry) { return entry.first == spec.defaultName; }))
    reader.fail(defaultNode, path + ".default",
                "'" + spec.defaultName + "' is not among the accepted spellings");
  return spec;
}

void readStructure(const SpecReader &reader, const YAML::Node &node, ArchSpec &spec) {
  const std::string path = "structure";
  reader.checkKeys(node, path,
                   {"norm", "mlp", "positions", "activation", "attention_bias", "output_bias", "mlp_bias",
                    "qk_norm", "tied_embeddings"});
  spec.norm = readChoice<NormKind>(reader, node, "norm", path,
                                   {{"rms_norm", NormKind::RMSNorm}, {"layer_norm", NormKind::LayerNorm}});
  spec.mlp =
      readChoice<MlpKind>(reader, node, "mlp", path, {{"gated", MlpKind::Gated}, {"plain", MlpKind::Plain}});
  spec.positions =
      readChoice<PositionKind>(reader, node, "positions", path,
                               {{"rotary", PositionKind::Rotary}, {"learned", PositionKind::Learned}});
  spec.activation = readActivation(reader, reader.required(node, "activation", path), path + ".activation");
  spec.attentionBias = readFlag(reader, node, "attention_bias", path);
  spec.outputBias = readFlag(reader, node, "output_bias", path);
  spec.mlpBias = readFlag(reader, node, "mlp_bias", path);
  spec.qkNorm = readFlag(reader, node, "qk_norm", path);
  spec.tiedEmbeddings = readFlag(reader, node, "tied_embeddings", path);
  // The graph has up/down biases only: a gated MLP with biases would need a gate bias it has no slot for.
  bool mlpBiasPossible = !spec.mlpBias.keys.empty() || spec.mlpBias.defaultValue;
  if (spec.mlp == MlpKind::Gated && mlpBiasPossible)
    reader.fail(
        node["mlp_bias"], path + ".mlp_bias",
        "a gated MLP cannot have biases (the graph has no gate_proj bias); refuse the config key instead");
}

RopeSpec readRope(const SpecReader &reader, const YAML::Node &node) {
  const std::string path = "rope";
  reader.checkKeys(node, path, {"theta_default", "partial_rotary_factor"});
  RopeSpec rope;
  rope.thetaDefault = reader.real(reader.required(node, "theta_default", path), path + ".theta_default");
  if (!(rope.thetaDefault > 0))
    reader.fail(node["theta_default"], path + ".theta_default", "must be positive");
  YAML::Node partial = reader.required(node, "partial_rotary_factor", path);
  const std::string partialPath = path + ".partial_rotary_factor";
  if (partial.IsScalar()) {
    if (reader.boolean(partial, partialPath))
      reader.fail(partial, partialPath, "write {keys: [...], default: ...} to read the factor, or false");
    return rope;
  }
  reader.checkKeys(partial, partialPath, {"keys", "default"});
  rope.readsPartialRotaryFactor = true;
  rope.partialRotaryFactorKeys = readKeys(reader, partial, partialPath);
  if (rope.partialRotaryFactorKeys.empty()) reader.fail(partial, partialPath, "needs config keys");
  rope.partialRotaryFactorDefault =
      reader.real(reader.required(partial, "default", partialPath), partialPath + ".default");
  return rope;
}

SlidingWindowSpec readSlidingWindow(const SpecReader &reader, const YAML::Node &node) {
  const std::string path = "sliding_window";
  reader.checkKeys(node, path, {"window", "enabled", "full_attention_layers", "layer_types_key"});
  SlidingWindowSpec spec;
  spec.present = true;
  spec.window = readOptionalInt(reader, reader.required(node, "window", path), path + ".window");
  if (node["enabled"].IsDefined()) spec.enabled = readFlag(reader, node, "enabled", path);
  if (node["full_attention_layers"].IsDefined())
    spec.fullAttentionLayers =
        readOptionalInt(reader, node["full_attention_layers"], path + ".full_attention_layers");
  if (node["layer_types_key"].IsDefined())
    spec.layerTypesKey = reader.scalar(node["layer_types_key"], path + ".layer_types_key");
  return spec;
}

TokenIdsSpec readTokenIds(const SpecReader &reader, const YAML::Node &node, const std::string &path) {
  reader.checkKeys(node, path, {"keys", "default"});
  TokenIdsSpec spec;
  spec.keys = readKeys(reader, node, path);
  if (spec.keys.empty()) reader.fail(node, path, "needs config keys");
  YAML::Node defaultNode = reader.required(node, "default", path);
  if (defaultNode.IsSequence()) {
    for (size_t i = 0; i < defaultNode.size(); ++i)
      spec.defaultIds.push_back(reader.integer(defaultNode[i], path + ".default[" + std::to_string(i) + "]"));
  } else if (!defaultNode.IsNull()) {
    spec.defaultIds.push_back(reader.integer(defaultNode, path + ".default"));
  }
  return spec;
}

std::vector<RefusalSpec> readRefusals(const SpecReader &reader, const YAML::Node &node) {
  const std::string path = "refuse";
  if (!node.IsSequence()) reader.fail(node, path, "expected a list");
  std::vector<RefusalSpec> refusals;
  for (size_t i = 0; i < node.size(); ++i) {
    std::string itemPath = path + "[" + std::to_string(i) + "]";
    const YAML::Node item = node[i];
    reader.checkKeys(item, itemPath, {"key", "when", "reason"});
    RefusalSpec refusal;
    refusal.key = reader.scalar(reader.required(item, "key", itemPath), itemPath + ".key");
    refusal.when = readChoice<RefusalSpec::Condition>(reader, item, "when", itemPath,
                                                      {{"is_true", RefusalSpec::Condition::IsTrue},
                                                       {"is_false", RefusalSpec::Condition::IsFalse},
                                                       {"positive", RefusalSpec::Condition::Positive},
                                                       {"not_null", RefusalSpec::Condition::NotNull}});
    refusal.reason = reader.scalar(reader.required(item, "reason", itemPath), itemPath + ".reason");
    refusals.push_back(std::move(refusal));
  }
  return refusals;
}

void checkTemplate(const SpecReader &reader, const YAML::Node &node, const std::string &path,
                   const std::string &keyTemplate, bool perLayer) {
  if (keyTemplate.empty()) reader.fail(node, path, "empty checkpoint key");
  size_t layerMarker = keyTemplate.find("{i}");
  std::string rest = keyTemplate;
  if (layerMarker != std::string::npos) rest.erase(layerMarker, 3);
  if (rest.find_first_of("{}") != std::string::npos)
    reader.fail(node, path, "'" + keyTemplate + "': the only placeholder is {i}");
  if (perLayer && layerMarker == std::string::npos)
    reader.fail(node, path, "'" + keyTemplate + "' has no {i}: every layer would read the same tensor");
  if (!perLayer && layerMarker != std::string::npos)
    reader.fail(node, path, "'" + keyTemplate + "': {i} is for per-layer weights only");
}

WeightSourceSpec readWeightSource(const SpecReader &reader, const YAML::Node &node, const std::string &path,
                                  const std::vector<std::string> &defaultPrefixes, bool perLayer) {
  WeightSourceSpec source;
  source.keyPrefixes = defaultPrefixes;
  source.location = reader.location(node, path);
  if (node.IsScalar() || node.IsSequence()) {
    source.templates = reader.strings(node, path);
  } else {
    reader.checkKeys(node, path, {"from", "transpose", "slice", "key_prefixes"});
    source.templates = reader.strings(reader.required(node, "from", path), path + ".from");
    if (node["transpose"].IsDefined())
      source.transpose = reader.boolean(node["transpose"], path + ".transpose");
    if (node["key_prefixes"].IsDefined())
      source.keyPrefixes = reader.strings(node["key_prefixes"], path + ".key_prefixes");
    if (node["slice"].IsDefined()) {
      const YAML::Node slice = node["slice"];
      const std::string slicePath = path + ".slice";
      reader.checkKeys(slice, slicePath, {"dim", "start", "length"});
      SliceSpec spec;
      if (slice["dim"].IsDefined()) {
        int64_t dim = reader.integer(slice["dim"], slicePath + ".dim");
        if (dim < 0 || dim > 1) reader.fail(slice["dim"], slicePath + ".dim", "must be 0 or 1");
        spec.dim = static_cast<int>(dim);
      }
      spec.start = reader.formula(reader.required(slice, "start", slicePath), slicePath + ".start");
      if (slice["length"].IsDefined()) spec.length = reader.formula(slice["length"], slicePath + ".length");
      source.slice = std::move(spec);
    }
  }
  if (source.templates.empty()) reader.fail(node, path, "expected at least one checkpoint key");
  if (source.keyPrefixes.empty()) reader.fail(node, path, "key_prefixes must not be empty (use [\"\"])");
  for (const auto &keyTemplate : source.templates) checkTemplate(reader, node, path, keyTemplate, perLayer);
  return source;
}

void readWeights(const SpecReader &reader, const YAML::Node &node, ArchSpec &spec) {
  const std::string path = "weights";
  reader.checkKeys(node, path, {"key_prefixes", "model", "layer"});
  std::vector<std::string> prefixes = {""};
  if (node["key_prefixes"].IsDefined())
    prefixes = reader.strings(node["key_prefixes"], path + ".key_prefixes");
  if (prefixes.empty()) reader.fail(node, path + ".key_prefixes", "must not be empty (use [\"\"])");
  spec.ignoredKeys.clear();

  for (const auto &[name, source] : reader.entries(reader.required(node, "model", path), path + ".model")) {
    std::string entryPath = path + ".model." + name;
    if (!isCanonicalModelWeight(name))
      reader.fail(source, entryPath,
                  "'" + name + "' is not a canonical model weight (known: " + canonicalModelWeightList() +
                      ")");
    spec.modelWeights[name] = readWeightSource(reader, source, entryPath, prefixes, false);
  }
  for (const auto &[leaf, source] : reader.entries(reader.required(node, "layer", path), path + ".layer")) {
    std::string entryPath = path + ".layer." + leaf;
    if (!isCanonicalLayerWeight(leaf))
      reader.fail(source, entryPath,
                  "'" + leaf + "' is not a canonical layer weight (known: " + canonicalLayerWeightList() +
                      ")");
    spec.layerWeights[leaf] = readWeightSource(reader, source, entryPath, prefixes, true);
  }
}

std::vector<std::string> readIgnoredKeys(const SpecReader &reader, const YAML::Node &root) {
  YAML::Node node = root["ignored_keys"];
  if (!node.IsDefined()) return {};
  std::vector<std::string> prefixes = {""};
  YAML::Node prefixNode = root["weights"]["key_prefixes"];
  if (prefixNode.IsDefined()) prefixes = reader.strings(prefixNode, "weights.key_prefixes");
  std::vector<std::string> patterns;
  for (const auto &pattern : reader.strings(node, "ignored_keys")) {
    if (pattern.empty()) reader.fail(node, "ignored_keys", "empty pattern");
    for (const auto &prefix : prefixes) patterns.push_back(prefix + pattern);
  }
  return patterns;
}

} // namespace

ArchSpec parseArchSpec(const std::string &yamlText, const std::string &specFile) {
  SpecReader reader(specFile);
  YAML::Node root;
  try {
    root = YAML::Load(yamlText);
  } catch (const YAML::Exception &error) {
    std::string where = specFile;
    if (!error.mark.is_null())
      where += ":" + std::to_string(error.mark.line + 1) + ":" + std::to_string(error.mark.column + 1);
    throw FrontendError(where + ": invalid YAML: " + error.msg);
  }
  if (!root.IsMap()) throw FrontendError(specFile + ": expected a YAML mapping at the top level");

  try {
    reader.checkKeys(root, "",
                     {"family", "architectures", "hyperparameters", "structure", "rope", "sliding_window",
                      "special_tokens", "refuse", "weights", "ignored_keys"});
    ArchSpec spec;
    spec.specFile = specFile;
    spec.family = reader.scalar(reader.required(root, "family", ""), "family");
    if (spec.family.empty()) reader.fail(root["family"], "family", "must not be empty");
    spec.architectures = reader.strings(reader.required(root, "architectures", ""), "architectures");
    if (spec.architectures.empty())
      reader.fail(root["architectures"], "architectures", "expected at least one");

    const YAML::Node hyperparameters = reader.required(root, "hyperparameters", "");
    reader.expectMap(hyperparameters, "hyperparameters");
    std::vector<std::string> known;
    for (const auto &info : hyperparameterTable()) known.push_back(info.name);
    reader.checkKeys(hyperparameters, "hyperparameters", known);
    for (const auto &info : hyperparameterTable()) {
      std::string path = std::string("hyperparameters.") + info.name;
      spec.hyperparameters[info.name] = readHyperparameter(
          reader, reader.required(hyperparameters, info.name, "hyperparameters"), path, info.kind);
    }

    readStructure(reader, reader.required(root, "structure", ""), spec);

    if (spec.positions == PositionKind::Rotary)
      spec.rope = readRope(reader, reader.required(root, "rope", ""));
    else if (root["rope"].IsDefined())
      reader.fail(root["rope"], "rope", "only for positions: rotary");

    if (root["sliding_window"].IsDefined())
      spec.slidingWindow = readSlidingWindow(reader, root["sliding_window"]);

    const YAML::Node tokens = reader.required(root, "special_tokens", "");
    reader.checkKeys(tokens, "special_tokens", {"bos", "eos"});
    spec.bosTokens =
        readTokenIds(reader, reader.required(tokens, "bos", "special_tokens"), "special_tokens.bos");
    spec.eosTokens =
        readTokenIds(reader, reader.required(tokens, "eos", "special_tokens"), "special_tokens.eos");

    if (root["refuse"].IsDefined()) spec.refusals = readRefusals(reader, root["refuse"]);
    readWeights(reader, reader.required(root, "weights", ""), spec);
    spec.ignoredKeys = readIgnoredKeys(reader, root);
    return spec;
  } catch (const YAML::Exception &error) {
    // Conversions the reader did not anticipate; still name the file and place.
    std::string where = specFile;
    if (!error.mark.is_null()) where += ":" + std::to_string(error.mark.line + 1);
    throw FrontendError(where + ": " + error.msg);
  }
}

} // namespace gerbil
