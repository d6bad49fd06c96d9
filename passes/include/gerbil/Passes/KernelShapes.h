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

// The greedy argmax (argmax.glsl): workgroups of kArgmaxWorkgroup invocations, each invocation with
// kArgmaxLoads logits in flight, so a 128k vocabulary is one round of loads over ~63 workgroups.
inline constexpr int64_t kArgmaxWorkgroup = 256;
inline constexpr int64_t kArgmaxLoads = 8;
inline constexpr int64_t argmaxGroups(int64_t vocab) {
  return std::max<int64_t>(1,
                           (vocab + kArgmaxWorkgroup * kArgmaxLoads - 1) / (kArgmaxWorkgroup * kArgmaxLoads));
}

// Kernels that copy or rotate rows of a token (embedding, position_embedding, rope, kv_append): grid (T,
// ceil(row / (kRowWorkgroup · kRowLoads))), kRowLoads elements per invocation with their loads issued
// together (one workgroup looping over a row one element at a time was a chain of dependent loads: 12–31 µs a
// launch on an H200).
inline constexpr int64_t kRowWorkgroup = 64;
inline constexpr int64_t kRowLoads = 4;

// Prefill attention (attention_prefill.glsl): kAttentionQueryTile queries of one head per workgroup of
// kAttentionWorkgroup invocations, keys in tiles of attentionKeyTile(head_dim) (the tiles of f32 keys,
// values and queries fit in 32 KiB of shared memory up to head_dim 128). Decode runs attention_decode.glsl
// (KernelCatalog.h's DecodeAttentionShape).
inline constexpr int64_t kAttentionQueryTile = 16;
inline constexpr int64_t kAttentionWorkgroup = 128;
inline constexpr int64_t attentionKeyTile(int64_t headDim) {
  return headDim <= 64 ? 32 : headDim <= 128 ? 16 : 8;
}

// The one-token matmul decode runs (gemv.glsl): a pair of weight rows is summed by `split` teams of 32
// invocations that share its K; `rows` rows (rows / 2 pairs) per workgroup of `workgroup` invocations. For a
// gate/up group a pair is a gate row and an up row and gives one output, so a workgroup makes rows / 2
// outputs. Long rows of narrow projections are split until there are ~8192 teams (a whole H200's worth of
// resident subgroups) while each invocation keeps at least two 16-byte loads per row; so every launch has
// its weights in flight at once instead of streaming them through a few hundred subgroups.
struct GemvShape {
  int64_t workgroup = 128;
  int64_t rows = 8;
  int64_t split = 1;
  bool pairedRows = false;
  int64_t outputs() const { return pairedRows ? rows / 2 : rows; } // per workgroup
};
// The shape of `split` teams per pair, in workgroups of at least `workgroup` invocations (0: 128; more
// pairs a workgroup, so fewer workgroups: a variant to tune with, gerbil-kernel-bench gemv --workgroup).
inline GemvShape gemvShapeWithSplit(int64_t split, bool pairedRows, int64_t workgroup = 0) {
  GemvShape shape;
  shape.pairedRows = pairedRows;
  shape.split = split;
  shape.workgroup = std::max<int64_t>(workgroup ? workgroup : 128, 32 * split);
  shape.rows = 2 * shape.workgroup / (32 * split);
  return shape;
}
inline GemvShape gemvShape(int64_t k, int64_t n, bool pairedRows, int64_t workgroup = 0) {
  const int64_t pairs = pairedRows ? n : (n + 1) / 2;
  const int64_t loads = (k + 7) / 8; // 16-byte loads per row of 16-bit weights
  int64_t split = 1;
  while (split < 8 && pairs * split < 8192 && loads >= 32 * split * 2 * 2) split *= 2;
  // Short rows still gain from more teams while the launch stays within ~8192 teams: two (sweeps bq, br,
  // H100: Qwen2.5-0.5B's o 5.9 -> 5.1 us, q/k/v 6.1 -> 5.3; its gate/up, 4864 pairs, 10.0 -> 10.3 with
  // two), and four where that still keeps within 2048 pairs, though a team's lanes then outnumber the row's
  // loads (sweeps cw, cx, H100: the o 4.95 -> 4.6 us, 1152 such rows 5.3 -> 4.9; eight no better).
  if (split == 1 && loads >= 32 * 2 && pairs * 2 <= 8192) split = pairs * 4 <= 8192 ? 4 : 2;
  return gemvShapeWithSplit(split, pairedRows, workgroup);
}
// The grouped q/k/v gemv: the shape of one projection of all their rows (rotary pairs stay in a workgroup).
inline GemvShape qkvShape(int64_t k, int64_t nq, int64_t nk, int64_t nv, int64_t workgroup = 0) {
  return gemvShape(k, nq + nk + nv, false, workgroup);
}

