// Decode attention: the one query token of a step against the cache, split over the cached positions
// (flash-decoding), built so that a step's attention costs a few memory latencies, not a chain of them.
// Workgroup (x, split) of WARPS warps of 32 invocations: x is kv head x / HEAD_GROUPS and its QUERY_HEADS
// query heads (GQA: the group's keys and values are read once for all of them); the positions [first,
// position] are cut into `activeSplits` chunks of at least MIN_CHUNK (= WARPS · 32; at most SPLITS), one per
// workgroup, whose blocks of 32 keys the warps take in turn (warp w: blocks w, w + WARPS, ...). A warp walks
// its blocks with an online softmax of its own:
//  - scores: with SCORE_LANES = 1, lane j takes key j of the block, its whole row in 16-byte loads issued
//    together, against every query head (the queries broadcast from shared memory); no reduction per key.
//    But then each load instruction touches 32 rows, and the L1 serves it a row at a time: the 8B's block
//    took 4.5 us (sweep az). With SCORE_LANES = G > 1 (subgroups of at least G), G lanes share a key, each
//    reading every G-th vec4 of it, so an instruction reads 32 / G whole pieces of rows; in G passes a lane
//    sums its vec4s of G keys, and a reduce-scatter over the G lanes (subgroupShuffleXor, G - 1 a head)
//    leaves each lane the full score of one key: lane l holds key keySlot(l) = (l % G) · 32 / G + l / G;
//  - one max per head over the block (subgroupMax where subgroups are the warps); the sums of the
//    exponentials stay per lane until the end (the rescaling is the same for all of them);
//  - values: the lanes split as KEY_GROUPS groups of ROW_LANES; lane i of group g adds keys g, g +
//    KEY_GROUPS, ... of the block into dims (vec4s) i, i + ROW_LANES, ... of every head, its loads issued
//    together; the groups are summed once, at the end.
// The warps' results are combined in shared memory. With one active split that is the result (so contexts
// up to MIN_CHUNK positions need nothing from other workgroups: handing partials over through memory and
// combining them took half of the kernel's time on an H200); otherwise each split writes its partial (max,
// sum, unnormalised output) to scratch and the last split to finish (an atomic counter per x, returned to 0
// by that split) combines them. Grid (KV_HEADS * HEAD_GROUPS, SPLITS, 1).
// Loads are issued as early as their addresses are known, not when their values are needed: the first keys
// with the queries, the values with the keys (V_WITH_K), the first partials with the split maxima.
// With PREFETCH_COUNT > 0 (gerbil-prefetch-weights) the grid has rows past SPLITS whose workgroups only load
// weights of the launches after it into the L2 (prefetch.glsl): the attention leaves the memory idle.
#ifndef PREFETCH_COUNT
#define PREFETCH_COUNT 0
#endif
const uint GROUP = HEADS / KV_HEADS;
const uint QH = QUERY_HEADS;
const uint XS = KV_HEADS * HEAD_GROUPS;
const uint LANES = 32u;  // a warp
const uint DIM_VECS = (HEAD_DIM + 3u) / 4u;
// Values: DIM_VECS < 32 that divide 32 leave lanes for more than one key at a time.
const uint KEY_GROUPS = (DIM_VECS < LANES && LANES % DIM_VECS == 0u) ? LANES / DIM_VECS : 1u;
const uint ROW_LANES = LANES / KEY_GROUPS;
const uint VECS_PER_LANE = (DIM_VECS + ROW_LANES - 1u) / ROW_LANES;
const uint KEYS_PER_GROUP = LANES / KEY_GROUPS;
// Key loads in flight per invocation (a whole row up to head_dim 128).
const uint K_BATCH = DIM_VECS < 32u ? DIM_VECS : 32u;
#ifndef SCORE_LANES
#define SCORE_LANES 1
#endif
// Lanes that share a key's scores (codegen: only where K_BATCH == DIM_VECS, a multiple of them), the keys
// of a pass, and each lane's vec4s of a key.
const uint SG = uint(SCORE_LANES);
const uint PASS_KEYS = LANES / SG;
const uint SG_VECS = DIM_VECS / SG;
// A cached vec4 as a lane holds it from its load to its use: 4 packed f16 (uvec2, CACHE_VEC_WORDS 2) with
// an f16 cache, else a vec4 (an f32 cache, or rows of head dims that are no multiple of 4, read a value at
// a time).
#if CACHE_HALF && D_VEC4
#define CacheVec uvec2
const uint CACHE_VEC_WORDS = 2u;
vec4 unpackCache(uvec2 w) { return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }
#else
#define CacheVec vec4
const uint CACHE_VEC_WORDS = 4u;
vec4 unpackCache(vec4 v) { return v; }
#endif
// Where a key batch and a block's values fit in registers together (160 words: head dims up to 64, or 128
// with an f16 cache), the values are loaded with the keys and the next block's keys while this block's
// softmax and values are worked out.
const bool V_WITH_K =
    (K_BATCH + KEYS_PER_GROUP * VECS_PER_LANE) * CACHE_VEC_WORDS <= 160u && K_BATCH == DIM_VECS;
