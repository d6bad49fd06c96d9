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
  std::array<int64_t, 3> decodeWorkgroup = {0, 0, 0}; // and its workgroup size
};

// Tiling of the generic matmul kernel: each workgroup computes kMatMulRows outputs for kMatMulTokens tokens.
inline constexpr int64_t kMatMulRows = 4;
inline constexpr int64_t kMatMulTokens = 4;
inline constexpr int64_t kElementwiseGroup = 256;

// The one-token matmul decode runs (gemv.glsl). Each workgroup of `workgroup` invocations computes `rows`
// outputs (for a gate/up group: `rows` outputs, each from a gate row and an up row) and stages the input row
// in shared memory `xTile` floats at a time. Rows per workgroup grow with N so that a large projection has
// fewer, fuller workgroups (less re-reading of the input) while a small one still spreads over several
// hundred workgroups, enough for a GPU of ~130 multiprocessors; invocations per workgroup grow with K so that
// each strides over at least two 16-byte loads of a row.
struct GemvShape {
  int64_t workgroup = 64;
  int64_t rows = 2;
  int64_t xTile = 0;
  bool pairedRows = false;
  int64_t slots() const { return pairedRows ? 2 * rows : rows; } // dot products per workgroup
};
GemvShape gemvShape(int64_t k, int64_t n, bool pairedRows);
inline constexpr int64_t kGemvMaxXTile = 6144; // floats: 24 KiB of shared memory

// std::nullopt for ops that are not computations (weight_ref, func.return).
std::optional<KernelChoice> chooseKernel(Operation *op);

} // namespace mlir::gerbil