// The workgroups of a launch that picks the greedy token hand their candidates up a tree of counters
// (argmax_combine.glsl, its SEGMENTS): one for each run of `workgroup` of them, and one over those. The
// scratch holds `counters()` counters and `candidates()` values and as many indices.
struct ArgmaxGrid {
  int64_t groups = 1, segments = 1;
  int64_t counters() const { return segments > 1 ? 1 + segments : 1; }
  int64_t candidates() const { return segments > 1 ? groups + segments : groups; } // values; as many indices
};
inline ArgmaxGrid argmaxGrid(int64_t groups, int64_t workgroup) {
  return {groups, (groups + workgroup - 1) / workgroup};
}
// The argmax launch over the logits (argmax.glsl).
inline ArgmaxGrid argmaxGrid(int64_t vocab) {
  return argmaxGrid(argmaxGroups(vocab), kArgmaxWorkgroup);
}
// The logits projection's gemv that also picks the token (ARGMAX, gerbil-fuse-logits-argmax): the gemv's
// grid.
inline ArgmaxGrid gemvArgmaxGrid(int64_t k, int64_t n) {
  const GemvShape shape = gemvShape(k, n, false);
  return argmaxGrid((n + shape.outputs() - 1) / shape.outputs(), shape.workgroup);
}

// Prefill attention on cooperative matrices (attention_prefill_coop.glsl): kCoopAttentionWarps subgroups of
// 16 queries each per workgroup, keys staged kCoopAttentionKeyTile at a time. Its shared memory (f16 key and
// value tiles of padded rows, through which the queries are staged first, and each subgroup's f32 scores
// and f16 probabilities) must fit the 48 KiB of the devices that have the extension; head dims are
// multiples of 16 up to 128 (beyond, the output fragments would not fit the registers).
// Measured on the H200 (2026-12-03): 2 subgroups with 64-key tiles for head dims up to 64 (half as many
// steps for the last query tiles) took Qwen2.5-0.5B's prefill attention from 75 to 100 µs a layer.
inline constexpr int64_t kCoopAttentionWarps = 4;
// Keys staged at a time, for every head dim: 64-key tiles fit head dims up to 64 but were slower on the
// H200 (sweep ae: Qwen2.5-0.5B's 512-token step 30.7 -> 38.1 µs, Llama-3.2-1B's 44.5 -> 61.0).
inline constexpr int64_t kCoopAttentionKeyTile = 32;
inline constexpr int64_t kCoopAttentionQueryTile = 16 * kCoopAttentionWarps; // 16 queries a subgroup
// Floats past each row of a subgroup's score tile, against bank conflicts (the kernel's SCORE_PAD).
inline constexpr int64_t kCoopAttentionScorePad = 4;
inline constexpr int64_t coopAttentionSharedBytes(int64_t headDim, int64_t keyTile = kCoopAttentionKeyTile) {
  const int64_t rowBytes = (headDim / 8 + 1) * 16;
  return 2 * keyTile * rowBytes + kCoopAttentionWarps * 16 * (keyTile + kCoopAttentionScorePad) * 4 +
         kCoopAttentionWarps * 16 * (keyTile / 8 + 1) * 16;
}
// keyTile: a multiple of 16 whose key and value tiles hold the query tile's rows.
inline constexpr bool fitsCoopAttention(int64_t headDim, int64_t keyTile = kCoopAttentionKeyTile) {
  return headDim % 16 == 0 && headDim <= 128 && keyTile % 16 == 0 && 2 * keyTile >= kCoopAttentionQueryTile &&
         coopAttentionSharedBytes(headDim, keyTile) <= 48 * 1024;
}
// The key tile codegen takes: 64 keys where a workgroup's subgroups share one kv head's keys (sharedKeys)
// and such tiles fit (head dims up to 64), else kCoopAttentionKeyTile. With the score rows padded, the
// loads unconditional and an f16 cache staged as stored, Llama-3.2-1B's 512-token step (shared keys) took
// 23.5 -> 21.4 µs (H100, sweeps ch and cj; 26.9 -> 24.3 on an f32 cache, sweep cg); Qwen2.5-0.5B's
// (7 query heads a kv head: not shared) 20.7 -> 22.8, as in sweep ce.
inline constexpr int64_t kCoopAttentionSharedKeyTile = 64;
inline constexpr int64_t coopAttentionKeyTile(int64_t headDim, bool sharedKeys) {
  return sharedKeys && fitsCoopAttention(headDim, kCoopAttentionSharedKeyTile) ? kCoopAttentionSharedKeyTile
                                                                               : kCoopAttentionKeyTile;
}
// The keys a query tile sees can be split between up to kCoopAttentionMaxKeySplits workgroups (grid z),
// each taking an equal run of whole key tiles; the last of them to finish combines their results. It pays
// only where a step's query tiles leave multiprocessors idle (sweep z, H200, 512-token steps: Qwen2.5-0.5B's
// 14 heads, 112 workgroups unsplit, 73 -> 60 µs with 4 splits; the 256 of Llama-3.2-1B and Llama-3-8B's 32
// heads lost 5-15% with 4), so heads whose 512-token step (8 query tiles) fills fewer than 128 workgroups
// take 4 splits, others 1. Sweep ad, the one-pass kernel: the same (32 heads 17-30% slower with 2 splits).
inline constexpr int64_t kCoopAttentionMaxKeySplits = 8; // the combine's weights fit one score tile
inline constexpr int64_t coopAttentionKeySplits(int64_t heads) {
  return heads * 8 < 128 ? 4 : 1;
}