const float NO_SCORE = -3.0e38;
// The output's vec4s per invocation (the workgroup's combine), the global combine's splits per invocation
// and per batch.
const uint OUT_VECS = (QH * DIM_VECS + WORKGROUP - 1u) / WORKGROUP;
const uint SPLITS_PER_LANE = (SPLITS + WORKGROUP - 1u) / WORKGROUP;
const uint COMBINE_BATCH = 4u;
// A warp's staging area: its key groups' accumulators, then its unnormalised output.
const uint KEY_GROUP_VECS = (KEY_GROUPS - 1u) * QH * VECS_PER_LANE * ROW_LANES;
const uint STAGE_VECS = KEY_GROUP_VECS > QH * DIM_VECS ? KEY_GROUP_VECS : QH * DIM_VECS;

// ATTENTION_DIAG_EXIT n (gerbil-kernel-bench only): every workgroup stops at point n (1 before any load,
// 2 after the first block's scores, 3 after the warps' walks, 4 after the split's partial is counted in),
// writing one value that depends on what it loaded: the differences between the points time the phases.
#ifndef ATTENTION_DIAG_EXIT
#define ATTENTION_DIAG_EXIT 0
#endif
// ATTENTION_DIAG_ONE_SPLIT (gerbil-kernel-bench only): the code that hands partials between splits left
// out, as if every context fitted one split (wrong results past MIN_CHUNK positions): to tell what the
// kernel's code size costs at launch from what it runs.
#ifndef ATTENTION_DIAG_ONE_SPLIT
#define ATTENTION_DIAG_ONE_SPLIT 0
#endif
// ATTENTION_EARLY_VALUES (gerbil-kernel-bench --define, gerbilc --kernel-define; on the H200 the 8B's attention
// 8.9 -> 8.5 us alone, decode unchanged in the model, BENCHMARKS.md 2026-12-05):
// with keys and values apart (heads of 128 dims), the values' loads go out as soon as the keys' registers
// are free, so that their trip to memory overlaps the block's softmax and its barrier, instead of after them.
#ifndef ATTENTION_EARLY_VALUES
#define ATTENTION_EARLY_VALUES 0
#endif
// ATTENTION_VALUES_FIRST: where the values are loaded with the keys (V_WITH_K), the first block's go out
// with its keys, before the queries' barrier, instead of after it: their trip to memory then overlaps the
// queries' instead of following it. Sweep cz (H100, f16 cache, position 191): 8.32 -> 8.13 µs on the 8B's
// shape, 6.34 -> 6.11 the 1B's, 5.89 -> 5.76 Qwen2.5-0.5B's; in the models (the cz and da calls) Qwen's
// decode +1.2% and +1.8%, the 1B's +0.3%, the 8B's level with one query head a workgroup. 0: after.
#ifndef ATTENTION_VALUES_FIRST
#define ATTENTION_VALUES_FIRST 1
#endif
#define DIAG_EXIT(n, value)                                                             \
  if (ATTENTION_DIAG_EXIT == n) {                                                       \
    if (gl_LocalInvocationID.x == 0u) store_result(gl_WorkGroupID.x * HEAD_DIM, value); \
    return;                                                                             \
  }

