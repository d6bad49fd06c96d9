// Causal grouped-query attention for prefill on tensor cores (GL_NV_cooperative_matrix, f16 operands, f32
// accumulators). Each workgroup of WARPS subgroups takes Q_TILE = 16 · WARPS queries of one head, each
// subgroup 16 of them; keys and values are staged in shared memory KV_TILE at a time (rounded to f16).
// GL_NV_cooperative_matrix says nothing of which fragment element is which row, so the output cannot be
// rescaled row by row as an online softmax would: the softmax is taken in two passes over the keys instead.
//   pass 1: S = Q·Kᵀ per tile (through shared memory, where the lanes read it by row): each row's max and sum
//           of exponentials, rescaled as the max grows (two lanes a row);
//   pass 2: S again, P = exp(S - max) / sum rounded to f16 in shared memory, and O += P·V on the tensor cores.
// The extra Q·Kᵀ costs half the products again; no T×T matrix is ever stored. The output fragments leave
// through shared memory so that rows past T are not written.
// KEY_SPLITS > 1: the key tiles a query tile sees are cut into up to KEY_SPLITS equal runs, one a workgroup
// (grid z; the workgroups past the runs a tile has return at once), each taking both passes over its run
// only. Each split stores its output, normalised by its own sums, and its rows' maxima and sums to
// `partial`; the last of a tile's splits to count itself in (an atomic counter a tile, which it returns to
// 0) weighs them by sum · exp(max - the rows' max) and writes the result. A tile with one run writes its
// result directly.
// Grid (HEADS, ceil(T / Q_TILE), KEY_SPLITS). HEAD_DIM a multiple of 16.
#ifndef KEY_SPLITS
#define KEY_SPLITS 1
#endif
// RESULT_HALF: the output in f16 (8 dims a 16-byte word where whole fragments leave), for a tensor-core
// matmul that reads its input rows in f16 (its staging would round them anyway). 16-byte words, because
// 4-byte stores of two halves made this kernel 11-15% slower on the H200 (79f28f9); sweep ac timed these
// 0-3% faster than the f32 stores.
#ifndef RESULT_HALF
#define RESULT_HALF 0
#endif

// Outputs at, at + 1 of the result (at even).
void storePair(uint at, vec2 v) {
#if RESULT_HALF
  result_[at / 2u] = packHalf2x16(v);
#else
  store_result(at, v.x);
  store_result(at + 1u, v.y);
#endif
}
const uint FRAG = 16u;
const uint SUBGROUP = 32u;
const uint WARPS = WORKGROUP / SUBGROUP;
const uint Q_TILE = FRAG * WARPS;
const uint D_FRAGS = HEAD_DIM / FRAG;
const uint K_FRAGS = KV_TILE / FRAG;
// Rows of the staged f16 tiles as 16-byte words, padded by one word (bank spread of the fragment loads).
const uint ROW_WORDS = HEAD_DIM / 8u + 1u;
const uint P_WORDS = KV_TILE / 8u + 1u;
const float NO_SCORE = -3.0e38;

#define FragA fcoopmatNV<16, gl_ScopeSubgroup, FRAG, FRAG>
#define FragB fcoopmatNV<16, gl_ScopeSubgroup, FRAG, FRAG>
#define FragC fcoopmatNV<32, gl_ScopeSubgroup, FRAG, FRAG>

shared uvec4 qTile_[Q_TILE * ROW_WORDS];
shared uvec4 kTile_[KV_TILE * ROW_WORDS];
shared uvec4 vTile_[KV_TILE * ROW_WORDS];
shared float sTile_[WARPS][FRAG * KV_TILE];  // one subgroup's scores, row-major
shared uvec4 pTile_[WARPS][FRAG * P_WORDS];   // its probabilities, f16

// Dims 4 · d4.. of a cached key or value.
vec4 loadCache(uint kvHead, uint key, uint d4, bool values) {
  uint at = ((kvHead * SEQ + key) * HEAD_DIM) / 4u + d4;
  return values ? v_cache_v4[at] : k_cache_v4[at];
}

