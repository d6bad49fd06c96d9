// Which kernel family runs each graph op, with its workgroup size and grid. Dispatch formation records
// these choices in the IR and codegen writes the kernel that matches them, so both read this one table.
#pragma once

#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Operation.h"

#include <array>
#include <optional>
#include <string>

namespace mlir::gerbil {

struct KernelChoice {
  std::string kernel;                // family name: "matmul", "rms_norm", ...
  std::array<int64_t, 3> workgroup;  // local size
  AffineMap grid;                    // ()[T] -> (x, y, z)
  std::optional<AffineMap> decodeGrid;  // the grid of a one-token variant decode runs, if the family has one
};

// Tiling of the generic matmul kernel: each workgroup computes kMatMulRows outputs for kMatMulTokens tokens.
inline constexpr int64_t kMatMulRows = 4;
inline constexpr int64_t kMatMulTokens = 4;
inline constexpr int64_t kElementwiseGroup = 256;
// The one-token matmul (gemv) reads 16 bytes per load, so K must be a multiple of 8 weights.
inline constexpr int64_t kGemvRows = 4;
inline constexpr int64_t kGemvLoad = 8;

// std::nullopt for ops that are not computations (weight_ref, func.return).
std::optional<KernelChoice> chooseKernel(Operation *op);

} // namespace mlir::gerbil
