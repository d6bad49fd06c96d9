// Causal grouped-query attention for prefill on tensor cores (GL_NV_cooperative_matrix, f16 operands, f32
// accumulators). Each workgroup of WARPS subgroups takes Q_TILE = 16 · WARPS queries of one head, each
// subgroup 16 of them; keys and values are staged in shared memory KV_TILE at a time (rounded to f16).
// Per key tile: S = Q·Kᵀ on the tensor cores, through shared memory, where the lanes read it by row (two
// lanes a row); P = exp(S - the row's max) rounded to f16 into shared memory; O += P·V on the tensor cores.
// GL_NV_cooperative_matrix says nothing of which fragment element is which row, so O cannot be rescaled in
// registers as the row maxima grow: a row's maximum is raised only when a tile passes it by RESCALE_SLACK,
// and then the subgroup's O fragments make a round trip through shared memory. O is divided by the rows'
// sums as it leaves (through shared memory, so that rows past T are not written). No T×T matrix is stored.
// KEY_SPLITS > 1: the key tiles a query tile sees are cut into up to KEY_SPLITS equal runs, one a workgroup
// (grid z; the workgroups past the runs a tile has return at once), each taking its run only. Each split
// stores its output and its rows' maxima and sums to `partial`; the last of a tile's splits to count itself
// in (an atomic counter a tile, which it returns to 0) weighs them by exp(max - the rows' max) over the
// weighted sums and writes the result. A tile with one run writes its result directly.
// Grid (HEADS, ceil(T / Q_TILE), KEY_SPLITS). HEAD_DIM and KV_TILE multiples of 16, Q_TILE <= 2 · KV_TILE.
// ATTENTION_SHARED_KEYS (codegen sets it where a kv head serves WARPS query heads and the keys are not
// split; the kernel checks the same): the same workgroups take, each, 16 queries of the WARPS heads that
// share a kv head, one head a subgroup, so that the keys and values are loaded and converted once for the
// WARPS heads instead of once each, and the causal bound is that of 16 queries instead of Q_TILE; the
// latest queries (the most keys) start first.
#ifndef KEY_SPLITS
#define KEY_SPLITS 1
#endif
// A row's maximum is raised when a tile's scores exceed it by more than this, so probabilities stay below
// exp(8) ≈ 2981 (f16 holds up to 65504) and the output is rescaled for few tiles.
#ifndef RESCALE_SLACK
#define RESCALE_SLACK 8.0
#endif
// RESULT_HALF: the output in f16 (8 dims a 16-byte word where whole fragments leave), for a tensor-core
// matmul that reads its input rows in f16 (its staging would round them anyway). 16-byte words, because
// 4-byte stores of two halves made this kernel 11-15% slower on the H200 (79f28f9); sweep ac timed these
// 0-3% faster than the f32 stores.
#ifndef RESULT_HALF
#define RESULT_HALF 0
#endif
#ifndef ATTENTION_SHARED_KEYS
#define ATTENTION_SHARED_KEYS 0
#endif
// SCORE_PAD: floats past each row of a subgroup's score tile (KernelShapes.h's kCoopAttentionScorePad, which
// counts the shared memory). Two lanes read a row's scores, each 16 consecutive ones; with rows of KV_TILE =
// 32 floats (128 bytes) every row starts in the same bank, and the 16 rows' lanes collide on 2 banks. 4
// floats more a row spread them: sweep cd (H100, 512-token steps) 49.3 -> 41.0 µs for Llama-3-8B's
// attention, 39.4 -> 28.1 for Llama-3.2-1B's, 27.2 -> 22.3 for Qwen2.5-0.5B's; 8 floats: 42.9 for the 8B's.
#ifndef SCORE_PAD
#define SCORE_PAD 4
#endif
// Diagnostics for gerbil-kernel-bench, each leaving a part of the loop over the key tiles out (the results
// are wrong): ATTENTION_DIAG_SAME_KEYS stages the first tile only (no global loads in the loop),
// ATTENTION_DIAG_NO_SCORES leaves out S = Q·Kᵀ (the lanes read whatever the score tile holds),
// ATTENTION_DIAG_NO_SOFTMAX takes the scores as they are for probabilities (no maxima, exp or rescaling),
// ATTENTION_DIAG_NO_VALUES leaves out O += P·V.
#ifndef ATTENTION_DIAG_SAME_KEYS
#define ATTENTION_DIAG_SAME_KEYS 0
#endif
#ifndef ATTENTION_DIAG_NO_SCORES
#define ATTENTION_DIAG_NO_SCORES 0
#endif
#ifndef ATTENTION_DIAG_NO_SOFTMAX
#define ATTENTION_DIAG_NO_SOFTMAX 0
#endif
#ifndef ATTENTION_DIAG_NO_VALUES
#define ATTENTION_DIAG_NO_VALUES 0
#endif

