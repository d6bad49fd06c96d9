// Which kernel family runs each graph op, with its workgroup size and grid. Dispatch formation records
// these choices in the IR and codegen writes the kernel that matches them, so both read this one table.
#pragma once

#include "gerbil/Passes/TargetProfile.h"

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

// Tiling of the generic (prefill) matmul kernel, matmul.glsl: each workgroup of kMatMulWorkgroup
// invocations computes kMatMulRows outputs for kMatMulTokens tokens.
inline constexpr int64_t kMatMulRows = 64;
inline constexpr int64_t kMatMulTokens = 64;
inline constexpr int64_t kMatMulWorkgroup = 256;
inline constexpr int64_t kElementwiseGroup = 256;
// The one-token matmul (gemv) reads 16 bytes per load, so K must be a multiple of 8 weights.
inline constexpr int64_t kGemvRows = 4;
inline constexpr int64_t kGemvLoad = 8;

// Whether a matmul of reduction width k may run on cooperative matrices under `profile` (matmul_coop.glsl
// loads 16 bytes of weights at a time); it also needs f16 or bf16 weights on the device.
bool usesCoopMatMul(const TargetProfile &profile, int64_t k);

// Prefill attention (attention_prefill.glsl): kAttentionQueryTile queries of one head per workgroup of
// kAttentionWorkgroup invocations, keys in tiles of attentionKeyTile(head_dim) (the tiles of f32 keys,
// values and queries fit in 32 KiB of shared memory up to head_dim 128). Decode runs attention.glsl, one
// workgroup per head, with the same workgroup size.
inline constexpr int64_t kAttentionQueryTile = 16;
inline constexpr int64_t kAttentionWorkgroup = 128;
inline constexpr int64_t attentionKeyTile(int64_t headDim) {
  return headDim <= 64 ? 32 : headDim <= 128 ? 16 : 8;
}

// std::nullopt for ops that are not computations (weight_ref, func.return). `profile` chooses among the
// kernel families of a target (the tensor-core matmul of `nvidia`).
std::optional<KernelChoice> chooseKernel(Operation *op,
                                         const TargetProfile &profile = targetProfiles().front());

} // namespace mlir::gerbil