shared vec4 queries_[QH][DIM_VECS];
// Per warp and lane: the block's probabilities, and the warp reductions where subgroups are not the warps.
shared float laneScratch_[WARPS][QH][LANES];
shared vec4 stage_[WARPS][STAGE_VECS];
shared float warpMax_[WARPS][QH];
shared float warpSum_[WARPS][QH];
shared float combineWeight_[SPLITS][QH];
shared float reduced_[QH];
shared bool last_;
#if SUBGROUP_OPS
shared float partials_[QH][WORKGROUP / MIN_SUBGROUP_SIZE];
#else
shared float partials_[WORKGROUP];
#endif

// Dims 4v..4v+3 of a cached key or value row (zeros past HEAD_DIM).
CacheVec cachedVec(uint row, uint v, bool value) {
#if D_VEC4
  return value ? v_cache_v4[row * DIM_VECS + v] : k_cache_v4[row * DIM_VECS + v];
#else
  vec4 r = vec4(0.0);
  [[unroll]] for (uint c = 0; c < 4u; ++c)
    if (4u * v + c < HEAD_DIM)
      r[c] = value ? load_v_cache(row * HEAD_DIM + 4u * v + c) : load_k_cache(row * HEAD_DIM + 4u * v + c);
  return r;
#endif
}

// Dims 4v0.. of key `key` (rows: its kv head's first cache row), K_BATCH vec4s, zeros if not live.
void loadKeys(out CacheVec k[K_BATCH], uint rows, uint key, uint v0, bool live) {
  [[unroll]] for (uint v = 0; v < K_BATCH; ++v)
    k[v] = live && v0 + v < DIM_VECS ? cachedVec(rows + key, v0 + v, false) : CacheVec(0);
}

#if SCORE_LANES > 1
// The lane's key of the block (see the top) and its SG_VECS vec4s of keys block + p · PASS_KEYS + lane / SG
// for each pass p, zeros past `end`: the lanes of a group read SG consecutive vec4s of one row.
uint keySlot(uint lane) { return (lane % SG) * PASS_KEYS + lane / SG; }
void loadKeyParts(out CacheVec k[SG][SG_VECS], uint rows, uint block, uint end, uint lane) {
  [[unroll]] for (uint p = 0; p < SG; ++p) {
    uint key = block + p * PASS_KEYS + lane / SG;
    [[unroll]] for (uint u = 0; u < SG_VECS; ++u)
      k[p][u] = key < end ? cachedVec(rows + key, u * SG + lane % SG, false) : CacheVec(0);
  }
}
// Each head's score of key keySlot(lane): the lane's partial dot products of its SG keys, reduced over its
// group and scattered so that the lane keeps one key's (pass r's sums end in lane r of the group).
void keyScores(out float score[QH], CacheVec k[SG][SG_VECS], uint lane) {
  uint r = lane % SG;
  [[unroll]] for (uint h = 0; h < QH; ++h) {
    float parts[SG];
    [[unroll]] for (uint p = 0; p < SG; ++p) {
      parts[p] = 0.0;
      [[unroll]] for (uint u = 0; u < SG_VECS; ++u) parts[p] += dot(queries_[h][u * SG + r], unpackCache(k[p][u]));
    }
    [[unroll]] for (uint step = SG / 2u; step > 0u; step >>= 1) {
      bool upper = (r & step) != 0u;  // keeps the upper half of the passes left
      [[unroll]] for (uint i = 0; i < step; ++i) {
        float kept = upper ? parts[i + step] : parts[i], sent = upper ? parts[i] : parts[i + step];
        parts[i] = kept + subgroupShuffleXor(sent, step);
      }
    }
    score[h] = parts[0];
  }
}
#endif