const uint FRAG = 16u;
const uint SUBGROUP = 32u;
const uint WARPS = WORKGROUP / SUBGROUP;
const uint Q_TILE = FRAG * WARPS;
const uint D_FRAGS = HEAD_DIM / FRAG;
const uint K_FRAGS = KV_TILE / FRAG;
// Rows of the staged f16 tiles as 16-byte words, padded by one word (bank spread of the fragment loads).
const uint ROW_WORDS = HEAD_DIM / 8u + 1u;
const uint P_WORDS = KV_TILE / 8u + 1u;
const uint S_STRIDE = KV_TILE + SCORE_PAD;  // floats a score row (a multiple of 4: 16-byte fragment rows)
const float NO_SCORE = -3.0e38;
const bool SHARED_KEYS = ATTENTION_SHARED_KEYS != 0 && HEADS / KV_HEADS == WARPS && KEY_SPLITS == 1;

#define FragA fcoopmatNV<16, gl_ScopeSubgroup, FRAG, FRAG>
#define FragB fcoopmatNV<16, gl_ScopeSubgroup, FRAG, FRAG>
#define FragC fcoopmatNV<32, gl_ScopeSubgroup, FRAG, FRAG>

shared uvec4 kTile_[KV_TILE * ROW_WORDS];
shared uvec4 vTile_[KV_TILE * ROW_WORDS];
shared float sTile_[WARPS][FRAG * S_STRIDE];  // one subgroup's scores, row-major
shared uvec4 pTile_[WARPS][FRAG * P_WORDS];   // its probabilities, f16

// Keys [key0, key0 + KV_TILE) of kv head `kvHead` and their values are staged in two halves: every load of
// the tile into registers, issued together (and before the previous tile's products, so that the latency
// hides behind them), then the stores into the shared tiles. An f16 cache is staged as it is stored, 8
// halves a 16-byte word, without conversion: unpacked at its load (as it was), each load was waited on there.
const uint STAGE_WORDS = KV_TILE * HEAD_DIM / 8u;
const uint STAGE_PER_INVOCATION = (STAGE_WORDS + WORKGROUP - 1u) / WORKGROUP;
#if CACHE_HALF
#define CacheWord uvec2  // 4 halves: the f16 cache's 16-byte view holds 8 bytes an element
#define stagedWord(a, b) uvec4(a, b)
#else
#define CacheWord vec4
#define stagedWord(a, b) packHalf8(a, b)
#endif
struct StagedKeys {
  CacheWord k[STAGE_PER_INVOCATION][2], v[STAGE_PER_INVOCATION][2];
};
// Dims 4 · d4.. of a cached key or value, as the cache holds them.
CacheWord loadCache(uint kvHead, uint key, uint d4, bool values) {
  uint at = ((kvHead * SEQ + key) * HEAD_DIM) / 4u + d4;
  return values ? v_cache_v4[at] : k_cache_v4[at];
}
// Keys past `lastKey` load row `lastKey` (a row this step or an earlier one wrote, so finite: their scores
// are masked and their values weighed by 0) instead of zeros, so that every load is unconditional and the
// compiler issues them together: sweep cg (H100, 512-token steps) took the 8B's attention from 40.9 to 36.2
// µs alone (38.8 against 42.0 in the model), the 1B's from 28.4 to 26.9 (34.8 against 39.8 in the model).
void loadKeys(uint kvHead, uint key0, uint lastKey, out StagedKeys st) {
  [[unroll]] for (uint i = 0; i < STAGE_PER_INVOCATION; ++i) {
    uint w = gl_LocalInvocationIndex + i * WORKGROUP;
    if (STAGE_WORDS % WORKGROUP != 0u && w >= STAGE_WORDS) break;  // past the tile: never stored
    uint r = w / (HEAD_DIM / 8u), c = w % (HEAD_DIM / 8u), key = min(key0 + r, lastKey);
    st.k[i][0] = loadCache(kvHead, key, 2u * c, false);
    st.k[i][1] = loadCache(kvHead, key, 2u * c + 1u, false);
    st.v[i][0] = loadCache(kvHead, key, 2u * c, true);
    st.v[i][1] = loadCache(kvHead, key, 2u * c + 1u, true);
  }
}
void storeKeys(StagedKeys st) {
  [[unroll]] for (uint i = 0; i < STAGE_PER_INVOCATION; ++i) {
    uint w = gl_LocalInvocationIndex + i * WORKGROUP;
    if (w >= STAGE_WORDS) break;
    uint r = w / (HEAD_DIM / 8u), c = w % (HEAD_DIM / 8u);
    kTile_[r * ROW_WORDS + c] = stagedWord(st.k[i][0], st.k[i][1]);
    vTile_[r * ROW_WORDS + c] = stagedWord(st.v[i][0], st.v[i][1]);
  }
}
// This subgroup's scores against the staged keys, into sTile_[warp] (row = query, column = key).
void scoreTile(uint warp, FragA q[D_FRAGS]) {
  [[unroll]] for (uint a = 0; a < K_FRAGS; ++a) {
    FragC s = FragC(0.0);
    [[unroll]] for (uint dd = 0; dd < D_FRAGS; ++dd) {
      FragB k;
      coopMatLoadNV(k, kTile_, a * FRAG * ROW_WORDS + dd * 2u, ROW_WORDS, true);
      s = coopMatMulAddNV(q[dd], k, s);
    }
    coopMatStoreNV(s, sTile_[warp], a * FRAG, S_STRIDE, false);
  }
  subgroupMemoryBarrierShared();
  subgroupBarrier();
}

