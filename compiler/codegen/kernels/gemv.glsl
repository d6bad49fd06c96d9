// The one-token matmul that decode steps run: gerbil.linear, and the grouped projections (q/k/v, gate/up)
// with their epilogues. Reading the weights is the whole cost, and a decode step is a chain of such launches,
// so each launch must have all of its weight bytes in flight almost at once:
//  - a pair of rows is summed by SPLIT teams of 32 invocations (INV in all), which stride over K together
//    with 16-byte loads (8 f16/bf16 or 4 f32 weights; VEC_LOADS); the catalog picks SPLIT so that narrow
//    projections with long rows still spread over thousands of subgroups;
//  - each invocation issues UNROLL steps of loads (both rows, and the input) before it uses any of them; the
//    steps past the end of the row load a valid address and are not used, so no branch holds the loads back;
//  - the input row is read from global memory by every team (it stays in L1/L2); an RMSNorm prologue
//    multiplies it by the norm weight as it goes and sums its squares in the same loop (1/rms multiplies
//    the dot products at the end);
//  - the pair's invocations reduce with subgroupAdd, and through shared memory across subgroups (when
//    SPLIT > 1, or on devices with subgroups under 32), or through shared memory alone.
// Modes, by what the two rows of a pair are and where their sums go (grid (WORKGROUPS, 1, 1)):
//   MODE_SINGLE   rows 2p, 2p + 1 of w; result[row] (+ residual[row] with RESIDUAL). The input, result and
//                 residual are row step_.firstRow of theirs with ROW_FROM_PUSH (the logits projection,
//                 which runs on the last row of a prefill step), else row 0.
//   MODE_GATE_UP  row p of w_gate and of w_up; result[p] = act(gate + bias_gate) * (up + bias_up).
//   MODE_QKV      workgroups [0, GROUPS_Q) take rows of w_q, the next GROUPS_K of w_k, the last GROUPS_V of
//                 w_v; sums (+ bias) go to result_q, result_k, result_v, or with ROPE rotated (q, k) and with
//                 KV_WRITE into the KV cache (k, v) at the step's position. In rotated parts a pair is two
//                 rows that rotate together (d, d + ROTARY_DIM / 2), so the rotation needs nothing else.
// With PREFETCH_COUNT > 0 (gerbil-prefetch-weights' spread-pages) PREFETCH_WORKERS workgroups before the
// kernel's own only read words of the next launch's weights (prefetch.glsl).
// EMBED_INPUT (gerbil-fuse-embedding, MODE_QKV): x is the embedding table and the input row is the token's,
// ids[0]; workgroup 0 also writes that row to `embedding` for the launches after (the residual). A table of
// halves (beside packed weights) is read 8 halves a 16-byte load (X_HALF8).
#ifndef PREFETCH_COUNT
#define PREFETCH_COUNT 0
#endif
const uint PAIRS = ROWS / 2u;   // per workgroup
const uint INV = 32u * SPLIT;   // invocations per pair
#ifndef GEMV_UNROLL
#define GEMV_UNROLL 4u
#endif
const uint UNROLL = GEMV_UNROLL;  // 16-byte steps per row in flight per invocation

shared vec3 pairPartials_[WORKGROUP];
#ifndef ROW_FROM_PUSH
#define ROW_FROM_PUSH 0
#endif
#ifndef EMBED_INPUT
#define EMBED_INPUT 0
#endif
#ifndef X_HALF8
#define X_HALF8 0
#endif

// Where the input row starts, in elements (ROW_FROM_PUSH: firstRow's; else 0).
uint xRow_ = 0u;

// The invocation's place: pairs take INV consecutive places. With subgroup operations, places follow the
// subgroups, so that a subgroup of at most INV invocations lies within one pair.
uint place() {
#if SUBGROUP_OPS
  return gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
#else
  return gl_LocalInvocationIndex;
#endif
}