// The keys of the block from `block` that lie before `end`.
uint blockKeys(uint block, uint end) { return block < end ? min(LANES, end - block) : 0u; }

// This lane's vec4s of the values of the block's first `count` keys from `block`.
void loadValues(out CacheVec values[VECS_PER_LANE][KEYS_PER_GROUP], uint rows, uint block, uint count,
                uint lane) {
  uint keyGroup = lane / ROW_LANES, rowLane = lane % ROW_LANES;
  [[unroll]] for (uint i = 0; i < VECS_PER_LANE; ++i) {
    uint v = min(rowLane + i * ROW_LANES, DIM_VECS - 1u);
    [[unroll]] for (uint j = 0; j < KEYS_PER_GROUP; ++j) {
      uint at = keyGroup + j * KEY_GROUPS;
      values[i][j] = at < count ? cachedVec(rows + block + at, v, true) : CacheVec(0);
    }
  }
}

// The max (or sum) of each head's value over the 32 lanes of a warp, in every lane of it. Every invocation
// of the workgroup calls it (the path without subgroups of 32 has barriers).
void reduceWarp(inout float values[QH], bool isMax, uint warp, uint lane) {
#if SUBGROUP_OPS
  if (gl_SubgroupSize == LANES) {  // the same for every invocation
    [[unroll]] for (uint h = 0; h < QH; ++h) values[h] = isMax ? subgroupMax(values[h]) : subgroupAdd(values[h]);
    return;
  }
#endif
  [[unroll]] for (uint h = 0; h < QH; ++h) laneScratch_[warp][h][lane] = values[h];
  barrier();
  for (uint s = LANES / 2u; s > 0u; s >>= 1) {
    if (lane < s)
      [[unroll]] for (uint h = 0; h < QH; ++h) {
        float a = laneScratch_[warp][h][lane], b = laneScratch_[warp][h][lane + s];
        laneScratch_[warp][h][lane] = isMax ? max(a, b) : a + b;
      }
    barrier();
  }
  [[unroll]] for (uint h = 0; h < QH; ++h) values[h] = laneScratch_[warp][h][0];
  barrier();
}

// The max (or sum) over the workgroup of each head's value, into reduced_ (all invocations must call it).
void reduceHeads(float values[QH], bool isMax) {
  uint tid = gl_LocalInvocationID.x;
#if SUBGROUP_OPS
  [[unroll]] for (uint h = 0; h < QH; ++h) values[h] = isMax ? subgroupMax(values[h]) : subgroupAdd(values[h]);
  if (subgroupElect())
    [[unroll]] for (uint h = 0; h < QH; ++h) partials_[h][gl_SubgroupID] = values[h];
  barrier();
  if (tid < QH) {
    float r = partials_[tid][0];
    for (uint i = 1; i < gl_NumSubgroups; ++i) r = isMax ? max(r, partials_[tid][i]) : r + partials_[tid][i];
    reduced_[tid] = r;
  }
  barrier();
#else
  for (uint h = 0; h < QH; ++h) {
    partials_[tid] = values[h];
    barrier();
    for (uint s = WORKGROUP / 2u; s > 0u; s >>= 1) {
      if (tid < s) partials_[tid] = isMax ? max(partials_[tid], partials_[tid + s]) : partials_[tid] + partials_[tid + s];
      barrier();
    }
    if (tid == 0u) reduced_[h] = partials_[0];
    barrier();
  }
#endif
}

// Scratch layout: [x][split][head][dim] unnormalised outputs, then [x][split][head] maxima, then sums.
uint accIndex(uint x, uint split, uint h, uint d) { return ((x * SPLITS + split) * QH + h) * HEAD_DIM + d; }
uint maxIndex(uint x, uint split, uint h) { return XS * SPLITS * QH * HEAD_DIM + (x * SPLITS + split) * QH + h; }
uint sumIndex(uint x, uint split, uint h) { return maxIndex(x, split, h) + XS * SPLITS * QH; }

