#include "compiler/codegen/AttentionKernel.h"

#include "compiler/codegen/ShaderCompiler.h"

#include "gerbil/Passes/KernelShapes.h"

namespace gerbil::codegen {

KernelSource attentionKernel(const AttentionSpec &spec) {
  namespace gd = mlir::gerbil;
  KernelSource k;
  auto define = [&](const std::string &name, const std::string &value) {
    k.defines.emplace_back(name, value);
  };
  define("HEADS", uintValue(spec.heads));
  define("KV_HEADS", uintValue(spec.kvHeads));
  define("HEAD_DIM", uintValue(spec.headDim));
  define("SEQ", uintValue(spec.sequence));
  define("SCALE", glslFloat(spec.scale));
  define("WINDOW", uintValue(spec.window));
  k.workgroup = {gd::kAttentionWorkgroup, 1, 1};
  k.bindings = {{"q", Access::Read, plan::DType::F32, false},
                {"k_cache", Access::Read, plan::DType::F32, false},
                {"v_cache", Access::Read, plan::DType::F32, false},
                {"result", Access::Write, plan::DType::F32, false}};
  int64_t queryTile = gd::kAttentionQueryTile, keyTile = gd::attentionKeyTile(spec.headDim);
  int64_t lanes = gd::kAttentionWorkgroup / queryTile;
  if (lanes * queryTile != gd::kAttentionWorkgroup || keyTile % lanes != 0)
    throw CodegenError("attention: a workgroup of " + std::to_string(gd::kAttentionWorkgroup) +
                       " does not split into " + std::to_string(queryTile) + " queries of whole key tiles");
  k.templateFile = "attention_prefill.glsl";
  define("Q_TILE", uintValue(queryTile));
  define("KV_TILE", uintValue(keyTile));
  // The query, key (padded), value and probability tiles and the per-lane maxima and sums, all f32.
  int64_t floats = queryTile * spec.headDim + keyTile * (spec.headDim + 1) + keyTile * spec.headDim +
                   queryTile * keyTile + 2 * gd::kAttentionWorkgroup;
  k.sharedMemoryBytes = static_cast<uint32_t>(floats * 4);
  return k;
}

std::array<uint32_t, 3> attentionGrid(const AttentionSpec &spec, uint32_t tokens) {
  namespace gd = mlir::gerbil;
  auto tiles = static_cast<uint32_t>((tokens + gd::kAttentionQueryTile - 1) / gd::kAttentionQueryTile);
  return {static_cast<uint32_t>(spec.heads), tiles, 1};
}

} // namespace gerbil::codegen
