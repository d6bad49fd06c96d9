// The prefill kernels of gerbil.matmul and gerbil.linear: the tiled matmul (matmul.glsl) and the tensor-core
// matmul of the nvidia target (matmul_coop.glsl). Decode's one-token gemv (gemv.glsl, which the grouped
// projections share) is specialised by PlanBuilder::defineGemv.
// PlanBuilder and the kernel tests both specialise them here, so the tests run exactly what plans run.
#pragma once

#include "compiler/codegen/KernelWriter.h"

#include "gerbil/Passes/TargetProfile.h"

namespace gerbil::codegen {

enum class MatMulVariant { Tiled, Coop };

// Single: one weight. GateUp and QKV (Coop only): the grouped projections of prefill, one launch over all the
// group's weights (matmul_coop.glsl's MODE_GATE_UP and MODE_QKV).
enum class MatMulMode { Single, GateUp, QKV };

struct MatMulSpec {
  MatMulVariant variant = MatMulVariant::Tiled;
  int64_t k = 0, n = 0;
  plan::DType weight = plan::DType::F32;
  plan::DType normWeight = plan::DType::F32;
  bool norm = false; // RMSNorm prologue with weight g
  // false: the norm weight was folded into the weights' columns at load (plan::Weight::scaleColumnsBy): no g.
  bool normWeighted = true;
  // Coop without norm: x holds f16 rows (8 halves a 16-byte word), the output of a normalizedRowsKernel
  // launch before, which the kernel stages as they are.
  bool halfInput = false;
  // GateUp (Coop): the result in f16 (two outputs a word; n even), for a Coop matmul with halfInput.
  bool halfResult = false;
  double eps = 0;
  bool residual = false;
  mlir::gerbil::CoopMatMulTiling coopTiling{}; // for MatMulVariant::Coop
  MatMulMode mode = MatMulMode::Single;
  // GateUp: n outputs, act(gate + bias_gate) * (up + bias_up). QKV: n rows of q, nK of k, nV of v (+ bias).
  int64_t nK = 0, nV = 0;
  bool biasA = false, biasB = false, biasC = false; // gate, up / q, k, v
  bool gelu = false, geluTanh = false;              // GateUp: the activation (else SiLU)
  // Coop, Single, halfInput, no norm or split: each workgroup multiplies one whole tile as workgroup-scope
  // matrices (VK_NV_cooperative_matrix2, matmul_coop_workgroup.glsl), for tokens a multiple of tileT, n of
  // tileN and k of tileK. Experimental: run by gerbil-kernel-bench --workgroup-scope and the kernel tests.
  bool workgroupScope = false;
};

// Bindings in this order (then the state buffer, as for every kernel):
//   Single: x, w, [g], [residual], result, [partial, counters] (split over K: scratch, counters zeroed
//           before the first launch; splitKScratch sizes them)
//   GateUp: x, w_gate, w_up, [g], [bias_gate], [bias_up], result
//   QKV:    x, w_q, w_k, w_v, [g], [bias_q], [bias_k], [bias_v], result_q, result_k, result_v, [partial,
//           counters] (split over K, as Single)
// Throws CodegenError when the variant cannot take the shape (Coop needs K a multiple of 8; GateUp subgroup
// blocks of whole gate/up fragment pairs).
KernelSource matmulKernel(const MatMulSpec &spec);

// Workgroups of the prefill variants for T tokens (the kernel catalog gives dispatch formation the same).
std::array<uint32_t, 3> matmulGrid(const MatMulSpec &spec, uint32_t tokens);

// The scratch of a Coop matmul split over K, for steps of up to maxTokens tokens: the parts of the sums
// (f32, a tile of each workgroup) and a counter a tile (left at 0 after each launch). Zero where unsplit.
struct SplitKScratch {
  uint64_t partialBytes = 0, counterBytes = 0;
};
SplitKScratch splitKScratch(const MatMulSpec &spec, int64_t maxTokens);

// RMSNorm of a step's rows of x (k wide, a multiple of 8) with an f32 weight g (unless `weighted` is false:
// g folded into the projection's weights), rounded to f16 (norm_rows_f16.glsl): the input of a Coop matmul
// with halfInput. Bindings: x, [g], result (f16, k a row); grid (T, 1, 1).
KernelSource normalizedRowsKernel(int64_t k, double eps, bool weighted = true, bool subgroupOps = false);
inline constexpr int64_t kNormalizedRowsWorkgroup = 256;

} // namespace gerbil::codegen