// Dims 4v..4v+3 of a split's partial output (zeros past HEAD_DIM).
vec4 partialVec(uint x, uint split, uint h, uint v) {
#if D_VEC4
  return partial_v4[accIndex(x, split, h, 0u) / 4u + v];
#else
  vec4 r = vec4(0.0);
  [[unroll]] for (uint c = 0; c < 4u; ++c)
    if (4u * v + c < HEAD_DIM) r[c] = partial_[accIndex(x, split, h, 4u * v + c)];
  return r;
#endif
}

// This invocation's OUT_VECS vec4s of the partial outputs of splits s0 .. s0 + COMBINE_BATCH - 1.
void loadPartials(out vec4 values[COMBINE_BATCH][OUT_VECS], uint x, uint s0, uint activeSplits) {
  [[unroll]] for (uint u = 0; u < COMBINE_BATCH; ++u)
    [[unroll]] for (uint j = 0; j < OUT_VECS; ++j) {
      uint i = min(gl_LocalInvocationID.x + j * WORKGROUP, QH * DIM_VECS - 1u);
      values[u][j] = partialVec(x, min(s0 + u, activeSplits - 1u), i / DIM_VECS, i % DIM_VECS);
    }
}

// Writes vec4 `i` of the QH × DIM_VECS output (head i / DIM_VECS).
void storeOutput(uint head0, uint i, vec4 value) {
  uint h = i / DIM_VECS, v = i % DIM_VECS;
  [[unroll]] for (uint c = 0; c < 4u; ++c)
    if (4u * v + c < HEAD_DIM) store_result((head0 + h) * HEAD_DIM + 4u * v + c, value[c]);
}