// The sum over the pair's invocations, valid in its first (every invocation of the workgroup calls it).
vec3 pairSum(vec3 v, uint at) {
  uint lane = at % INV;
#if SUBGROUP_OPS
  if (gl_SubgroupSize <= INV) {  // uniform: the same for every invocation
    v = subgroupAdd(v);
    if (gl_SubgroupSize == INV) return v;
    if (subgroupElect()) pairPartials_[gl_SubgroupID] = v;
    barrier();
    if (lane == 0u) {
      uint first = at / gl_SubgroupSize, count = INV / gl_SubgroupSize;
      for (uint i = 1u; i < count; ++i) v += pairPartials_[first + i];
    }
    return v;
  }
#endif
  pairPartials_[at] = v;
  barrier();
  for (uint s = INV / 2u; s > 0u; s >>= 1) {
    if (lane < s) pairPartials_[at] += pairPartials_[at + s];
    barrier();
  }
  return pairPartials_[at];
}

#if W_PACKED16
const uint PER_LOAD = 8u;
#define WVEC uvec4
float dot8(uvec4 w, vec4 xa, vec4 xb) {
#if W_BF16
  vec4 lo = vec4(uintBitsToFloat(w.x << 16), uintBitsToFloat(w.y << 16), uintBitsToFloat(w.z << 16), uintBitsToFloat(w.w << 16));
  vec4 hi = vec4(uintBitsToFloat(w.x & 0xffff0000u), uintBitsToFloat(w.y & 0xffff0000u),
                 uintBitsToFloat(w.z & 0xffff0000u), uintBitsToFloat(w.w & 0xffff0000u));
  // lo holds elements 0, 2, 4, 6 and hi 1, 3, 5, 7.
  return dot(lo, vec4(xa.x, xa.z, xb.x, xb.z)) + dot(hi, vec4(xa.y, xa.w, xb.y, xb.w));
#else
  vec2 a = unpackHalf2x16(w.x), b = unpackHalf2x16(w.y), c = unpackHalf2x16(w.z), d = unpackHalf2x16(w.w);
  return dot(vec4(a, b), xa) + dot(vec4(c, d), xb);
#endif
}
// Step u: the 16-byte load k of both rows, the input (and norm weight) under it.
#if X_HALF8
#define LOAD_INPUT(u, k)                                                 \
  {                                                                      \
    uvec4 h = x_v4[xRow_ / 8u + (k)];                                    \
    xa[u] = vec4(unpackHalf2x16(h.x), unpackHalf2x16(h.y));              \
    xb[u] = vec4(unpackHalf2x16(h.z), unpackHalf2x16(h.w));              \
  }
#else
#define LOAD_INPUT(u, k) xa[u] = x_v4[xRow_ / 4u + 2u * (k)], xb[u] = x_v4[xRow_ / 4u + 2u * (k) + 1u];
#endif
#define LOAD_NORM(u, k) ga[u] = g_v4[2u * (k)], gb[u] = g_v4[2u * (k) + 1u];
#define NORM_SQUARES(u) sums.z += dot(xa[u], xa[u]) + dot(xb[u], xb[u]);
#define USE_NORM(u) NORM_SQUARES(u) xa[u] *= ga[u], xb[u] *= gb[u];
#define DOTS(u) sums.x += dot8(wa[u], xa[u], xb[u]), sums.y += dot8(wb[u], xa[u], xb[u]);
#else
const uint PER_LOAD = 4u;
#define WVEC vec4
#define LOAD_INPUT(u, k) xa[u] = x_v4[xRow_ / 4u + (k)];
#define LOAD_NORM(u, k) ga[u] = g_v4[k];
#define NORM_SQUARES(u) sums.z += dot(xa[u], xa[u]);
#define USE_NORM(u) NORM_SQUARES(u) xa[u] *= ga[u];
#define DOTS(u) sums.x += dot(wa[u], xa[u]), sums.y += dot(wb[u], xa[u]);
#endif
const uint ROW_LOADS = K / PER_LOAD;