// Keys [key0, key0 + KV_TILE) of kv head `kvHead` (and their values) into the shared tiles; keys past
// `lastKey` are zeros (never unmasked). Every load of the tile is issued before the first store, so that a
// tile costs one memory latency, not one per 16-byte word an invocation stages.
const uint STAGE_WORDS = KV_TILE * HEAD_DIM / 8u;
const uint STAGE_PER_INVOCATION = (STAGE_WORDS + WORKGROUP - 1u) / WORKGROUP;
uvec4 packWord(vec4 a, vec4 b) {
  return uvec4(packHalf2x16(a.xy), packHalf2x16(a.zw), packHalf2x16(b.xy), packHalf2x16(b.zw));
}
void stageKeys(uint kvHead, uint key0, uint lastKey, bool withValues) {
  vec4 k[STAGE_PER_INVOCATION][2], v[STAGE_PER_INVOCATION][2];
  [[unroll]] for (uint i = 0; i < STAGE_PER_INVOCATION; ++i) {
    uint w = gl_LocalInvocationIndex + i * WORKGROUP;
    uint r = w / (HEAD_DIM / 8u), c = w % (HEAD_DIM / 8u), key = key0 + r;
    bool live = w < STAGE_WORDS && key <= lastKey;
    k[i][0] = live ? loadCache(kvHead, key, 2u * c, false) : vec4(0.0);
    k[i][1] = live ? loadCache(kvHead, key, 2u * c + 1u, false) : vec4(0.0);
    if (withValues) {
      v[i][0] = live ? loadCache(kvHead, key, 2u * c, true) : vec4(0.0);
      v[i][1] = live ? loadCache(kvHead, key, 2u * c + 1u, true) : vec4(0.0);
    }
  }
  [[unroll]] for (uint i = 0; i < STAGE_PER_INVOCATION; ++i) {
    uint w = gl_LocalInvocationIndex + i * WORKGROUP;
    if (w >= STAGE_WORDS) break;
    uint r = w / (HEAD_DIM / 8u), c = w % (HEAD_DIM / 8u);
    kTile_[r * ROW_WORDS + c] = packWord(k[i][0], k[i][1]);
    if (withValues) vTile_[r * ROW_WORDS + c] = packWord(v[i][0], v[i][1]);
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
    coopMatStoreNV(s, sTile_[warp], a * FRAG, KV_TILE, false);
  }
  subgroupMemoryBarrierShared();
  subgroupBarrier();
}

#if KEY_SPLITS > 1
// Publishes this split's share (output fragments normalised by its own sums, each row's max and sum) and
// counts it in; the tile's last split adds the shares, each row's weighted by sum · exp(max - the rows'
// max) over the total, in split order (the result does not depend on which finished last).
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
  // Whether this workgroup adds the shares, in the score tiles (free since the last pass ended).
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
    [[unroll]] for (uint s = 0; s < KEY_SPLITS; ++s) total += (sums[s] *= exp(maxima[s] - top));
    [[unroll]] for (uint s = 0; s < KEY_SPLITS; ++s) sTile_[0][r * KEY_SPLITS + s] = total > 0.0 ? sums[s] / total : 0.0;
  }
  barrier();
  for (uint e = gl_LocalInvocationIndex; e < Q_TILE * HEAD_DIM / 4u; e += WORKGROUP) {
    uint r = 4u * e / HEAD_DIM, d = 4u * e % HEAD_DIM, t = t0 + r;
    if (t >= step_.tokens) continue;
    vec4 sum = vec4(0.0);
    for (uint s = 0; s < runs; ++s)
      sum += sTile_[0][r * KEY_SPLITS + s] * partial_v4[((tile * KEY_SPLITS + s) * SPLIT_BLOCK) / 4u + e];
    storePair((t * HEADS + head) * HEAD_DIM + d, sum.xy);
    storePair((t * HEADS + head) * HEAD_DIM + d + 2u, sum.zw);
  }
}
#endif

// Whether query position `position` sees key `key` (causal, and the sliding window).
bool sees(uint position, uint key) {
  return key <= position && (WINDOW == 0u || key + WINDOW > position);
}

