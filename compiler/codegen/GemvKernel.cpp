#include "compiler/codegen/GemvKernel.h"

#include "compiler/codegen/ShaderCompiler.h"
#include "gerbil/Passes/KernelShapes.h"

namespace gerbil::codegen {
namespace {
// The catalog's shape, or one of `split` teams per pair or `workgroup` invocations (variants to tune with).
mlir::gerbil::GemvShape shapeOf(int64_t kDim, int64_t n, bool paired, int64_t split, int64_t workgroup) {
  mlir::gerbil::GemvShape shape = split ? mlir::gerbil::gemvShapeWithSplit(split, paired, workgroup)
                                        : mlir::gerbil::gemvShape(kDim, n, paired, workgroup);
  if (shape.workgroup > 1024 || shape.workgroup % (32 * shape.split) != 0)
    throw CodegenError("a gemv workgroup of " + std::to_string(shape.workgroup) +
                       " invocations: at most 1024, a multiple of 32 invocations a team times " +
                       std::to_string(shape.split) + " teams a pair");
  return shape;
}
} // namespace

void defineGemv(KernelSource &k, const std::string &mode, int64_t kDim, int64_t n, plan::DType weights,
                bool subgroupOps, int64_t split, int64_t workgroup) {
  mlir::gerbil::GemvShape shape = shapeOf(kDim, n, mode == "MODE_GATE_UP", split, workgroup);
  auto define = [&](const std::string &name, const std::string &value) {
    k.defines.emplace_back(name, value);
  };
  k.templateFile = "gemv.glsl";
  k.workgroup = {shape.workgroup, 1, 1};
  for (const char *m : {"MODE_SINGLE", "MODE_GATE_UP", "MODE_QKV"}) define(m, mode == m ? "1" : "0");
  int64_t perLoad = weights == plan::DType::F32 ? 4 : 8;
  define("ROWS", uintValue(shape.rows));
  define("SPLIT", uintValue(shape.split));
  define("VEC_LOADS", kDim % perLoad == 0 ? "1" : "0");
  define("W_PACKED16", weights == plan::DType::F32 ? "0" : "1");
  define("W_BF16", weights == plan::DType::BF16 ? "1" : "0");
  k.subgroupOps = subgroupOps;
}

void addGemvViews(KernelSource &k) {
  for (auto &b : k.bindings)
    if (b.name == "x" || b.name == "g" || b.name.rfind("w", 0) == 0) b.vec4View = true;
}

KernelSource gemvKernel(const GemvSpec &spec) {
  if (spec.gateUp) {
    if (spec.residual || spec.argmax || spec.rowFromPush)
      throw CodegenError("a gate/up gemv has no residual, picks no token and reads row 0");
    GroupedGemvSpec grouped;
    grouped.k = spec.k, grouped.n = spec.n, grouped.weight = spec.weight, grouped.norm = spec.norm;
    grouped.normWeighted = spec.normWeighted, grouped.eps = spec.eps, grouped.subgroupOps = spec.subgroupOps;
    grouped.split = spec.split, grouped.workgroup = spec.workgroup;
    KernelSource k = groupedGemvKernel(grouped);
    if (!spec.prefetch.empty()) addGemvPrefetch(k, spec.prefetch, "store_result(0u, value)");
    return k;
  }
  KernelSource k;
  auto define = [&](const std::string &name, const std::string &value) {
    k.defines.emplace_back(name, value);
  };
  define("K", uintValue(spec.k));
  define("N", uintValue(spec.n));
  define("NORM_PROLOGUE", spec.norm ? "1" : "0");
  define("NORM_WEIGHTED", spec.normWeighted ? "1" : "0");
  define("RESIDUAL", spec.residual ? "1" : "0");
  define("ROW_FROM_PUSH", spec.rowFromPush ? "1" : "0");
  if (spec.norm) define("EPS", glslFloat(spec.eps));
  defineGemv(k, "MODE_SINGLE", spec.k, spec.n, spec.weight, spec.subgroupOps, spec.split, spec.workgroup);
  k.bindings.push_back({"x", Access::Read, plan::DType::F32});
  k.bindings.push_back({"w", Access::Read, spec.weight});
  if (spec.norm && spec.normWeighted) k.bindings.push_back({"g", Access::Read, plan::DType::F32});
  if (spec.residual) k.bindings.push_back({"residual", Access::Read, plan::DType::F32});
  k.bindings.push_back({"result", Access::Write, plan::DType::F32});
  if (spec.argmax) {
    if (spec.residual || !spec.rowFromPush || spec.split || spec.workgroup || spec.maxSequence <= 0)
      throw CodegenError(
          "a gemv that picks the greedy token must be a logits projection (one row, from "
          "firstRow) with no residual, of the catalog's shape, and needs the maximum sequence length");
    const mlir::gerbil::ArgmaxGrid grid = mlir::gerbil::gemvArgmaxGrid(spec.k, spec.n);
    define("ARGMAX", "1");
    define("GROUPS", uintValue(grid.groups));
    define("SEGMENTS", uintValue(grid.segments));
    define("VOCAB", uintValue(spec.n));
    define("SEQ", uintValue(spec.maxSequence));
    k.libraries = {"best_candidate.glsl", "argmax_combine.glsl"};
    k.bindings.push_back({"token", Access::TokenIdsWrite, plan::DType::I32});
    k.bindings.push_back({"ids", Access::TokenIdsWrite, plan::DType::I32});
    k.bindings.push_back({"partial", Access::ReadWrite, plan::DType::F32, false, true});
    k.bindings.push_back({"counters", Access::TokenIdsWrite, plan::DType::I32});
  }
  if (!spec.prefetch.empty()) {
    if (spec.argmax)
      throw CodegenError("a gemv that picks the greedy token is the last launch: it prefetches nothing");
    addGemvPrefetch(k, spec.prefetch, "store_result(0u, value)");
  }
  addGemvViews(k);
  return k;
}

KernelSource groupedGemvKernel(const GroupedGemvSpec &spec) {
  KernelSource k;
  auto define = [&](const std::string &name, const std::string &value) {
    k.defines.emplace_back(name, value);
  };
  auto bind = [&](const std::string &name, Access access, plan::DType type) {
    k.bindings.push_back({name, access, type});
  };
  define("K", uintValue(spec.k));
  define("NORM_PROLOGUE", spec.norm ? "1" : "0");
  define("NORM_WEIGHTED", spec.normWeighted ? "1" : "0");
  define("RESIDUAL", "0");
  if (spec.norm) define("EPS", glslFloat(spec.eps));
  if (spec.embedding) {
    // The input is the token's row of the table, bound as x; the gemv also writes it out.
    const bool packed = spec.weight == plan::DType::F16 || spec.weight == plan::DType::BF16;
    if (spec.table != plan::DType::F32 && !(spec.table == plan::DType::F16 && packed))
      throw CodegenError("the gemv reads an embedding table of f32, or of f16 beside f16 or bf16 matrices "
                         "(gerbil-fuse-embedding)");
    bind("ids", Access::TokenIds, plan::DType::I32);
    bind("x", Access::Read, spec.table);
    bind("embedding", Access::Write, plan::DType::F32);
    define("EMBED_INPUT", "1");
    define("VOCAB", uintValue(spec.vocab));
    define("X_HALF8", spec.table == plan::DType::F16 ? "1" : "0"); // 8 halves beside 8 packed weights
  } else {
    bind("x", Access::Read, plan::DType::F32);
  }
  const std::vector<std::string> parts =
      spec.qkv ? std::vector<std::string>{"q", "k", "v"} : std::vector<std::string>{"gate", "up"};
  for (const std::string &part : parts) bind("w_" + part, Access::Read, spec.weight);
  if (spec.norm && spec.normWeighted) bind("g", Access::Read, plan::DType::F32);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (spec.biases[i])
      bind("bias_" + parts[i], Access::Read, plan::DType::F32);
    else
      k.absentInputs.push_back("bias_" + parts[i]);
  }
  if (spec.qkv) {
    if (spec.split) throw CodegenError("the q/k/v gemv takes the catalog's teams a pair");
    defineGemv(k, "MODE_QKV", spec.k, spec.nq + spec.nk + spec.nv, spec.weight, spec.subgroupOps, 0,
               spec.workgroup);
    mlir::gerbil::GemvShape shape = mlir::gerbil::qkvShape(spec.k, spec.nq, spec.nk, spec.nv, spec.workgroup);
    auto groups = [&](int64_t n) { return uintValue((n + shape.rows - 1) / shape.rows); };
    define("N_Q", uintValue(spec.nq));
    define("N_K", uintValue(spec.nk));
    define("N_V", uintValue(spec.nv));
    define("GROUPS_Q", groups(spec.nq));
    define("GROUPS_K", groups(spec.nk));
    define("GROUPS_V", groups(spec.nv));
    define("ROPE", spec.rope ? "1" : "0");
    define("KV_WRITE", spec.cacheHeadDim ? "1" : "0");
    int64_t headDim = 0;
    if (spec.rope) {
      headDim = spec.rope->headDim;
      defineRotary(k, *spec.rope);
    }
    bind("result_q", Access::Write, plan::DType::F32);
    if (spec.cacheHeadDim) {
      if (headDim && headDim != spec.cacheHeadDim)
        throw CodegenError("RoPE and the KV cache disagree on head_dim");
      headDim = spec.cacheHeadDim;
      define("SEQ", uintValue(spec.maxSequence));
      bind("k_cache", Access::Write, plan::DType::F32);
      bind("v_cache", Access::Write, plan::DType::F32);
    } else {
      bind("result_k", Access::Write, plan::DType::F32);
      bind("result_v", Access::Write, plan::DType::F32);
    }
    if (headDim) define("HEAD_DIM", uintValue(headDim));
  } else {
    defineGemv(k, "MODE_GATE_UP", spec.k, spec.n, spec.weight, spec.subgroupOps, spec.split, spec.workgroup);
    define("N", uintValue(spec.n));
    define("ACT_SILU", spec.gelu ? "0" : "1");
    define("GELU_TANH", spec.gelu && spec.geluTanh ? "1" : "0");
    bind("result", Access::Write, plan::DType::F32);
  }
  addGemvViews(k);
  return k;
}