#if KEY_SPLITS > 1
// Publishes this split's share (output fragments, each row's max and sum) and counts it in; the tile's last
// split adds the shares, each row's weighted by exp(max - the rows' max) over the total of the splits' sums
// so weighted, in split order (the result does not depend on which finished last).
// A split's block of `partial`: Q_TILE rows of HEAD_DIM outputs, then Q_TILE maxima, then Q_TILE sums.
const uint SPLIT_BLOCK = Q_TILE * (HEAD_DIM + 2u);
void combineSplits(FragC o[D_FRAGS], uint head, uint split, uint runs, uint warp, uint row, uint half_,
                   float rowMax, float rowSum, uint t0) {
  uint tile = head * gl_NumWorkGroups.y + gl_WorkGroupID.y;
  uint block = (tile * KEY_SPLITS + split) * SPLIT_BLOCK;
  [[unroll]] for (uint dd = 0; dd < D_FRAGS; ++dd)
    coopMatStoreNV(o[dd], partial_, block + warp * FRAG * HEAD_DIM + dd * FRAG, HEAD_DIM, false);
  if (half_ == 0u) {
    partial_[block + Q_TILE * HEAD_DIM + warp * FRAG + row] = rowMax;
    partial_[block + Q_TILE * HEAD_DIM + Q_TILE + warp * FRAG + row] = rowSum;
  }
  memoryBarrierBuffer();
  barrier();
  // Whether this workgroup adds the shares, in the score tiles (free since the loop over the keys ended).
  if (gl_LocalInvocationIndex == 0u) sTile_[0][0] = atomicAdd(counters[tile], 1) == int(runs) - 1 ? 1.0 : 0.0;
  barrier();
  if (sTile_[0][0] == 0.0) return;
  memoryBarrierBuffer();
  if (gl_LocalInvocationIndex == 0u) atomicExchange(counters[tile], 0);  // ready for the next launch
  barrier();  // every invocation has read the flag before the weights overwrite it
  // Each row's weight for each split, into sTile_[0] (Q_TILE × KEY_SPLITS floats).
  for (uint r = gl_LocalInvocationIndex; r < Q_TILE; r += WORKGROUP) {
    uint first = tile * KEY_SPLITS * SPLIT_BLOCK + Q_TILE * HEAD_DIM + r;
    float maxima[KEY_SPLITS], sums[KEY_SPLITS], top = NO_SCORE, total = 0.0;
    [[unroll]] for (uint s = 0; s < KEY_SPLITS; ++s) {
      maxima[s] = s < runs ? partial_[first + s * SPLIT_BLOCK] : NO_SCORE;
      sums[s] = s < runs ? partial_[first + s * SPLIT_BLOCK + Q_TILE] : 0.0;
      top = max(top, maxima[s]);
    }
    float weights[KEY_SPLITS];
    [[unroll]] for (uint s = 0; s < KEY_SPLITS; ++s) {
      weights[s] = exp(maxima[s] - top);
      total += sums[s] * weights[s];
    }
    [[unroll]] for (uint s = 0; s < KEY_SPLITS; ++s) sTile_[0][r * KEY_SPLITS + s] = total > 0.0 ? weights[s] / total : 0.0;
  }
  barrier();
  // 8 outputs an invocation: one 16-byte word of f16 results (4-byte stores of two halves cost the
  // unsplit path 11-15%).
  for (uint e = gl_LocalInvocationIndex; e < Q_TILE * HEAD_DIM / 8u; e += WORKGROUP) {
    uint r = 8u * e / HEAD_DIM, d = 8u * e % HEAD_DIM, t = t0 + r;
    if (t >= step_.tokens) continue;
    vec4 a = vec4(0.0), b = vec4(0.0);
    for (uint s = 0; s < runs; ++s) {
      uint at = ((tile * KEY_SPLITS + s) * SPLIT_BLOCK) / 4u + 2u * e;
      a += sTile_[0][r * KEY_SPLITS + s] * partial_v4[at];
      b += sTile_[0][r * KEY_SPLITS + s] * partial_v4[at + 1u];
    }
    uint out_ = (t * HEADS + head) * HEAD_DIM + d;
#if RESULT_HALF
    result_v4[out_ / 8u] = packHalf8(a, b);
#else
    [[unroll]] for (uint c = 0; c < 4u; ++c) {
      store_result(out_ + c, a[c]);
      store_result(out_ + 4u + c, b[c]);
    }
#endif
  }
}
#endif

