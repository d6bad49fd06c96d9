// The shapes that dispatch formation (KernelCatalog) and codegen (compiler/codegen/*Kernel.cpp) must agree
// on. Plain C++ without MLIR: the kernel tests link codegen's kernel writers but no MLIR.
#pragma once

#include <cstdint>

namespace mlir::gerbil {

// Tiling of the generic (prefill) matmul kernel, matmul.glsl: each workgroup of kMatMulWorkgroup
// invocations computes kMatMulRows outputs for kMatMulTokens tokens.
inline constexpr int64_t kMatMulRows = 64;
inline constexpr int64_t kMatMulTokens = 64;
inline constexpr int64_t kMatMulWorkgroup = 256;
inline constexpr int64_t kElementwiseGroup = 256;

// matmul_coop.glsl loads 16 bytes (8 f16 or bf16 weights) at a time.
inline constexpr int64_t kCoopMatMulLoad = 8;

// Prefill attention (attention_prefill.glsl): kAttentionQueryTile queries of one head per workgroup of
// kAttentionWorkgroup invocations, keys in tiles of attentionKeyTile(head_dim) (the tiles of f32 keys,
// values and queries fit in 32 KiB of shared memory up to head_dim 128). Decode runs attention_decode.glsl
// (KernelCatalog.h's DecodeAttentionShape).
inline constexpr int64_t kAttentionQueryTile = 16;
inline constexpr int64_t kAttentionWorkgroup = 128;
inline constexpr int64_t attentionKeyTile(int64_t headDim) {
  return headDim <= 64 ? 32 : headDim <= 128 ? 16 : 8;
}

} // namespace mlir::gerbil
