#include "compiler/codegen/MatMulKernel.h"

#include <algorithm>

#include "compiler/codegen/ShaderCompiler.h"

#include "gerbil/Passes/KernelShapes.h"

namespace gerbil::codegen {

KernelSource matmulKernel(const MatMulSpec &spec) {
  namespace gd = mlir::gerbil;
  KernelSource k;
  auto define = [&](const std::string &name, const std::string &value) {
    k.defines.emplace_back(name, value);
  };
  if (spec.variant == MatMulVariant::Coop && spec.k % gd::kCoopMatMulLoad != 0)
    throw CodegenError("a matmul with K = " + std::to_string(spec.k) + " cannot take 16-byte loads");
  define("K", uintValue(spec.k));
  define("N", uintValue(spec.n));
  define("NORM_PROLOGUE", spec.norm ? "1" : "0");
  define("NORM_WEIGHTED", spec.normWeighted ? "1" : "0");
  define("RESIDUAL", spec.residual ? "1" : "0");
  if (spec.norm) define("EPS", glslFloat(spec.eps));
  define("W_PACKED16", spec.weight == plan::DType::F32 ? "0" : "1");
  define("W_BF16", spec.weight == plan::DType::BF16 ? "1" : "0");
  switch (spec.variant) {
  case MatMulVariant::Tiled:
    k.templateFile = "matmul.glsl";
    k.workgroup = {gd::kMatMulWorkgroup, 1, 1};
    define("K_VEC8", spec.k % 8 == 0 ? "1" : "0");
    break;
  case MatMulVariant::Coop: {
    if (spec.weight == plan::DType::F32)
      throw CodegenError("the cooperative-matrix matmul needs f16 or bf16 weights");
    const gd::CoopMatMulTiling &t = spec.coopTiling;
    if (t.tileT % (16 * t.warpsT) != 0 || t.tileN % (16 * t.warpsN) != 0 || t.tileK % 16 != 0 ||
        (t.tileT * t.tileK / 8) % t.workgroup() != 0 || (t.tileN * t.tileK / 8) % t.workgroup() != 0 ||
        t.tileT % (t.warpsT * t.warpsN) != 0 || t.tileT > t.warpsT * t.warpsN * 256)
      throw CodegenError("cooperative-matrix tiling " + std::to_string(t.tileT) + "x" +
                         std::to_string(t.tileN) + "x" + std::to_string(t.tileK) +
                         " does not divide into 16x16 fragments of its subgroups");
    k.templateFile = "matmul_coop.glsl";
    k.workgroup = {t.workgroup(), 1, 1};
    k.extensions = {"GL_NV_cooperative_matrix", "GL_EXT_shader_explicit_arithmetic_types_float16",
                    "GL_KHR_memory_scope_semantics", "GL_KHR_shader_subgroup_arithmetic"};
    define("TILE_T", uintValue(t.tileT));
    define("TILE_N", uintValue(t.tileN));
    define("TILE_K", uintValue(t.tileK));
    define("WARPS_T", uintValue(t.warpsT));
    define("WARPS_N", uintValue(t.warpsN));
    define("COOP_STAGES", std::to_string(t.stages)); // a plain integer: the kernel tests it with #if
    // Each K step's fragments loaded before the products of the step before, where a subgroup's block has
    // at most 8 of them (the doubled fragments fit its registers). H200 (µs, 512 tokens): 8B down on 2 × 4
    // (64 × 32 blocks) 445 → 417, 8B gate/up on 128 × 128 × 64 tiles of 4 × 4 (32 × 32) 728 → 666 (sweeps
    // af, ak), on 2 × 4 733 (without) → 615 (with, sweep ao); 64 × 64 blocks lose (8B gate/up on 128 × 256
    // tiles, 810 → 837); neutral on 64 × 64 tiles (sweep al).
    // Through KHR with its tile rows taken first (below), the gate/up lost the step ahead: the 8B's 535.3 →
    // 498.1 µs without it (H100, sweep bl).
    const int64_t blockFragments = (t.tileT / t.warpsT / 16) * (t.tileN / t.warpsN / 16);
    define("COOP_FRAGMENT_PIPELINE", blockFragments <= 8 && spec.mode != MatMulMode::GateUp ? "1" : "0");
    // A column's tile rows one after another, each weight slice read from memory once and by the other rows
    // from the L2 (H100, sweep bl, µs at 512 tokens): 1B gate/up 161.6 → 152.7, Qwen's 59.3 → 58.1, the
    // others within 1%; prefill 1B 6.77 → 6.62 ms, Qwen 4.57 → 4.48, 8B 37.42 → 37.30.
    define("COOP_ROWS_FASTEST", "1");
    k.deviceExtensions = {"VK_NV_cooperative_matrix"};
    k.needsFloat16 = true;
    k.needsVulkanMemoryModel = true; // glslang compiles GL_NV_cooperative_matrix with it
    k.subgroupSize = 32;
    // `stages` f16 slices of x and w (rows padded by 8 halves), whose memory then holds one f32 fragment
    // per subgroup for the epilogue; the norm prologue's row scales.
    const int64_t slices = t.stages * (t.tileT + t.tileN) * (t.tileK + 8) * 2;
    const int64_t fragments = t.workgroup() / 32 * 16 * 16 * 4;
    k.sharedMemoryBytes = static_cast<uint32_t>(std::max(slices, fragments) + (spec.norm ? t.tileT * 4 : 0));
    break;
  }
  }
  if (spec.mode != MatMulMode::Single && spec.variant != MatMulVariant::Coop)
    throw CodegenError("grouped projections run as one matmul on cooperative matrices only");
  if (spec.mode == MatMulMode::GateUp && (spec.coopTiling.tileN / spec.coopTiling.warpsN) % 32 != 0)
    throw CodegenError("a gate/up matmul needs subgroup blocks of whole gate/up fragment pairs (32 columns)");
  if (spec.mode != MatMulMode::Single && spec.residual)
    throw CodegenError("grouped projections take no residual");
  const int64_t split = spec.variant == MatMulVariant::Coop ? spec.coopTiling.splitK : 1;
  if (split < 1 || split > mlir::gerbil::kMaxSplitK)
    throw CodegenError("a K split of " + std::to_string(split) + " (1 to " +
                       std::to_string(mlir::gerbil::kMaxSplitK) + ")");
  // A gate/up split (d9f7faa, removed) was 29-37% slower on the H200 than unsplit (sweep ac); its epilogue
  // needs both whole sums of an output. The q/k/v's last split routes the sums as its epilogue does.
  if (split > 1 && spec.mode == MatMulMode::GateUp)
    throw CodegenError("the gate/up projection is not split over K (its epilogue needs whole sums)");
  define("SPLIT_K", std::to_string(split)); // a plain integer: the kernel tests it with #if
  define("MODE_GATE_UP", spec.mode == MatMulMode::GateUp ? "1" : "0");
  define("MODE_QKV", spec.mode == MatMulMode::QKV ? "1" : "0");
  if (spec.variant == MatMulVariant::Coop) {
    // Unconditional staging loads (rows past the end clamped to the last) where they measured faster. Sweep
    // ci and the models' profiles (H100, 512 tokens): every gate/up faster (8B 515 -> 474 µs, 1B -5%, Qwen
    // -4%); 128 x 128 tiles split at most in 2 faster or level (8B o 82.0 -> 79.5, down -1%, q/k/v -0.4%,
    // the 1B's down, q/k/v and o -2 to -4%); but Qwen's down (split 4) +13% and its 64 x 64 tiles +5 to 12%.
    // Prefill 34.61 -> 33.36 ms (8B), 6.35 -> 6.15 (1B), 4.43 -> 4.30 (Qwen) with it everywhere.
    const gd::CoopMatMulTiling &t = spec.coopTiling;
    const bool clamped = spec.mode == MatMulMode::GateUp || (t.tileT * t.tileN >= 128 * 128 && split <= 2);
    define("COOP_CLAMPED_LOADS", clamped ? "1" : "0");
  }
  auto weight = [&](const std::string &name) {
    k.bindings.push_back({name, Access::Read, spec.weight, true});
  };
  auto bias = [&](const std::string &part, bool present) {
    if (present)
      k.bindings.push_back({"bias_" + part, Access::Read, plan::DType::F32, false});
    else
      k.absentInputs.push_back("bias_" + part);
  };
  if (spec.halfInput && (spec.norm || spec.variant != MatMulVariant::Coop))
    throw CodegenError("f16 input rows are for the cooperative-matrix matmul without a norm prologue");
  define("X_HALF", spec.halfInput ? "1" : "0");
  if (spec.halfResult && (spec.mode != MatMulMode::GateUp || spec.n % 2 != 0))
    throw CodegenError("f16 results are for the gate/up matmul on cooperative matrices, of an even width");
  define("RESULT_HALF", spec.halfResult ? "1" : "0");
  k.bindings.push_back({"x", Access::Read, spec.halfInput ? plan::DType::F16 : plan::DType::F32, true});
  const std::vector<std::string> parts =
      spec.mode == MatMulMode::GateUp ? std::vector<std::string>{"gate", "up"}
      : spec.mode == MatMulMode::QKV  ? std::vector<std::string>{"q", "k", "v"}
                                      : std::vector<std::string>{""};
  for (const std::string &part : parts) weight(part.empty() ? "w" : "w_" + part);
  if (spec.norm && spec.normWeighted)
    k.bindings.push_back({"g", Access::Read, spec.normWeight, spec.normWeight == plan::DType::F32});
  if (spec.mode == MatMulMode::GateUp) {
    bias("gate", spec.biasA);
    bias("up", spec.biasB);
    define("ACT_SILU", spec.gelu ? "0" : "1");
    define("GELU_TANH", spec.geluTanh ? "1" : "0");
  } else if (spec.mode == MatMulMode::QKV) {
    bias("q", spec.biasA);
    bias("k", spec.biasB);
    bias("v", spec.biasC);
    define("N_Q", uintValue(spec.n));
    define("N_K", uintValue(spec.nK));
    define("N_V", uintValue(spec.nV));
    define("GROUPS_Q", uintValue(mlir::gerbil::coopTiles(spec.coopTiling, spec.n)));
    define("GROUPS_K", uintValue(mlir::gerbil::coopTiles(spec.coopTiling, spec.nK)));
    define("GROUPS_V", uintValue(mlir::gerbil::coopTiles(spec.coopTiling, spec.nV)));
  }
  if (spec.residual) k.bindings.push_back({"residual", Access::Read, plan::DType::F32, false});
  if (spec.mode == MatMulMode::QKV)
    for (const char *part : {"result_q", "result_k", "result_v"})
      k.bindings.push_back({part, Access::Write, plan::DType::F32, false});
  else
    k.bindings.push_back(
        {"result", Access::Write, spec.halfResult ? plan::DType::F16 : plan::DType::F32, false});
  if (split > 1) {
    k.bindings.push_back({"partial", Access::ReadWrite, plan::DType::F32, true, true});
    k.bindings.push_back({"counters", Access::TokenIdsWrite, plan::DType::I32});
  }
  if (spec.norm && spec.normWeight != plan::DType::F32 && spec.variant == MatMulVariant::Coop)
    throw CodegenError("the cooperative-matrix matmul reads its norm weight as f32 vectors");
  if (spec.workgroupScope) {
    const gd::CoopMatMulTiling &t = spec.coopTiling;
    if (spec.variant != MatMulVariant::Coop || spec.mode != MatMulMode::Single || spec.norm ||
        !spec.halfInput || split != 1 || spec.n % t.tileN != 0 || spec.k % t.tileK != 0)
      throw CodegenError(
          "a workgroup-scope matmul is a plain projection of f16 rows, unsplit, in whole tiles");
    k.templateFile = "matmul_coop_workgroup.glsl";
    k.deviceExtensions.push_back("VK_NV_cooperative_matrix2");
    k.sharedMemoryBytes = 0; // the driver's staging, from what the device reserves for it
  }
  return k;
}

KernelSource normalizedRowsKernel(int64_t k, double eps, bool weighted, bool subgroupOps) {
  if (k % 8 != 0) throw CodegenError("f16 rows of K = " + std::to_string(k) + " are not whole 16-byte words");
  KernelSource source;
  source.templateFile = "norm_rows_f16.glsl";
  source.workgroup = {kNormalizedRowsWorkgroup, 1, 1};
  source.defines = {{"K", uintValue(k)}, {"EPS", glslFloat(eps)}, {"NORM_WEIGHTED", weighted ? "1" : "0"}};
  source.bindings = {{"x", Access::Read, plan::DType::F32, true}};
  if (weighted) source.bindings.push_back({"g", Access::Read, plan::DType::F32, true});
  source.bindings.push_back({"result", Access::Write, plan::DType::F16, true});
  source.needsReduction = true;
  source.subgroupOps = subgroupOps;
  return source;
}

std::array<uint32_t, 3> matmulGrid(const MatMulSpec &spec, uint32_t tokens) {
  namespace gd = mlir::gerbil;
  auto ceilDiv = [](int64_t a, int64_t b) { return static_cast<uint32_t>((a + b - 1) / b); };
  switch (spec.variant) {
  case MatMulVariant::Tiled:
    return {ceilDiv(spec.n, gd::kMatMulRows), ceilDiv(tokens, gd::kMatMulTokens), 1};
  case MatMulVariant::Coop: {
    const gd::CoopMatMulTiling &tiling = spec.coopTiling;
    int64_t columns = spec.mode == MatMulMode::GateUp ? gd::coopGateUpColumns(tiling, spec.n)
                      : spec.mode == MatMulMode::QKV  ? gd::coopQKVColumns(tiling, spec.n, spec.nK, spec.nV)
                                                      : gd::coopTiles(tiling, spec.n);
    return {static_cast<uint32_t>(columns), ceilDiv(tokens, tiling.tileT),
            static_cast<uint32_t>(spec.mode == MatMulMode::GateUp ? 1 : tiling.splitK)};
  }
  }
  return {1, 1, 1};
}

SplitKScratch splitKScratch(const MatMulSpec &spec, int64_t maxTokens) {
  const mlir::gerbil::CoopMatMulTiling &t = spec.coopTiling;
  if (spec.variant != MatMulVariant::Coop || spec.mode == MatMulMode::GateUp || t.splitK <= 1) return {};
  const int64_t columns = spec.mode == MatMulMode::QKV
                              ? mlir::gerbil::coopQKVColumns(t, spec.n, spec.nK, spec.nV)
                              : mlir::gerbil::coopTiles(t, spec.n);
  const uint64_t tiles =
      static_cast<uint64_t>(columns) * static_cast<uint64_t>((maxTokens + t.tileT - 1) / t.tileT);
  return {tiles * static_cast<uint64_t>(t.splitK * t.tileT * t.tileN) * 4, tiles * 4};
}

} // namespace gerbil::codegen