const uint HALF = KV_TILE / 2u;  // the score columns of each of a row's two lanes

// O += P·V over the staged values: this lane's probabilities `p` (row `row`, columns half_ · HALF..) are
// rounded to f16 into the subgroup's probability tile, the A operand.
void accumulateValues(uint warp, uint row, uint half_, float p[HALF], inout FragC o[D_FRAGS]) {
  [[unroll]] for (uint c = 0; c < HALF; c += 8u)
    pTile_[warp][row * P_WORDS + (half_ * HALF + c) / 8u] =
        packHalf8(vec4(p[c], p[c + 1u], p[c + 2u], p[c + 3u]), vec4(p[c + 4u], p[c + 5u], p[c + 6u], p[c + 7u]));
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  [[unroll]] for (uint a = 0; a < K_FRAGS; ++a) {
    FragA pa;
    coopMatLoadNV(pa, pTile_[warp], a * 2u, P_WORDS, false);
    [[unroll]] for (uint dd = 0; dd < D_FRAGS; ++dd) {
      FragB v;
      coopMatLoadNV(v, vTile_, a * FRAG * ROW_WORDS + dd * 2u, ROW_WORDS, false);
      o[dd] = coopMatMulAddNV(pa, v, o[dd]);
    }
  }
}

// Row `row` of the subgroup's output times `factor` (each of its two lanes passes the row's): the fragments
// go through the subgroup's score tile, whose rows the lanes can address.
void scaleRows(uint warp, uint row, uint half_, float factor, inout FragC o[D_FRAGS]) {
  [[unroll]] for (uint dd = 0; dd < D_FRAGS; ++dd) {
    coopMatStoreNV(o[dd], sTile_[warp], 0u, FRAG, false);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    [[unroll]] for (uint c = 0; c < FRAG / 2u; ++c) sTile_[warp][row * FRAG + half_ * (FRAG / 2u) + c] *= factor;
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    coopMatLoadNV(o[dd], sTile_[warp], 0u, FRAG, false);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
  }
}

// Whether query position `position` sees key `key` (causal, and the sliding window).
bool sees(uint position, uint key) {
  return key <= position && (WINDOW == 0u || key + WINDOW > position);
}

