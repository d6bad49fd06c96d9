#include "compiler/frontend/CanonicalWeights.h"

#include <algorithm>
#include <functional>

namespace gerbil {

namespace {

using Shape = std::vector<int64_t>;

// One row per canonical weight, in description order. `needed` is empty when a model always needs it.
struct WeightRule {
  const char *name;
  std::function<bool(const ModelDescription &)> needed;
  const char *neededBecause;
  std::function<Shape(const ModelDescription &)> shape;
};

bool always(const ModelDescription &) {
  return true;
}
bool layerNorm(const ModelDescription &m) {
  return m.norm == NormKind::LayerNorm;
}
int64_t qRows(const ModelDescription &m) {
  return m.numHeads * m.headDim;
}
int64_t kvRows(const ModelDescription &m) {
  return m.numKVHeads * m.headDim;
}

const std::vector<WeightRule> &embeddingRules() {
  static const std::vector<WeightRule> rules = {
      {weight_names::kEmbedTokens, always, "",
       [](auto &m) {
         return Shape{m.vocabSize, m.hiddenSize};
       }},
      {weight_names::kEmbedPositions, [](auto &m) { return m.positions == PositionKind::Learned; },
       "learned positions",
       [](auto &m) {
         return Shape{m.maxPositionEmbeddings, m.hiddenSize};
       }},
  };
  return rules;
}

const std::vector<WeightRule> &layerRules() {
  auto attentionBias = [](const ModelDescription &m) { return m.attentionBias; };
  auto hidden = [](const ModelDescription &m) { return Shape{m.hiddenSize}; };
  static const std::vector<WeightRule> rules = {
      {"attn_norm.weight", always, "", hidden},
      {"attn_norm.bias", layerNorm, "layer norm", hidden},
      {"attn.q_proj.weight", always, "",
       [](auto &m) {
         return Shape{qRows(m), m.hiddenSize};
       }},
      {"attn.k_proj.weight", always, "",
       [](auto &m) {
         return Shape{kvRows(m), m.hiddenSize};
       }},
      {"attn.v_proj.weight", always, "",
       [](auto &m) {
         return Shape{kvRows(m), m.hiddenSize};
       }},
      {"attn.q_proj.bias", attentionBias, "attention bias", [](auto &m) { return Shape{qRows(m)}; }},
      {"attn.k_proj.bias", attentionBias, "attention bias", [](auto &m) { return Shape{kvRows(m)}; }},
      {"attn.v_proj.bias", attentionBias, "attention bias", [](auto &m) { return Shape{kvRows(m)}; }},
      {"attn.o_proj.weight", always, "",
       [](auto &m) {
         return Shape{m.hiddenSize, qRows(m)};
       }},
      {"attn.o_proj.bias", [](auto &m) { return m.outputBias; }, "output bias", hidden},
      {"attn.q_norm.weight", [](auto &m) { return m.qkNorm; }, "qk norm",
       [](auto &m) { return Shape{m.headDim}; }},
      {"attn.k_norm.weight", [](auto &m) { return m.qkNorm; }, "qk norm",
       [](auto &m) { return Shape{m.headDim}; }},
      {"mlp_norm.weight", always, "", hidden},
      {"mlp_norm.bias", layerNorm, "layer norm", hidden},
      {"mlp.gate_proj.weight", [](auto &m) { return m.mlp == MlpKind::Gated; }, "gated MLP",
       [](auto &m) {
         return Shape{m.intermediateSize, m.hiddenSize};
       }},
      {"mlp.up_proj.weight", always, "",
       [](auto &m) {
         return Shape{m.intermediateSize, m.hiddenSize};
       }},
      {"mlp.down_proj.weight", always, "",
       [](auto &m) {
         return Shape{m.hiddenSize, m.intermediateSize};
       }},
      {"mlp.up_proj.bias", [](auto &m) { return m.mlpBias; }, "MLP bias",
       [](auto &m) { return Shape{m.intermediateSize}; }},
      {"mlp.down_proj.bias", [](auto &m) { return m.mlpBias; }, "MLP bias", hidden},
  };
  return rules;
}

const std::vector<WeightRule> &headRules() {
  static const std::vector<WeightRule> rules = {
      {weight_names::kFinalNorm, always, "", [](auto &m) { return Shape{m.hiddenSize}; }},
      {weight_names::kFinalNormBias, layerNorm, "layer norm", [](auto &m) { return Shape{m.hiddenSize}; }},
      // Tied embeddings: the generator reuses embed_tokens, so there is no head weight at all.
      {weight_names::kLMHead, [](auto &m) { return !m.tiedEmbeddings; }, "untied embeddings",
       [](auto &m) {
         return Shape{m.vocabSize, m.hiddenSize};
       }},
  };
  return rules;
}

void appendModelWeights(const std::vector<WeightRule> &rules, const ModelDescription &model,
                        std::vector<CanonicalWeight> &weights) {
  for (const auto &rule : rules)
    if (rule.needed(model))
      weights.push_back({rule.name, rule.name, -1, rule.shape(model), rule.neededBecause});
}

std::string joinNames(const std::vector<const std::vector<WeightRule> *> &tables) {
  std::string list;
  for (const auto *table : tables)
    for (const auto &rule : *table) list += (list.empty() ? "" : ", ") + std::string(rule.name);
  return list;
}

bool inTables(const std::vector<const std::vector<WeightRule> *> &tables, const std::string &name) {
  for (const auto *table : tables)
    if (std::any_of(table->begin(), table->end(), [&](const WeightRule &rule) { return rule.name == name; }))
      return true;
  return false;
}

} // namespace

std::vector<CanonicalWeight> requiredWeights(const ModelDescription &model) {
  std::vector<CanonicalWeight> weights;
  appendModelWeights(embeddingRules(), model, weights);
  for (int64_t layer = 0; layer < model.numLayers; ++layer)
    for (const auto &rule : layerRules())
      if (rule.needed(model))
        weights.push_back(
            {weight_names::layer(layer, rule.name), rule.name, layer, rule.shape(model), rule.neededBecause});
  appendModelWeights(headRules(), model, weights);
  return weights;
}

bool isCanonicalModelWeight(const std::string &name) {
  return inTables({&embeddingRules(), &headRules()}, name);
}
bool isCanonicalLayerWeight(const std::string &leaf) {
  return inTables({&layerRules()}, leaf);
}
std::string canonicalModelWeightList() {
  return joinNames({&embeddingRules(), &headRules()});
}
std::string canonicalLayerWeightList() {
  return joinNames({&layerRules()});
}

} // namespace gerbil
