#include "compiler/codegen/GemvKernel.h"

#include "compiler/codegen/ShaderCompiler.h"
#include "gerbil/Passes/KernelShapes.h"

namespace gerbil::codegen {
namespace {
// The catalog's shape, or one of `split` teams per pair (a variant to tune with).
mlir::gerbil::GemvShape shapeOf(int64_t kDim, int64_t n, bool paired, int64_t split) {
  return split ? mlir::gerbil::gemvShapeWithSplit(split, paired) : mlir::gerbil::gemvShape(kDim, n, paired);
}
} // namespace

void defineGemv(KernelSource &k, const std::string &mode, int64_t kDim, int64_t n, plan::DType weights,
                bool subgroupOps, int64_t split) {
  mlir::gerbil::GemvShape shape = shapeOf(kDim, n, mode == "MODE_GATE_UP", split);
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
  defineGemv(k, spec.gateUp ? "MODE_GATE_UP" : "MODE_SINGLE", spec.k, spec.n, spec.weight, spec.subgroupOps,
             spec.split);
  k.bindings.push_back({"x", Access::Read, plan::DType::F32});
  if (spec.gateUp) {
    define("ACT_SILU", "1");
    define("GELU_TANH", "0");
    k.absentInputs = {"bias_gate", "bias_up"};
    k.bindings.push_back({"w_gate", Access::Read, spec.weight});
    k.bindings.push_back({"w_up", Access::Read, spec.weight});
  } else {
    k.bindings.push_back({"w", Access::Read, spec.weight});
  }
  if (spec.norm && spec.normWeighted) k.bindings.push_back({"g", Access::Read, plan::DType::F32});
  if (spec.residual) k.bindings.push_back({"residual", Access::Read, plan::DType::F32});
  k.bindings.push_back({"result", Access::Write, plan::DType::F32});
  if (spec.argmax) {
    if (spec.gateUp || spec.residual || !spec.rowFromPush || spec.split || spec.maxSequence <= 0)
      throw CodegenError(
          "a gemv that picks the greedy token must be a logits projection (one row, from "
          "firstRow) with no residual, of the catalog's shape, and needs the maximum sequence length");
    const mlir::gerbil::ArgmaxGrid grid = mlir::gerbil::gemvArgmaxGrid(spec.k, spec.n);
    define("ARGMAX", "1");
    define("GROUPS", uintValue(grid.groups));
    define("SEGMENTS", uintValue(grid.segments));
    define("VOCAB", uintValue(spec.n));
    define("SEQ", uintValue(spec.maxSequence));
    k.libraries = {"argmax_combine.glsl"};
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
  mlir::gerbil::GemvShape shape = shapeOf(spec.k, spec.n, spec.gateUp, spec.split);
  const int64_t workers = prefetchWorkers(spec.prefetch, shape.workgroup);
  return {static_cast<uint32_t>((spec.n + shape.outputs() - 1) / shape.outputs() + workers), 1, 1};
}

} // namespace gerbil::codegen