void main() {
  uint warp = gl_LocalInvocationIndex / SUBGROUP, lane = gl_LocalInvocationIndex % SUBGROUP;
  // This subgroup's head and its first query (warpT0); the workgroup's first query t0 and last tLast.
  uint head, kvHead, t0, warpT0, tLast;
  if (SHARED_KEYS) {
    // The grid's HEADS × ceil(T / Q_TILE) workgroups as KV_HEADS × ceil(T / 16) (as many or more: the rest
    // return), the latest query tiles first.
    uint linear = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    uint tiles = (step_.tokens + FRAG - 1u) / FRAG, tile = linear / KV_HEADS;
    if (tile >= tiles) return;
    kvHead = linear % KV_HEADS;
    head = kvHead * WARPS + warp;
    t0 = (tiles - 1u - tile) * FRAG;
    warpT0 = t0;
    tLast = min(t0 + FRAG, step_.tokens) - 1u;
  } else {
    head = gl_WorkGroupID.x;
    kvHead = head / (HEADS / KV_HEADS);
    t0 = gl_WorkGroupID.y * Q_TILE;
    warpT0 = t0 + warp * FRAG;
    tLast = min(t0 + Q_TILE, step_.tokens) - 1u;
  }
  // Keys any query of the tile may see: [tileFirst, tileLast], the same loop for every invocation.
  uint firstPosition = state_.position + t0, lastPosition = state_.position + tLast;
  uint tileFirst = (WINDOW > 0u && firstPosition + 1u > WINDOW) ? firstPosition + 1u - WINDOW : 0u;
  uint key0 = tileFirst - tileFirst % KV_TILE;
  // This workgroup's keys [keyBegin, keyEnd): a run of whole tiles (every run of a tile's `runs` has one).
  uint keyTiles = (lastPosition - key0) / KV_TILE + 1u;
  uint runs = min(uint(KEY_SPLITS), keyTiles);
  uint runTiles = (keyTiles + runs - 1u) / runs;
  runs = (keyTiles + runTiles - 1u) / runTiles;
  uint split = gl_WorkGroupID.z;
  if (split >= runs) return;
  uint keyBegin = key0 + split * runTiles * KV_TILE;
  uint keyEnd = min(keyBegin + runTiles * KV_TILE, lastPosition + 1u);

  // The first keys and values, loaded while the queries are staged.
  StagedKeys staged;
  loadKeys(kvHead, keyBegin, lastPosition, staged);

  // The queries (scaled), rounded to f16 and staged in the key and value tiles (rows [0, KV_TILE) in the
  // keys', the rest in the values'; Q_TILE <= 2 · KV_TILE), then each subgroup's as A fragments held
  // throughout. Row r is query t0 + r of `head`, or with SHARED_KEYS query t0 + r % 16 of subgroup r / 16's.
  for (uint w = gl_LocalInvocationIndex; w < Q_TILE * HEAD_DIM / 8u; w += WORKGROUP) {
    uint r = w / (HEAD_DIM / 8u), c = w % (HEAD_DIM / 8u);
    uint t = SHARED_KEYS ? t0 + r % FRAG : t0 + r, rowHead = SHARED_KEYS ? kvHead * WARPS + r / FRAG : head;
    vec4 a = vec4(0.0), b = vec4(0.0);
    if (t < step_.tokens) {
      uint at = ((t * HEADS + rowHead) * HEAD_DIM + 8u * c) / 4u;
      a = q_v4[at] * SCALE;
      b = q_v4[at + 1u] * SCALE;
    }
    if (r < KV_TILE) kTile_[r * ROW_WORDS + c] = packHalf8(a, b);
    else vTile_[(r - KV_TILE) * ROW_WORDS + c] = packHalf8(a, b);
  }
  barrier();
  FragA q[D_FRAGS];
  uint qRow = warp * FRAG;  // the subgroup's 16 rows lie in one of the two tiles (16 divides KV_TILE)
  [[unroll]] for (uint dd = 0; dd < D_FRAGS; ++dd) {
    if (qRow < KV_TILE) coopMatLoadNV(q[dd], kTile_, qRow * ROW_WORDS + dd * 2u, ROW_WORDS, false);
    else coopMatLoadNV(q[dd], vTile_, (qRow - KV_TILE) * ROW_WORDS + dd * 2u, ROW_WORDS, false);
  }
  barrier();  // every subgroup holds its queries before the keys overwrite them

  // Two lanes a row: row `row` of the subgroup's 16, columns [half · KV_TILE / 2, (half + 1) · KV_TILE / 2).
  uint row = lane / 2u, half_ = lane % 2u;
  uint position = state_.position + warpT0 + row;
  float rowMax = NO_SCORE, rowSum = 0.0;
  FragC o[D_FRAGS];
  [[unroll]] for (uint dd = 0; dd < D_FRAGS; ++dd) o[dd] = FragC(0.0);

  // Each row's probabilities are exp(score - rowMax) against a maximum that is raised only when a tile's
  // scores pass it by more than RESCALE_SLACK (then the row's output and sum are scaled down, through shared
  // memory), so that they stay below exp(RESCALE_SLACK), well inside f16, and the output rarely makes the
  // round trip (one pass over the keys: two passes, statistics first, took twice as long on the H200, sweep
  // ad). The output is divided by the row's sum at the end.
  storeKeys(staged);
  barrier();
  for (uint k0 = keyBegin; k0 < keyEnd; k0 += KV_TILE) {
    bool more = ATTENTION_DIAG_SAME_KEYS == 0 && k0 + KV_TILE < keyEnd;
    if (more) loadKeys(kvHead, k0 + KV_TILE, lastPosition, staged);
    if (ATTENTION_DIAG_NO_SCORES == 0) scoreTile(warp, q);
    float p[HALF];
    float tileMax = NO_SCORE;
    [[unroll]] for (uint c = 0; c < HALF; ++c) {
      uint key = k0 + half_ * HALF + c;
      p[c] = sees(position, key) ? sTile_[warp][row * S_STRIDE + half_ * HALF + c] : NO_SCORE;
      tileMax = max(tileMax, p[c]);
    }
    tileMax = max(tileMax, subgroupShuffleXor(tileMax, 1u));
    subgroupBarrier();  // every lane has read its scores: the score tile is free for the round trip
#if ATTENTION_DIAG_NO_SOFTMAX
    [[unroll]] for (uint c = 0; c < HALF; ++c) rowSum += p[c];
#else
    float shrink = 1.0;
    bool shrinks = false;  // a row with some output to scale (one that saw no key yet has none)
    if (tileMax > rowMax + RESCALE_SLACK) {
      shrinks = rowMax != NO_SCORE;
      shrink = exp(rowMax - tileMax);
      rowMax = tileMax;
      rowSum *= shrink;
    }
    if (subgroupAny(shrinks)) scaleRows(warp, row, half_, shrink, o);
    [[unroll]] for (uint c = 0; c < HALF; ++c) {
      p[c] = p[c] == NO_SCORE ? 0.0 : exp(p[c] - rowMax);
      rowSum += p[c];
    }
#endif
    if (ATTENTION_DIAG_NO_VALUES == 0) accumulateValues(warp, row, half_, p, o);
    barrier();  // every subgroup is done with the keys and values
    if (more) {
      storeKeys(staged);
      barrier();
    }
  }
  rowSum += subgroupShuffleXor(rowSum, 1u);  // the two lanes of a row summed their own columns
  const float outputScale = rowSum > 0.0 ? 1.0 / rowSum : 0.0;

#if KEY_SPLITS > 1
  if (runs > 1u) {
    combineSplits(o, head, split, runs, warp, row, half_, rowMax, rowSum, t0);
    return;
  }
#endif

  // The output, 16 columns at a time through this subgroup's score tile.
  [[unroll]] for (uint dd = 0; dd < D_FRAGS; ++dd) {
    coopMatStoreNV(o[dd], sTile_[warp], 0u, FRAG, false);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
#if RESULT_HALF
    {  // one 16-byte word of 8 halves a lane: half a row of the fragment
      uint e = 8u * lane, t = warpT0 + e / FRAG;
      if (t < step_.tokens) {
        vec4 a = vec4(sTile_[warp][e], sTile_[warp][e + 1u], sTile_[warp][e + 2u], sTile_[warp][e + 3u]);
        vec4 b = vec4(sTile_[warp][e + 4u], sTile_[warp][e + 5u], sTile_[warp][e + 6u], sTile_[warp][e + 7u]);
        result_v4[((t * HEADS + head) * HEAD_DIM + dd * FRAG + e % FRAG) / 8u] = packHalf8(a * outputScale, b * outputScale);
      }
    }
#else
    [[unroll]] for (uint e = lane; e < FRAG * FRAG; e += SUBGROUP) {
      uint r = e / FRAG, t = warpT0 + r;
      float scale = subgroupShuffle(outputScale, 2u * r);  // row r's lanes are 2r and 2r + 1
      if (t < step_.tokens) store_result((t * HEADS + head) * HEAD_DIM + dd * FRAG + e % FRAG, sTile_[warp][e] * scale);
    }
#endif
    subgroupBarrier();
  }
}