// NORM_WEIGHTED 0: the norm weight was folded into the matrix's columns as it was loaded (plan weight
// scaleColumnsBy), so the prologue only normalises: its loads and products cost the 8B's gate/up gemv 5 µs
// of 63 on the H200 (sweep ao).
#ifndef NORM_WEIGHTED
#define NORM_WEIGHTED 1
#endif
#if NORM_PROLOGUE && !NORM_WEIGHTED
#define LOAD_STEP_NORM(u, k)
#define USE_STEP_NORM(u) NORM_SQUARES(u)
#elif NORM_PROLOGUE
#define LOAD_STEP_NORM(u, k) LOAD_NORM(u, k)
#define USE_STEP_NORM(u) USE_NORM(u)
#else
#define LOAD_STEP_NORM(u, k)
#define USE_STEP_NORM(u)
#endif

#if VEC_LOADS
#define ACCUMULATE(WA, WB)                                                       \
  for (uint k0 = lane; k0 < ROW_LOADS; k0 += UNROLL * INV) {                     \
    WVEC wa[UNROLL], wb[UNROLL];                                                 \
    vec4 xa[UNROLL], xb[UNROLL], ga[UNROLL], gb[UNROLL];                         \
    [[unroll]] for (uint u = 0; u < UNROLL; ++u) {                               \
      uint k = min(k0 + u * INV, ROW_LOADS - 1u);                                \
      wa[u] = WA[rowA * ROW_LOADS + k], wb[u] = WB[rowB * ROW_LOADS + k];        \
      LOAD_INPUT(u, k)                                                           \
      LOAD_STEP_NORM(u, k)                                                       \
    }                                                                            \
    [[unroll]] for (uint u = 0; u < UNROLL; ++u)                                 \
      if (k0 + u * INV < ROW_LOADS) {                                            \
        USE_STEP_NORM(u)                                                         \
        DOTS(u)                                                                  \
      }                                                                          \
  }
#else
// Rows that are not 16-byte aligned: one weight at a time.
#if NORM_PROLOGUE && !NORM_WEIGHTED
#define NORM_SCALAR(x, k) sums.z += x * x;
#elif NORM_PROLOGUE
#define NORM_SCALAR(x, k) sums.z += x * x; x *= load_g(k);
#else
#define NORM_SCALAR(x, k)
#endif
#define ACCUMULATE(WA, WB)                                                \
  for (uint k = lane; k < K; k += INV) {                                  \
    float x = load_x(xRow_ + k);                                          \
    NORM_SCALAR(x, k)                                                     \
    sums.x += WA(rowA * K + k) * x;                                       \
    sums.y += WB(rowB * K + k) * x;                                       \
  }
#endif


// GEMV_POSITION_EARLY (MODE_QKV; a variant to time, gerbilc --kernel-define gemv:GEMV_POSITION_EARLY=1): the
// step's position, which RoPE and the cache write need after the reduction, is read before the weights, as
// GEMV_ADDEND_EARLY reads the bias, instead of where it is used.
#ifndef GEMV_POSITION_EARLY
#define GEMV_POSITION_EARLY 0
#endif
#if GEMV_POSITION_EARLY
uint stepPosition_ = 0u;
#define STEP_POSITION stepPosition_
#else
#define STEP_POSITION state_.position
#endif

#if MODE_QKV && ROPE
const uint PAIRS_PER_HEAD = HEAD_DIM / 2u;

// Rows (first, second) of rotary pair p of a rotated part: the pairs (i, i + ROTARY_DIM / 2) of each head,
// then its unrotated dims two by two.
uvec2 pairRows(uint p) {
  uint head = p / PAIRS_PER_HEAD, i = p % PAIRS_PER_HEAD;
  uint a = i < ROTARY_DIM / 2u ? i : ROTARY_DIM + 2u * (i - ROTARY_DIM / 2u);
  uint b = i < ROTARY_DIM / 2u ? i + ROTARY_DIM / 2u : a + 1u;
  return uvec2(head * HEAD_DIM + a, head * HEAD_DIM + b);
}

vec2 rotation(uint i) {
  return rotaryCosSin(float(STEP_POSITION), invFreqAt(i)) * ATTENTION_SCALING;
}
#endif