// Decode attention (attention_decode.glsl): one workgroup of `warps` × 32 invocations per (x, split): x
// handles `queryHeads` query heads of kv head x / headGroups, the split one of up to `splits` chunks of the
// cached positions (at least minChunk = warps × 32 each), whose blocks of 32 keys its warps take in turn.
// The warps' results are combined in shared memory, so that a context of up to minChunk positions needs no
// hand-over between workgroups; longer ones spread over enough splits that kvHeads * headGroups * splits is
// ~512 workgroups at long contexts (a target profile may aim at another count, or at a count of splits for
// heads of up to 64 dims: DecodeAttentionChoice), and no more than `positions` (the KV cache's, gerbilc's
// --max-seq; 0: unknown, as in dispatch formation without its max-seq option) need. As many warps (8, 4, 2,
// 1) as fit kDecodeAttentionSharedBudget.
inline constexpr int64_t kDecodeAttentionLanes = 32;
inline constexpr int64_t kDecodeAttentionSharedBudget = 30 * 1024; // under lavapipe's 32 KiB
struct DecodeAttentionShape {
  int64_t workgroup;
  int64_t warps;
  int64_t queryHeads;
  int64_t headGroups;
  int64_t splits;
  int64_t minChunk;
};
// The shared memory of attention_decode.glsl (its arrays, in its order).
inline constexpr int64_t decodeAttentionSharedBytes(int64_t headDim, int64_t queryHeads, int64_t warps,
                                                    int64_t splits) {
  const int64_t lanes = kDecodeAttentionLanes, workgroup = warps * lanes, dimVecs = (headDim + 3) / 4;
  const int64_t keyGroups = dimVecs < lanes && lanes % dimVecs == 0 ? lanes / dimVecs : 1;
  const int64_t rowLanes = lanes / keyGroups, vecsPerLane = (dimVecs + rowLanes - 1) / rowLanes;
  const int64_t stage = std::max((keyGroups - 1) * queryHeads * vecsPerLane * rowLanes, queryHeads * dimVecs);
  return queryHeads * dimVecs * 16 + warps * queryHeads * lanes * 4 + warps * stage * 16 +
         2 * warps * queryHeads * 4 + splits * queryHeads * 4 + queryHeads * 4 + 4 +
         std::max<int64_t>(queryHeads * (workgroup / 4), workgroup) * 4;
}
// What a caller may choose of the decode attention's shape instead of the catalog, where not 0
// (gerbil-kernel-bench's variants to tune with; gerbilc's @decode-query-heads= and @decode-splits=).
struct DecodeAttentionChoice {
  int64_t queryHeads = 0; // must divide heads / kvHeads, else the catalog's is kept
  int64_t warps = 0;      // the caller checks that their shared memory fits its device
  int64_t splits = 0;     // the most workgroups a kv head's cached positions are cut between
  // Without `splits`: the workgroups (columns × splits) a long context is spread over, which sets the
  // splits (a target profile's; 0: kDecodeAttentionWorkgroups).
  int64_t workgroups = 0;
  // Without `splits`, for heads of up to 64 dims: the splits themselves instead of those `workgroups` give
  // (a target profile's; 0: none).
  int64_t smallHeadSplits = 0;
};
inline constexpr int64_t kDecodeAttentionWorkgroups = 512;
// halfCache: the KV cache holds f16; `choice` replaces the catalog's query heads, warps or splits.
inline DecodeAttentionShape decodeAttentionShape(int64_t heads, int64_t kvHeads, int64_t headDim,
                                                 bool halfCache, int64_t positions = 0,
                                                 const DecodeAttentionChoice &choice = {}) {
  DecodeAttentionShape shape{};
  int64_t group = heads / kvHeads;
  shape.queryHeads = 1;
  // Heads of up to 64 dims: one query head a workgroup. The H200 (sweep w, 2026-12-03) ran Qwen2.5-0.5B's
  // step at position 191 in 6.9 µs against 10.6 with its 7 query heads in one workgroup (2 workgroups
  // a split), and Llama-3.2-1B's in 7.6 against 9.1: re-reading a kv head's rows from the L2 costs less
  // than the serial walk of few workgroups. At 128 dims (Llama-3-8B) both took 13.2–13.4 µs, so wider heads
  // on an f32 cache keep sharing their kv rows, two query heads a workgroup since the keys are read by 4
  // lanes each (sweep bb, 2026-12-04: 8.9 µs with 2 and 8 warps against 10.8 with 4, 11.1 with 1). On an
  // f16 cache one a workgroup again (sweep cz, H100, 2026-12-07: 7.20 µs alone against 8.32 with two; in the
  // 8B's model 10.7 -> 8.9 µs a layer, decode 184.1 -> 186.0 tok/s).
  if (headDim > 64 && !halfCache)
    for (int64_t q = std::min<int64_t>(group, 2); q >= 1; --q)
      if (group % q == 0) {
        shape.queryHeads = q;
        break;
      }
  if (choice.queryHeads > 0 && group % choice.queryHeads == 0) shape.queryHeads = choice.queryHeads;
  shape.headGroups = group / shape.queryHeads;
  const int64_t workgroups = choice.workgroups > 0 ? choice.workgroups : kDecodeAttentionWorkgroups;
  shape.splits = std::clamp<int64_t>(workgroups / (kvHeads * shape.headGroups), 1, 64);
  if (choice.smallHeadSplits > 0 && headDim <= 64)
    shape.splits = std::min<int64_t>(choice.smallHeadSplits, 64);
  if (choice.splits > 0) shape.splits = choice.splits;
  shape.warps = 8;
  while (shape.warps > 1 && decodeAttentionSharedBytes(headDim, shape.queryHeads, shape.warps, shape.splits) >
                                kDecodeAttentionSharedBudget)
    shape.warps /= 2;
  if (choice.warps > 0) shape.warps = choice.warps;
  shape.workgroup = shape.warps * kDecodeAttentionLanes;
  shape.minChunk = shape.warps * kDecodeAttentionLanes;
  if (positions > 0) shape.splits = std::min(shape.splits, (positions + shape.minChunk - 1) / shape.minChunk);
  return shape;
}

} // namespace mlir::gerbil