void main() {
#if PREFETCH_COUNT > 0
  if (gl_WorkGroupID.y >= SPLITS) {
    prefetchWeights((gl_WorkGroupID.y - SPLITS) * XS + gl_WorkGroupID.x);
    return;
  }
#endif
  DIAG_EXIT(1, 0.0)
  uint tid = gl_LocalInvocationID.x, x = gl_WorkGroupID.x, split = gl_WorkGroupID.y;
  // Warps follow the subgroups where there are subgroup operations, so that a subgroup of 32 is a warp.
#if SUBGROUP_OPS
  uint place = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
#else
  uint place = tid;
#endif
  uint warp = place / LANES, lane = place % LANES;
  uint kvHead = x / HEAD_GROUPS, head0 = kvHead * GROUP + (x % HEAD_GROUPS) * QH;
  uint position = state_.position;
  uint first = (WINDOW > 0u && position + 1u > WINDOW) ? position + 1u - WINDOW : 0u;
  uint len = position + 1u - first;
  uint activeSplits = min(SPLITS, (len + MIN_CHUNK - 1u) / MIN_CHUNK);
  if (split >= activeSplits) return;
  uint chunk = (len + activeSplits - 1u) / activeSplits;
  uint begin = min(first + split * chunk, position + 1u), end = min(begin + chunk, position + 1u);
  uint rounds = (end - begin + WARPS * LANES - 1u) / (WARPS * LANES);
  uint keyGroup = lane / ROW_LANES, rowLane = lane % ROW_LANES;
  uint rows = kvHead * SEQ;
  uint block = begin + warp * LANES;  // this warp's block in the current round
#if SCORE_LANES > 1
  const uint slot = keySlot(lane);
  CacheVec k[SG][SG_VECS];
  loadKeyParts(k, rows, block, end, lane);  // in flight with the queries' loads
#else
  const uint slot = lane;
  CacheVec k[K_BATCH];
  loadKeys(k, rows, block + lane, 0u, block + lane < end);  // in flight with the queries' loads
#endif
  CacheVec blockValues[VECS_PER_LANE][KEYS_PER_GROUP];
  if (V_WITH_K && ATTENTION_VALUES_FIRST != 0)
    loadValues(blockValues, rows, block, blockKeys(block, end), lane);

  [[unroll]] for (uint j = 0; j < (QH * DIM_VECS + WORKGROUP - 1u) / WORKGROUP; ++j) {
    uint i = tid + j * WORKGROUP;
    if (i < QH * DIM_VECS) {
      uint h = i / DIM_VECS, v = i % DIM_VECS;
      vec4 q = vec4(0.0);
      [[unroll]] for (uint c = 0; c < 4u; ++c)
        if (4u * v + c < HEAD_DIM) q[c] = load_q((head0 + h) * HEAD_DIM + 4u * v + c) * SCALE;
      queries_[h][v] = q;
    }
  }
  barrier();

  float runningMax[QH], laneSum[QH];
  vec4 acc[QH][VECS_PER_LANE];
  [[unroll]] for (uint h = 0; h < QH; ++h) {
    runningMax[h] = NO_SCORE, laneSum[h] = 0.0;
    [[unroll]] for (uint i = 0; i < VECS_PER_LANE; ++i) acc[h][i] = vec4(0.0);
  }

  // Every warp runs every round (the barriers are the workgroup's); blocks past the end have no live key.
  for (uint round = 0; round < rounds; ++round, block += WARPS * LANES) {
    uint key = block + slot;
    bool live = key < end;
    uint count = blockKeys(block, end);
    if (V_WITH_K && (ATTENTION_VALUES_FIRST == 0 || round > 0u)) loadValues(blockValues, rows, block, count, lane);
    float score[QH];
#if SCORE_LANES > 1
    if (round > 0u && !V_WITH_K) loadKeyParts(k, rows, block, end, lane);
    keyScores(score, k, lane);
    if (V_WITH_K) loadKeyParts(k, rows, block + WARPS * LANES, end, lane);
#else
    [[unroll]] for (uint h = 0; h < QH; ++h) score[h] = 0.0;
    for (uint v0 = 0; v0 < DIM_VECS; v0 += K_BATCH) {
      if (v0 > 0u || round > 0u && !V_WITH_K) loadKeys(k, rows, key, v0, live);
      [[unroll]] for (uint v = 0; v < K_BATCH; ++v)
        if (v0 + v < DIM_VECS)
          [[unroll]] for (uint h = 0; h < QH; ++h) score[h] += dot(queries_[h][v0 + v], unpackCache(k[v]));
    }
    if (V_WITH_K) loadKeys(k, rows, key + WARPS * LANES, 0u, key + WARPS * LANES < end);
#endif
    [[unroll]] for (uint h = 0; h < QH; ++h) score[h] = live ? score[h] : NO_SCORE;
    DIAG_EXIT(2, score[0])
    if (!V_WITH_K && ATTENTION_EARLY_VALUES != 0) loadValues(blockValues, rows, block, count, lane);

    float blockMax[QH] = score;
    reduceWarp(blockMax, true, warp, lane);
    float correction[QH];
    [[unroll]] for (uint h = 0; h < QH; ++h) {
      float newMax = max(runningMax[h], blockMax[h]);
      correction[h] = exp(runningMax[h] - newMax);
      float p = live ? exp(score[h] - newMax) : 0.0;
      laneScratch_[warp][h][slot] = p;
      laneSum[h] = laneSum[h] * correction[h] + p;
      runningMax[h] = newMax;
    }
    barrier();  // the probabilities published

    [[unroll]] for (uint h = 0; h < QH; ++h)
      [[unroll]] for (uint i = 0; i < VECS_PER_LANE; ++i) acc[h][i] *= correction[h];
    if (!V_WITH_K && ATTENTION_EARLY_VALUES == 0) loadValues(blockValues, rows, block, count, lane);
    [[unroll]] for (uint i = 0; i < VECS_PER_LANE; ++i)
      if (rowLane + i * ROW_LANES < DIM_VECS)
        [[unroll]] for (uint j = 0; j < KEYS_PER_GROUP; ++j)
          [[unroll]] for (uint h = 0; h < QH; ++h)
            acc[h][i] += laneScratch_[warp][h][keyGroup + j * KEY_GROUPS] * unpackCache(blockValues[i][j]);
    barrier();  // the probabilities are rewritten by the next round
  }
  DIAG_EXIT(3, acc[0][0].x)

  // Each warp's sum, and its key groups' accumulators into group 0's; then its output into its stage.
  reduceWarp(laneSum, false, warp, lane);
  if (KEY_GROUPS > 1u) {
    if (keyGroup > 0u)
      [[unroll]] for (uint h = 0; h < QH; ++h)
        [[unroll]] for (uint i = 0; i < VECS_PER_LANE; ++i)
          stage_[warp][((keyGroup - 1u) * QH + h) * VECS_PER_LANE * ROW_LANES + i * ROW_LANES + rowLane] = acc[h][i];
    barrier();
    if (keyGroup == 0u)
      for (uint g = 1u; g < KEY_GROUPS; ++g)
        [[unroll]] for (uint h = 0; h < QH; ++h)
          [[unroll]] for (uint i = 0; i < VECS_PER_LANE; ++i)
            acc[h][i] += stage_[warp][((g - 1u) * QH + h) * VECS_PER_LANE * ROW_LANES + i * ROW_LANES + rowLane];
    barrier();  // the stage is rewritten below
  }
  if (keyGroup == 0u)
    [[unroll]] for (uint i = 0; i < VECS_PER_LANE; ++i) {
      uint v = rowLane + i * ROW_LANES;
      if (v < DIM_VECS) [[unroll]] for (uint h = 0; h < QH; ++h) stage_[warp][h * DIM_VECS + v] = acc[h][i];
    }
  if (lane == 0u)
    [[unroll]] for (uint h = 0; h < QH; ++h) warpMax_[warp][h] = runningMax[h], warpSum_[warp][h] = laneSum[h];
  barrier();

  // The workgroup's max, sum and unnormalised output: each warp weighted by exp(its max - the max).
  float splitMax[QH], splitSum[QH];
  [[unroll]] for (uint h = 0; h < QH; ++h) {
    splitMax[h] = warpMax_[0][h];
    for (uint w = 1u; w < WARPS; ++w) splitMax[h] = max(splitMax[h], warpMax_[w][h]);
    splitSum[h] = 0.0;
    for (uint w = 0u; w < WARPS; ++w) splitSum[h] += exp(warpMax_[w][h] - splitMax[h]) * warpSum_[w][h];
  }
  vec4 out_[OUT_VECS];
  [[unroll]] for (uint j = 0; j < OUT_VECS; ++j) {
    uint i = min(tid + j * WORKGROUP, QH * DIM_VECS - 1u), h = i / DIM_VECS;
    out_[j] = vec4(0.0);
    for (uint w = 0u; w < WARPS; ++w) out_[j] += exp(warpMax_[w][h] - splitMax[h]) * stage_[w][i];
  }

  if (activeSplits == 1u || ATTENTION_DIAG_ONE_SPLIT != 0) {
    [[unroll]] for (uint j = 0; j < OUT_VECS; ++j) {
      uint i = tid + j * WORKGROUP;
      if (i < QH * DIM_VECS) storeOutput(head0, i, out_[j] / splitSum[i / DIM_VECS]);
    }
    return;
  }
#if !ATTENTION_DIAG_ONE_SPLIT

  // Publish this split's partial, then count it in; the last split of x combines.
  [[unroll]] for (uint j = 0; j < OUT_VECS; ++j) {
    uint i = tid + j * WORKGROUP;
    if (i < QH * DIM_VECS) {
      uint h = i / DIM_VECS, v = i % DIM_VECS;
      [[unroll]] for (uint c = 0; c < 4u; ++c)
        if (4u * v + c < HEAD_DIM) partial_[accIndex(x, split, h, 4u * v + c)] = out_[j][c];
    }
  }
  if (tid == 0u)
    [[unroll]] for (uint h = 0; h < QH; ++h) {
      partial_[maxIndex(x, split, h)] = splitMax[h];
      partial_[sumIndex(x, split, h)] = splitSum[h];
    }
  memoryBarrierBuffer();
  barrier();
  if (tid == 0u) last_ = atomicAdd(counters[x], 1) == int(activeSplits) - 1;
  barrier();
  DIAG_EXIT(4, 1.0)
  if (!last_) return;
  memoryBarrierBuffer();
  if (tid == 0u) atomicExchange(counters[x], 0);  // ready for the next layer and step
  // Each split's weight per head, exp(max_s - max) / sum over splits of exp(max_s - max) · sum_s: the
  // invocations take the splits (tid, tid + WORKGROUP, ...) with all of their loads issued at once, and the
  // first COMBINE_BATCH splits' partial outputs are loaded with them.
  vec4 values[COMBINE_BATCH][OUT_VECS];
  loadPartials(values, x, 0u, activeSplits);
  float maxima[SPLITS_PER_LANE][QH], sums[SPLITS_PER_LANE][QH], m[QH], total[QH];
  [[unroll]] for (uint i = 0; i < SPLITS_PER_LANE; ++i) {
    uint s = min(tid + i * WORKGROUP, activeSplits - 1u);
    [[unroll]] for (uint h = 0; h < QH; ++h) {
      maxima[i][h] = partial_[maxIndex(x, s, h)];
      sums[i][h] = partial_[sumIndex(x, s, h)];
    }
  }
  [[unroll]] for (uint h = 0; h < QH; ++h) {
    m[h] = NO_SCORE;
    [[unroll]] for (uint i = 0; i < SPLITS_PER_LANE; ++i)
      if (tid + i * WORKGROUP < activeSplits) m[h] = max(m[h], maxima[i][h]);
  }
  reduceHeads(m, true);
  [[unroll]] for (uint h = 0; h < QH; ++h) {
    m[h] = reduced_[h], total[h] = 0.0;
    [[unroll]] for (uint i = 0; i < SPLITS_PER_LANE; ++i)
      if (tid + i * WORKGROUP < activeSplits) total[h] += exp(maxima[i][h] - m[h]) * sums[i][h];
  }
  reduceHeads(total, false);
  [[unroll]] for (uint i = 0; i < SPLITS_PER_LANE; ++i)
    if (tid + i * WORKGROUP < activeSplits)
      [[unroll]] for (uint h = 0; h < QH; ++h)
        combineWeight_[tid + i * WORKGROUP][h] = exp(maxima[i][h] - m[h]) / reduced_[h];
  barrier();
  // The output: each invocation OUT_VECS vec4s of the heads' dims, the splits taken COMBINE_BATCH at a time
  // with all of their loads in flight.
  [[unroll]] for (uint j = 0; j < OUT_VECS; ++j) out_[j] = vec4(0.0);
  for (uint s0 = 0; s0 < activeSplits; s0 += COMBINE_BATCH) {
    if (s0 > 0u) loadPartials(values, x, s0, activeSplits);
    [[unroll]] for (uint u = 0; u < COMBINE_BATCH; ++u)
      if (s0 + u < activeSplits)
        [[unroll]] for (uint j = 0; j < OUT_VECS; ++j)
          out_[j] += combineWeight_[s0 + u][min(tid + j * WORKGROUP, QH * DIM_VECS - 1u) / DIM_VECS] * values[u][j];
  }
  [[unroll]] for (uint j = 0; j < OUT_VECS; ++j) {
    uint i = tid + j * WORKGROUP;
    if (i < QH * DIM_VECS) storeOutput(head0, i, out_[j]);
  }
#endif
}