#if MODE_QKV
// Where row `row` of part `part` (0 q, 1 k, 2 v) goes.
void storeRow(uint part, uint row, float v) {
  if (part == 0u) store_result_q(row, v);
#if KV_WRITE
  else if (part == 1u) store_k_cache(((row / HEAD_DIM) * SEQ + STEP_POSITION) * HEAD_DIM + row % HEAD_DIM, v);
  else store_v_cache(((row / HEAD_DIM) * SEQ + STEP_POSITION) * HEAD_DIM + row % HEAD_DIM, v);
#else
  else if (part == 1u) store_result_k(row, v);
  else store_result_v(row, v);
#endif
}

float biasOf(uint part, uint row) {
  return part == 0u ? load_bias_q(row) : part == 1u ? load_bias_k(row) : load_bias_v(row);
}
#endif

#ifndef ARGMAX
#define ARGMAX 0
#endif
#ifndef GEMV_ADDEND_EARLY
#define GEMV_ADDEND_EARLY 1
#endif
// Adds the pair's addend (main's PAIR_ADDEND: loaded early into `addend`, or here) to its sums a and b.
#if GEMV_ADDEND_EARLY
#define ADD_PAIR_ADDEND a += addend.x, b += addend.y;
#else
#define ADD_PAIR_ADDEND addend = PAIR_ADDEND; a += addend.x, b += addend.y;
#endif
#if ARGMAX
// MODE_SINGLE of the logits projection with the greedy token chosen as its logits are written
// (argmax_combine.glsl, included before this file); the candidates are the first invocations' of each pair.
float candidate_ = NO_VALUE;
uint candidateIndex_ = NO_INDEX;
#endif

