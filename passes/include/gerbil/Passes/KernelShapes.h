// The shapes that dispatch formation (KernelCatalog) and codegen (compiler/codegen/*Kernel.cpp) must agree
// on. Plain C++ without MLIR: the kernel tests link codegen's kernel writers but no MLIR.
#pragma once

#include <algorithm>
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

// Decode attention (attention_decode.glsl): one workgroup of kDecodeAttentionWorkgroup invocations per
// (x, split): x handles `queryHeads` query heads of kv head x / headGroups, the split one of up to `splits`
// chunks of the cached positions (at least minChunk each). Enough splits that kvHeads * headGroups * splits
// is ~512 workgroups (a few per multiprocessor) at long contexts.
inline constexpr int64_t kDecodeAttentionWorkgroup = 32;
struct DecodeAttentionShape {
  int64_t workgroup;
  int64_t queryHeads;
  int64_t headGroups;
  int64_t splits;
  int64_t minChunk;
};
inline DecodeAttentionShape decodeAttentionShape(int64_t heads, int64_t kvHeads, int64_t) {
  DecodeAttentionShape shape{};
  shape.workgroup = kDecodeAttentionWorkgroup;
  int64_t group = heads / kvHeads;
  shape.queryHeads = 1;
  for (int64_t q = std::min<int64_t>(group, 8); q >= 1; --q)
    if (group % q == 0) {
      shape.queryHeads = q;
      break;
    }
  shape.headGroups = group / shape.queryHeads;
  shape.splits = std::clamp<int64_t>(512 / (kvHeads * shape.headGroups), 1, 128);
  shape.minChunk = 32;
  return shape;
}

} // namespace mlir::gerbil
