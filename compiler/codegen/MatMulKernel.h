// The prefill kernels of gerbil.matmul and gerbil.linear: the tiled matmul (matmul.glsl) and the tensor-core
// matmul of the nvidia target (matmul_coop.glsl). Decode's one-token gemv (gemv.glsl, which the grouped
// projections share) is specialised by PlanBuilder::defineGemv.
// PlanBuilder and the kernel tests both specialise them here, so the tests run exactly what plans run.
#pragma once

#include "compiler/codegen/KernelWriter.h"

#include "gerbil/Passes/TargetProfile.h"

namespace gerbil::codegen {

enum class MatMulVariant { Tiled, Coop };

struct MatMulSpec {
  MatMulVariant variant = MatMulVariant::Tiled;
  int64_t k = 0, n = 0;
  plan::DType weight = plan::DType::F32;
  plan::DType normWeight = plan::DType::F32;
  bool norm = false; // RMSNorm prologue with weight g
  double eps = 0;
  bool residual = false;
  mlir::gerbil::CoopMatMulTiling coopTiling{}; // for MatMulVariant::Coop
};

// Bindings in this order: x, w, [g], [residual], result (then the state buffer, as for every kernel).
// Throws CodegenError when the variant cannot take the shape (Coop needs K a multiple of 8).
KernelSource matmulKernel(const MatMulSpec &spec);

// Workgroups of the prefill variants for T tokens (the kernel catalog gives dispatch formation the same).
std::array<uint32_t, 3> matmulGrid(const MatMulSpec &spec, uint32_t tokens);

} // namespace gerbil::codegen