// The rows of workgroup `group`.
void rowBlock(uint group) {
#if MODE_SINGLE && ROW_FROM_PUSH
  xRow_ = step_.firstRow * K;
  const uint outRow = step_.firstRow * N;
#else
  const uint outRow = 0u;
#endif
#if EMBED_INPUT
  xRow_ = min(uint(ids[0]), VOCAB - 1u) * K;
  if (group == 0u)
    for (uint i = gl_LocalInvocationIndex; i < K; i += WORKGROUP) store_embedding(i, load_x(xRow_ + i));
#endif
#if MODE_QKV
  uint part = group < GROUPS_Q ? 0u : group < GROUPS_Q + GROUPS_K ? 1u : 2u;
  uint local = group - (part == 0u ? 0u : part == 1u ? GROUPS_Q : GROUPS_Q + GROUPS_K);
  uint partRows = part == 0u ? N_Q : part == 1u ? N_K : N_V;
  bool rotated = ROPE != 0 && part < 2u;
#endif

  uint at = place(), pair = at / INV, lane = at % INV;
  // The two rows of the pair; a row past the end is read as the last one and not stored.
  uint rowA, rowB;
  bool liveA, liveB;
#if MODE_SINGLE
  rowA = (group * PAIRS + pair) * 2u, rowB = rowA + 1u;
  liveA = rowA < N, liveB = rowB < N;
  rowA = min(rowA, N - 1u), rowB = min(rowB, N - 1u);
#elif MODE_GATE_UP
  rowA = group * PAIRS + pair;
  liveA = rowA < N, liveB = liveA;
  rowA = min(rowA, N - 1u), rowB = rowA;
#else
  uint p = local * PAIRS + pair;
  uvec2 rows = uvec2(2u * p, 2u * p + 1u);
#if ROPE
  if (rotated) rows = pairRows(min(p, partRows / 2u - 1u));
#endif
  liveA = 2u * p < partRows, liveB = 2u * p + 1u < partRows;
  rowA = min(rows.x, partRows - 1u), rowB = min(rows.y, partRows - 1u);
#endif

  // What the pair's sums get added at the end: the residual, or the q/k/v bias. GEMV_ADDEND_EARLY loads it
  // before the weights, so that its trip to memory overlaps theirs instead of following the reduction (a
  // launch's last pairs wait on it); 0: where it is added.
#if MODE_SINGLE && RESIDUAL
#define PAIR_ADDEND vec2(load_residual(outRow + rowA), load_residual(outRow + rowB))
#elif MODE_QKV
#define PAIR_ADDEND vec2(biasOf(part, rowA), biasOf(part, rowB))
#endif
#ifdef PAIR_ADDEND
  vec2 addend = vec2(0.0);
#if GEMV_ADDEND_EARLY
  if (lane == 0u) addend = PAIR_ADDEND;  // the only lane that adds it
#endif
#endif
#if GEMV_POSITION_EARLY
  stepPosition_ = state_.position;
#endif
  vec3 sums = vec3(0.0);  // row A, row B, the input's sum of squares
  if (liveA || liveB) {   // the same for all of the pair's invocations
#if VEC_LOADS
#if MODE_SINGLE
    ACCUMULATE(w_v4, w_v4)
#elif MODE_GATE_UP
    ACCUMULATE(w_gate_v4, w_up_v4)
#else
    if (part == 0u) ACCUMULATE(w_q_v4, w_q_v4)
    else if (part == 1u) ACCUMULATE(w_k_v4, w_k_v4)
    else ACCUMULATE(w_v_v4, w_v_v4)
#endif
#else
#if MODE_SINGLE
    ACCUMULATE(load_w, load_w)
#elif MODE_GATE_UP
    ACCUMULATE(load_w_gate, load_w_up)
#else
    if (part == 0u) ACCUMULATE(load_w_q, load_w_q)
    else if (part == 1u) ACCUMULATE(load_w_k, load_w_k)
    else ACCUMULATE(load_w_v, load_w_v)
#endif
#endif
  }
  sums = pairSum(sums, at);
  if (lane != 0u || !(liveA || liveB)) return;
#if NORM_PROLOGUE
  float scale = inversesqrt(sums.z / float(K) + EPS);
#else
  float scale = 1.0;
#endif
  float a = sums.x * scale, b = sums.y * scale;

#if MODE_SINGLE
#if RESIDUAL
  ADD_PAIR_ADDEND
#endif
  if (liveA) store_result(outRow + rowA, a);
  if (liveB) store_result(outRow + rowB, b);
#if ARGMAX
  if (liveA && better(a, rowA, candidate_, candidateIndex_)) candidate_ = a, candidateIndex_ = rowA;
  if (liveB && better(b, rowB, candidate_, candidateIndex_)) candidate_ = b, candidateIndex_ = rowB;
#endif
#elif MODE_GATE_UP
  a += load_bias_gate(rowA);
  b += load_bias_up(rowA);
  store_result(rowA, activation(a) * b);
#else
  ADD_PAIR_ADDEND
#if ROPE
  uint i = p % PAIRS_PER_HEAD;
  if (rotated && i < ROTARY_DIM / 2u) {
    vec2 cs = rotation(i);
    float ra = a * cs.x - b * cs.y, rb = b * cs.x + a * cs.y;
    a = ra, b = rb;
  }
#endif
  if (liveA) storeRow(part, rowA, a);
  if (liveB) storeRow(part, rowB, b);
#endif
}

void main() {
#if PREFETCH_COUNT > 0
  // Workgroups [0, PREFETCH_WORKERS) read words of the next launch's weights (prefetch.glsl): first, so that
  // their page walks overlap the whole launch.
  if (gl_WorkGroupID.x < PREFETCH_WORKERS) {
    prefetchWeights(gl_WorkGroupID.x);
    return;
  }
  rowBlock(gl_WorkGroupID.x - PREFETCH_WORKERS);
#else
  rowBlock(gl_WorkGroupID.x);
#endif
#if ARGMAX
  // A logits projection that Plan::lastRowLogits runs on a prefill's last row has firstRow = T - 1 and one
  // token in its push constants: the position moves on by T there, by 1 in decode (firstRow 0).
  chooseToken(candidate_, candidateIndex_, step_.firstRow + 1u);
#endif
}
