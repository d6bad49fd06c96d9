// An architecture spec (arch-specs/*.yaml, schema in arch-specs/README.md) as the front end uses it: how a
// family's config.json names its hyperparameters, which structure its layers have, and where each canonical
// weight comes from in its checkpoints. Parsing checks everything that can be checked without a config, so a
// broken spec fails with its file, line and key rather than at some later model.
#pragma once

#include "compiler/frontend/ModelDescription.h"
#include "compiler/frontend/SizeExpression.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gerbil {

// The hyperparameters every spec maps, by the names spec formulas use.
enum class HyperparameterKind { Size, Real };
struct HyperparameterInfo {
  const char *name;
  HyperparameterKind kind;
};
const std::vector<HyperparameterInfo> &hyperparameterTable();

// A value read from the first of `keys` that the config holds (non-null), else from a default.
struct HyperparameterSpec {
  std::vector<std::string> keys;
  std::optional<SizeExpression> sizeDefault; // Size hyperparameters
  std::optional<double> realDefault;         // Real hyperparameters
};

// A structure flag: fixed by the family, or read from the config with a default.
struct FlagSpec {
  std::vector<std::string> keys; // empty: the flag is `defaultValue`, whatever the config says
  bool defaultValue = false;
};

// An integer read from the config, with a default that may be "none" (sliding_window: null).
struct OptionalIntSpec {
  std::vector<std::string> keys;
  std::optional<int64_t> defaultValue;
};

struct ActivationSpec {
  std::vector<std::string> keys;
  std::string defaultName;
  std::vector<std::pair<std::string, Activation>> accepted; // config spelling -> activation, spec order
};

struct RopeSpec {
  double thetaDefault = 10000.0;
  bool readsPartialRotaryFactor = false;
  std::vector<std::string> partialRotaryFactorKeys;
  double partialRotaryFactorDefault = 1.0;
};

struct SlidingWindowSpec {
  bool present = false; // the family has sliding-window attention at all
  OptionalIntSpec window;
  std::optional<FlagSpec> enabled;                    // Qwen2/3's use_sliding_window
  std::optional<OptionalIntSpec> fullAttentionLayers; // Qwen2/3's max_window_layers
  std::string layerTypesKey;                          // "layer_types", or empty
};

struct TokenIdsSpec {
  std::vector<std::string> keys;
  std::vector<int64_t> defaultIds;
};

struct RefusalSpec {
  enum class Condition { IsTrue, IsFalse, Positive, NotNull };
  std::string key;
  Condition when = Condition::IsTrue;
  std::string reason;
};

struct SliceSpec {
  int dim = 0;
  SizeExpression start;
  std::optional<SizeExpression> length; // absent: the canonical shape's size along `dim`
};

struct WeightSourceSpec {
  std::vector<std::string> templates; // alternative spellings; "{i}" is the layer index
  std::vector<std::string> keyPrefixes;
  bool transpose = false;
  std::optional<SliceSpec> slice;
  std::string location; // "arch-specs/gpt2.yaml:58: weights.layer.attn.q_proj.weight", for messages
};

struct ArchSpec {
  std::string family;
  std::string specFile; // as messages name it: "arch-specs/llama.yaml" or the path of an extra spec
  std::vector<std::string> architectures;

  std::map<std::string, HyperparameterSpec> hyperparameters;

  NormKind norm = NormKind::RMSNorm;
  MlpKind mlp = MlpKind::Gated;
  PositionKind positions = PositionKind::Rotary;
  ActivationSpec activation;
  FlagSpec attentionBias, outputBias, mlpBias, qkNorm, tiedEmbeddings;

  RopeSpec rope;
  SlidingWindowSpec slidingWindow;
  TokenIdsSpec bosTokens, eosTokens;
  std::vector<RefusalSpec> refusals;

  std::map<std::string, WeightSourceSpec> modelWeights; // canonical name -> source
  std::map<std::string, WeightSourceSpec> layerWeights; // canonical leaf under "layers.{i}." -> source
  std::vector<std::string> ignoredKeys;                 // globs, prefixes already applied
};

// Parses one spec. `specFile` names it in messages. Throws FrontendError.
ArchSpec parseArchSpec(const std::string &yamlText, const std::string &specFile);

const char *activationName(Activation activation);

} // namespace gerbil
