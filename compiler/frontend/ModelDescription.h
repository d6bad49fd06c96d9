// The model as the front end resolves it from an arch spec and a HuggingFace config.json: every
// hyperparameter the generator needs, the layer structure, and where each canonical weight comes from.
// Plain C++ (no MLIR, no YAML, no JSON types) so that the MLIR generator can consume it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace gerbil {

// Every error of the front end names the file and the key at fault.
class FrontendError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

enum class NormKind { RMSNorm, LayerNorm };
enum class MlpKind { Gated, Plain };             // gate/up/down (SwiGLU) or fc/proj (GPT-2)
enum class Activation { SiLU, GELUTanh, GELU };  // silu, gelu_new / gelu_pytorch_tanh, gelu (erf)
enum class PositionKind { Rotary, Learned };

// Where a canonical weight comes from in the checkpoint. A fused HF tensor (Phi-3 qkv_proj, GPT-2 c_attn) is
// split at load: the weight takes rows [sliceStart, sliceStart + sliceLength) of dimension sliceDim of the
// source tensor *after* transposition. GPT-2's Conv1D stores [in, out]; transpose turns it into [out, in].
struct WeightSource {
  std::vector<std::string> keys;  // accepted spellings, first is the canonical HF key
  bool transpose = false;
  int sliceDim = -1;              // -1: the whole tensor
  int64_t sliceStart = 0;
  int64_t sliceLength = 0;
};

struct WeightDescription {
  std::string name;            // canonical: "layers.0.attn.q_proj.weight"
  std::vector<int64_t> shape;  // the shape the graph uses (after transpose and slice)
  WeightSource source;
};

struct RopeDescription {
  std::string type = "default";  // default | linear | llama3 | longrope; "none" with learned positions
  double theta = 10000.0;
  int64_t rotaryDim = 0;            // <= headDim; partial rotary rotates the first rotaryDim dims
  std::vector<double> invFreq;      // rotaryDim / 2 frequencies, scaling already applied
  double attentionScaling = 1.0;    // multiplies cos and sin (longrope, yarn)
};

struct LayerDescription {
  std::optional<int64_t> slidingWindow;  // attend to the last N positions only
};

struct ModelDescription {
  std::string architecture;  // config.architectures[0]
  std::string family;        // arch spec name
  std::string specFile;      // where the arch spec came from

  int64_t hiddenSize = 0;
  int64_t numLayers = 0;
  int64_t numHeads = 0;
  int64_t numKVHeads = 0;
  int64_t headDim = 0;
  int64_t intermediateSize = 0;
  int64_t vocabSize = 0;
  int64_t maxPositionEmbeddings = 0;
  double normEps = 1e-6;

  NormKind norm = NormKind::RMSNorm;
  MlpKind mlp = MlpKind::Gated;
  Activation activation = Activation::SiLU;
  PositionKind positions = PositionKind::Rotary;
  bool attentionBias = false;  // q/k/v biases
  bool outputBias = false;     // o_proj bias (GPT-2 c_proj)
  bool mlpBias = false;
  bool qkNorm = false;         // per-head RMSNorm on q and k (Qwen3)
  bool tiedEmbeddings = false;
  double attentionScale = 0;   // 1/sqrt(headDim) unless the config overrides it

  RopeDescription rope;
  std::vector<LayerDescription> layers;
  std::vector<WeightDescription> weights;  // in a stable order: embeddings, layers, final norm, head

  std::vector<int64_t> bosTokenIds;
  std::vector<int64_t> eosTokenIds;
  // Checkpoint tensors that are not weights (GPT-2's attn.bias causal-mask buffers), as glob patterns with
  // '*': the runtime neither loads nor reports them.
  std::vector<std::string> ignoredKeys;

  const WeightDescription *findWeight(const std::string &name) const {
    for (const auto &w : weights)
      if (w.name == name) return &w;
    return nullptr;
  }
};

// Canonical weight names, shared by the front end (which fills them) and the generator (which reads them).
namespace weight_names {
inline std::string layer(int64_t i, const std::string &leaf) { return "layers." + std::to_string(i) + "." + leaf; }
inline constexpr const char *kEmbedTokens = "embed_tokens.weight";
inline constexpr const char *kEmbedPositions = "embed_positions.weight";
inline constexpr const char *kFinalNorm = "final_norm.weight";
inline constexpr const char *kFinalNormBias = "final_norm.bias";
inline constexpr const char *kLMHead = "lm_head.weight";
} // namespace weight_names

} // namespace gerbil
