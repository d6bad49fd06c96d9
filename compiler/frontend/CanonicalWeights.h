// The weights the generator reads, by canonical name, with the shapes the graph gives them (projections
// [out, in]). Which of them a model needs follows from its structure flags; the arch spec only says where
// each comes from in a checkpoint.
#pragma once

#include "compiler/frontend/ModelDescription.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gerbil {

struct CanonicalWeight {
  std::string name;   // "layers.3.attn.q_proj.weight"
  std::string leaf;   // "attn.q_proj.weight" for per-layer weights, else the name
  int64_t layer = -1; // -1: a model-level weight
  std::vector<int64_t> shape;
  std::string neededBecause; // "attention_bias" or empty, for messages when a spec lacks the source
};

// The weights `model` needs, in ModelDescription::weights order: embeddings, each layer, final norm, head.
// Reads the hyperparameters and structure flags of `model`.
std::vector<CanonicalWeight> requiredWeights(const ModelDescription &model);

bool isCanonicalModelWeight(const std::string &name);
bool isCanonicalLayerWeight(const std::string &leaf);
// For messages: all names of the kind, comma-separated.
std::string canonicalModelWeightList();
std::string canonicalLayerWeightList();

} // namespace gerbil