void main() {
  uint head = gl_WorkGroupID.x, kvHead = head / (HEADS / KV_HEADS);
  uint warp = gl_LocalInvocationIndex / SUBGROUP, lane = gl_LocalInvocationIndex % SUBGROUP;
  uint t0 = gl_WorkGroupID.y * Q_TILE;
  uint tLast = min(t0 + Q_TILE, step_.tokens) - 1u;
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

  // The queries (scaled), rounded to f16, then each subgroup's as A fragments held through both passes.
  for (uint w = gl_LocalInvocationIndex; w < Q_TILE * HEAD_DIM / 8u; w += WORKGROUP) {
    uint r = w / (HEAD_DIM / 8u), c = w % (HEAD_DIM / 8u), t = t0 + r;
    vec4 a = vec4(0.0), b = vec4(0.0);
    if (t < step_.tokens) {
      uint at = ((t * HEADS + head) * HEAD_DIM + 8u * c) / 4u;
      a = q_v4[at] * SCALE;
      b = q_v4[at + 1u] * SCALE;
    }
    qTile_[r * ROW_WORDS + c] = uvec4(packHalf2x16(a.xy), packHalf2x16(a.zw), packHalf2x16(b.xy), packHalf2x16(b.zw));
  }
  barrier();
  FragA q[D_FRAGS];
  [[unroll]] for (uint dd = 0; dd < D_FRAGS; ++dd)
    coopMatLoadNV(q[dd], qTile_, warp * FRAG * ROW_WORDS + dd * 2u, ROW_WORDS, false);

  // Two lanes a row: row `row` of the subgroup's 16, columns [half · KV_TILE / 2, (half + 1) · KV_TILE / 2).
  const uint HALF = KV_TILE / 2u;
  uint row = lane / 2u, half_ = lane % 2u;
  uint position = state_.position + t0 + warp * FRAG + row;
  float rowMax = NO_SCORE, rowSum = 0.0;

  // Pass 1: the softmax statistics of every row.
  for (uint k0 = keyBegin; k0 < keyEnd; k0 += KV_TILE) {
    stageKeys(kvHead, k0, lastPosition, false);
    barrier();
    scoreTile(warp, q);
    float tileMax = NO_SCORE;
    [[unroll]] for (uint c = 0; c < HALF; ++c) {
      uint key = k0 + half_ * HALF + c;
      if (sees(position, key)) tileMax = max(tileMax, sTile_[warp][row * KV_TILE + half_ * HALF + c]);
    }
    tileMax = max(tileMax, subgroupShuffleXor(tileMax, 1u));
    float newMax = max(rowMax, tileMax), sum = 0.0;
    [[unroll]] for (uint c = 0; c < HALF; ++c) {
      uint key = k0 + half_ * HALF + c;
      if (sees(position, key)) sum += exp(sTile_[warp][row * KV_TILE + half_ * HALF + c] - newMax);
    }
    sum += subgroupShuffleXor(sum, 1u);
    rowSum = rowSum * exp(rowMax - newMax) + sum;
    rowMax = newMax;
    barrier();  // the keys are restaged next
  }
  float inverseSum = rowSum > 0.0 ? 1.0 / rowSum : 0.0;

  // Pass 2: the normalised probabilities times the values.
  FragC o[D_FRAGS];
  [[unroll]] for (uint dd = 0; dd < D_FRAGS; ++dd) o[dd] = FragC(0.0);
  for (uint k0 = keyBegin; k0 < keyEnd; k0 += KV_TILE) {
    stageKeys(kvHead, k0, lastPosition, true);
    barrier();
    scoreTile(warp, q);
    float p[HALF];
    [[unroll]] for (uint c = 0; c < HALF; ++c) {
      uint key = k0 + half_ * HALF + c;
      p[c] = sees(position, key) ? exp(sTile_[warp][row * KV_TILE + half_ * HALF + c] - rowMax) * inverseSum : 0.0;
    }
    [[unroll]] for (uint c = 0; c < HALF; c += 8u)
      pTile_[warp][row * P_WORDS + (half_ * HALF + c) / 8u] =
          uvec4(packHalf2x16(vec2(p[c], p[c + 1u])), packHalf2x16(vec2(p[c + 2u], p[c + 3u])),
                packHalf2x16(vec2(p[c + 4u], p[c + 5u])), packHalf2x16(vec2(p[c + 6u], p[c + 7u])));
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
    barrier();  // the keys and values are restaged next
  }

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
      uint e = 8u * lane, t = t0 + warp * FRAG + e / FRAG;
      if (t < step_.tokens) {
        uvec4 word;
        [[unroll]] for (uint c = 0; c < 4u; ++c)
          word[c] = packHalf2x16(vec2(sTile_[warp][e + 2u * c], sTile_[warp][e + 2u * c + 1u]));
        result_v4[((t * HEADS + head) * HEAD_DIM + dd * FRAG + e % FRAG) / 8u] = word;
      }
    }
#else
    [[unroll]] for (uint e = lane; e < FRAG * FRAG; e += SUBGROUP) {
      uint r = e / FRAG, t = t0 + warp * FRAG + r;
      if (t < step_.tokens) store_result((t * HEADS + head) * HEAD_DIM + dd * FRAG + e % FRAG, sTile_[warp][e]);
    }
#endif
    subgroupBarrier();
  }
}