std::array<uint32_t, 3> groupedGemvGrid(const GroupedGemvSpec &spec) {
  auto ceilDiv = [](int64_t a, int64_t b) { return static_cast<uint32_t>((a + b - 1) / b); };
  if (!spec.qkv)
    return {ceilDiv(spec.n, shapeOf(spec.k, spec.n, true, spec.split, spec.workgroup).outputs()), 1, 1};
  const int64_t rows = mlir::gerbil::qkvShape(spec.k, spec.nq, spec.nk, spec.nv, spec.workgroup).rows;
  return {ceilDiv(spec.nq, rows) + ceilDiv(spec.nk, rows) + ceilDiv(spec.nv, rows), 1, 1};
}

int64_t addGemvPrefetch(KernelSource &k, const std::vector<PrefetchRange> &prefetch,
                        const std::string &sink) {
  const int64_t workers = addPrefetchWorkers(k, prefetch, sink, "gemv");
  if (workers) k.defines.emplace_back("PREFETCH_WORKERS", uintValue(workers));
  return workers;
}

GemvScratch gemvScratch(const GemvSpec &spec) {
  if (!spec.argmax) return {};
  const mlir::gerbil::ArgmaxGrid grid = mlir::gerbil::gemvArgmaxGrid(spec.k, spec.n);
  return {static_cast<uint64_t>(grid.counters()) * 4, static_cast<uint64_t>(2 * grid.candidates()) * 4};
}

std::array<uint32_t, 3> gemvGrid(const GemvSpec &spec) {
  if (spec.argmax) return {static_cast<uint32_t>(mlir::gerbil::gemvArgmaxGrid(spec.k, spec.n).groups), 1, 1};
  mlir::gerbil::GemvShape shape = shapeOf(spec.k, spec.n, spec.gateUp, spec.split, spec.workgroup);
  const int64_t workers = prefetchWorkers(spec.prefetch, shape.workgroup);
  return {static_cast<uint32_t>((spec.n + shape.outputs() - 1) / shape.outputs() + workers), 1, 1};
}

} // namespace gerbil::codegen
