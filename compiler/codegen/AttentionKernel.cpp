#include "compiler/codegen/AttentionKernel.h"

#include "compiler/codegen/ShaderCompiler.h"

#include "gerbil/Passes/KernelShapes.h"

namespace gerbil::codegen {

namespace {
// The defines every attention kernel reads.
void defineAttention(KernelSource &k, const AttentionSpec &spec) {
  k.defines.emplace_back("HEADS", uintValue(spec.heads));
  k.defines.emplace_back("KV_HEADS", uintValue(spec.kvHeads));
  k.defines.emplace_back("HEAD_DIM", uintValue(spec.headDim));
  k.defines.emplace_back("SEQ", uintValue(spec.sequence));
  k.defines.emplace_back("SCALE", glslFloat(spec.scale));
  k.defines.emplace_back("WINDOW", uintValue(spec.window));
}

int64_t keySplits(const AttentionSpec &spec) {
  namespace gd = mlir::gerbil;
  const int64_t splits = spec.keySplits > 0 ? spec.keySplits : gd::coopAttentionKeySplits(spec.heads);
  if (splits > gd::kCoopAttentionMaxKeySplits)
    throw CodegenError("tensor-core attention takes at most " +
                       std::to_string(gd::kCoopAttentionMaxKeySplits) + " key splits, not " +
                       std::to_string(splits));
  return splits;
}

KernelSource coopAttentionKernel(const AttentionSpec &spec) {
  namespace gd = mlir::gerbil;
  const int64_t splits = keySplits(spec);
  // A workgroup takes 16 queries of the heads that share a kv head (one a subgroup) where they are as many
  // as its subgroups and the keys are not split: the keys and values are loaded once for them all. H100
  // (sweep bo, 512-token step): Llama-3-8B's attention 62.6 -> 49.0 µs (in the model 66.6 -> 51.5, prefill
  // 36.67 -> 36.13 ms), Llama-3.2-1B's 39.9 -> 39.4 (prefill 6.61 -> 6.52).
  const bool sharedKeys =
      spec.heads % spec.kvHeads == 0 && spec.heads / spec.kvHeads == gd::kCoopAttentionWarps && splits == 1;
  const int64_t keyTile =
      spec.keyTile > 0 ? spec.keyTile : gd::coopAttentionKeyTile(spec.headDim, sharedKeys);
  if (!gd::fitsCoopAttention(spec.headDim, keyTile))
    throw CodegenError("tensor-core attention cannot take head_dim " + std::to_string(spec.headDim) +
                       " with key tiles of " + std::to_string(keyTile) +
                       " (head dims: multiples of 16 up to 128; key tiles: multiples of 16 of at least " +
                       std::to_string(gd::kCoopAttentionQueryTile / 2) + "; the tiles must fit 48 KiB)");
  KernelSource k;
  auto define = [&](const std::string &name, const std::string &value) {
    k.defines.emplace_back(name, value);
  };
  defineAttention(k, spec);
  define("KV_TILE", uintValue(keyTile));
  define("KEY_SPLITS", std::to_string(splits)); // plain: #if reads it
  define("ATTENTION_SHARED_KEYS", sharedKeys ? "1" : "0");
  define("RESULT_HALF", spec.halfResult ? "1" : "0");
  k.templateFile = "attention_prefill_coop.glsl";
  k.workgroup = {32 * gd::kCoopAttentionWarps, 1, 1};
  k.bindings = {
      {"q", Access::Read, plan::DType::F32, true},
      {"k_cache", Access::Read, plan::DType::F32, true},
      {"v_cache", Access::Read, plan::DType::F32, true},
      {"result", Access::Write, spec.halfResult ? plan::DType::F16 : plan::DType::F32, spec.halfResult},
      {"partial", Access::ReadWrite, plan::DType::F32, true, true},
      {"counters", Access::TokenIdsWrite, plan::DType::I32}};
  k.extensions = {"GL_NV_cooperative_matrix",       "GL_EXT_shader_explicit_arithmetic_types_float16",
                  "GL_KHR_memory_scope_semantics",  "GL_KHR_shader_subgroup_basic",
                  "GL_KHR_shader_subgroup_shuffle", "GL_KHR_shader_subgroup_vote"};
  k.deviceExtensions = {"VK_NV_cooperative_matrix"};
  k.needsFloat16 = true;
  k.needsVulkanMemoryModel = true;
  k.subgroupSize = 32;
  k.sharedMemoryBytes = static_cast<uint32_t>(gd::coopAttentionSharedBytes(spec.headDim, keyTile));
  return k;
}
} // namespace

KernelSource attentionKernel(const AttentionSpec &spec, bool coop) {
  namespace gd = mlir::gerbil;
  if (coop) return coopAttentionKernel(spec);
  if (spec.halfResult) throw CodegenError("f16 attention results are the tensor-core kernel's");
  KernelSource k;
  auto define = [&](const std::string &name, const std::string &value) {
    k.defines.emplace_back(name, value);
  };
  defineAttention(k, spec);
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

std::array<uint32_t, 3> attentionGrid(const AttentionSpec &spec, uint32_t tokens, bool coop) {
  namespace gd = mlir::gerbil;
  const int64_t queryTile = coop ? gd::kCoopAttentionQueryTile : gd::kAttentionQueryTile;
  auto tiles = static_cast<uint32_t>((tokens + queryTile - 1) / queryTile);
  return {static_cast<uint32_t>(spec.heads), tiles, coop ? static_cast<uint32_t>(keySplits(spec)) : 1u};
}

AttentionScratch coopAttentionScratch(const AttentionSpec &spec, int64_t maxTokens) {
  namespace gd = mlir::gerbil;
  const int64_t queryTile = gd::kCoopAttentionQueryTile;
  const auto tiles = static_cast<uint64_t>(spec.heads * ((maxTokens + queryTile - 1) / queryTile));
  const int64_t splits = keySplits(spec);
  if (splits == 1) return {16, 16}; // bound, never touched
  const auto block = static_cast<uint64_t>(splits * queryTile * (spec.headDim + 2));
  return {tiles * 4, tiles * block * 4};
}

namespace {

// The prefetch workers in grid rows past the splits, `columns` a row.
void addPrefetch(DecodeAttentionKernel &d, const std::vector<PrefetchRange> &prefetch, int64_t columns,
                 int64_t splits) {
  const int64_t workers =
      addPrefetchWorkers(d.source, prefetch, "store_result(0u, value)", "decode attention");
  if (workers == 0) return;
  const int64_t rows = splits + (workers + columns - 1) / columns;
  // Every Vulkan device dispatches at least 65535 workgroups along y; gerbilc bounds its prefetch options
  // so that no model's prefetch needs more.
  if (rows > 65535)
    throw CodegenError("decode attention: prefetching needs " + std::to_string(rows) +
                       " rows of workgroups, more than the 65535 every device allows");
  d.grid[1] = static_cast<uint32_t>(rows);
}

} // namespace

int64_t decodeScoreLanes(const AttentionSpec &spec, bool subgroupOps) {
  const int64_t vecs = spec.headDim / 4;
  const bool wholeRow = spec.headDim % 4 == 0 && vecs <= 32; // the kernel's K_BATCH == DIM_VECS
  return subgroupOps && wholeRow && vecs % kMinSubgroupSize == 0 ? kMinSubgroupSize : 1;
}

DecodeAttentionKernel decodeAttentionKernel(const AttentionSpec &spec, bool subgroupOps,
                                            const mlir::gerbil::DecodeAttentionChoice &choice,
                                            const std::vector<PrefetchRange> &prefetch, int64_t scoreLanes) {
  namespace gd = mlir::gerbil;
  gd::DecodeAttentionShape shape =
      gd::decodeAttentionShape(spec.heads, spec.kvHeads, spec.headDim, spec.halfCache, spec.sequence, choice);
  DecodeAttentionKernel d;
  d.shape = shape;
  KernelSource &k = d.source;
  auto define = [&](const std::string &name, const std::string &value) {
    k.defines.emplace_back(name, value);
  };
  k.templateFile = "attention_decode.glsl";
  k.workgroup = {shape.workgroup, 1, 1};
  k.subgroupOps = subgroupOps;
  const bool vec4 = spec.headDim % 4 == 0;
  defineAttention(k, spec);
  define("QUERY_HEADS", uintValue(shape.queryHeads));
  define("HEAD_GROUPS", uintValue(shape.headGroups));
  define("SPLITS", uintValue(shape.splits));
  define("MIN_CHUNK", uintValue(shape.minChunk));
  define("D_VEC4", vec4 ? "1" : "0");
  if (scoreLanes == 0) scoreLanes = decodeScoreLanes(spec, subgroupOps);
  const int64_t vecs = (spec.headDim + 3) / 4;
  if (scoreLanes != 1 && (!subgroupOps || !vec4 || vecs > 32 || scoreLanes > 32 ||
                          (scoreLanes & (scoreLanes - 1)) != 0 || vecs % scoreLanes != 0))
    throw CodegenError("decode attention: " + std::to_string(scoreLanes) +
                       " lanes a key's scores for head_dim " + std::to_string(spec.headDim) +
                       " (a power of 2 that divides head_dim / 4, at most 32, with subgroup operations)");
  if (scoreLanes > 1) {
    define("SCORE_LANES", std::to_string(scoreLanes)); // in #if: no "u"
    k.extensions.push_back("GL_KHR_shader_subgroup_shuffle");
  }
  k.bindings = {{"q", Access::Read, plan::DType::F32},
                {"k_cache", Access::Read, plan::DType::F32, vec4},
                {"v_cache", Access::Read, plan::DType::F32, vec4},
                {"result", Access::Write, plan::DType::F32},
                {"partial", Access::ReadWrite, plan::DType::F32, vec4, true},
                {"counters", Access::TokenIdsWrite, plan::DType::I32}};
  define("WARPS", uintValue(shape.warps));
  k.sharedMemoryBytes = static_cast<uint32_t>(
      gd::decodeAttentionSharedBytes(spec.headDim, shape.queryHeads, shape.warps, shape.splits));
  const int64_t columns = spec.kvHeads * shape.headGroups;
  d.grid = {static_cast<uint32_t>(columns), static_cast<uint32_t>(shape.splits), 1};
  d.scratchCounterBytes = static_cast<uint64_t>(columns) * 4;
  d.scratchPartialBytes =
      static_cast<uint64_t>(columns * shape.splits * shape.queryHeads * (spec.headDim + 2)) * 4;
  addPrefetch(d, prefetch, columns, shape.splits);
  return d;
}

} // namespace gerbil::codegen
