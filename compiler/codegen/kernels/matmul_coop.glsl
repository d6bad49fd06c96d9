// result[t, n] = sum_k x[t, k] · w[n, k] on tensor cores (GL_NV_cooperative_matrix: the extension Debian
// 12's glslang 12 compiles; it has no GL_KHR_cooperative_matrix). f16 inputs, f32 accumulators.
// Each workgroup of WARPS_T × WARPS_N subgroups computes a TILE_T × TILE_N block of the result; each
// subgroup a (TILE_T / WARPS_T) × (TILE_N / WARPS_N) block of FRAG × FRAG fragments. Slices TILE_K wide of
// the x rows (converted to f16) and of the weight rows are staged in shared memory through registers: the
// global loads of slice s + 1 are issued before the products of slice s. With COOP_STAGES 2 the slices
// alternate between two buffers (one barrier a slice); with 1 there is one buffer, which the products must
// finish with before it is rewritten (two barriers a slice, but room for tiles twice the size).
// Grid (ceil(N / TILE_N), ceil(T / TILE_T), 1). Any T and N; K a multiple of 8 (16-byte weight loads).
//
// NORM_PROLOGUE (RMSNorm with weight g): the rows are normalised before they are rounded to f16 (an
// unnormalised residual stream can exceed the f16 range), so the workgroup first sums the squares of its
// TILE_T rows. X_HALF: x is f16 already (8 halves a 16-byte word; a norm_rows_f16.glsl launch normalised
// and rounded it once a row instead of once a workgroup column), staged as it is loaded. RESIDUAL adds a
// residual as the result is written.
//
// The grouped projections of prefill (gerbil-group-qkv, gerbil-group-gate-up on the nvidia target) share the
// staged x of a workgroup between their weights:
//   MODE_GATE_UP  a workgroup makes TILE_N / 2 outputs: its staged weight rows alternate, by fragment within
//                 each subgroup's block, between w_gate and w_up rows of the same outputs, so a subgroup holds
//                 both sums of an output and writes act(gate + bias_gate) * (up + bias_up). Grid
//                 (ceil(N / (TILE_N / 2)), ...), N the outputs.
//   MODE_QKV      workgroups [0, GROUPS_Q) take TILE_N rows of w_q each, the next GROUPS_K of w_k, the last
//                 GROUPS_V of w_v, and write result_q, result_k, result_v (+ bias).
//
// SPLIT_K > 1 (plain projections and q/k/v): grid z splits K. Each workgroup sums its share of the slices
// and stores it to `partial` (its tile's TILE_T × TILE_N floats); the last of a tile's SPLIT_K workgroups to
// count itself in (an atomic counter a tile, which it returns to 0) adds the shares in split order, so the
// sum does not depend on which finished last, and writes the result (q/k/v: routed to its part, + bias).
// For projections with few tile columns and long rows, which would leave most multiprocessors idle, or
// whose last wave of tiles would run nearly empty (the 8B's q/k/v: 192 tiles, 1.45 waves of 132).
#ifndef MODE_GATE_UP
#define MODE_GATE_UP 0
#endif
#ifndef MODE_QKV
#define MODE_QKV 0
#endif
#ifndef COOP_STAGES
#define COOP_STAGES 2
#endif
#ifndef SPLIT_K
#define SPLIT_K 1
#endif
#ifndef X_HALF
#define X_HALF 0
#endif
// RESULT_HALF (MODE_GATE_UP, N even): the result in f16, two neighbouring outputs a word, for a
// tensor-core matmul that reads its input rows in f16 (its staging would round them anyway).
#ifndef RESULT_HALF
#define RESULT_HALF 0
#endif

const uint FRAG = 16u;
const uint SUBGROUP = 32u;
const uint WARP_T = TILE_T / WARPS_T, WARP_N = TILE_N / WARPS_N;  // one subgroup's block
const uint FRAGS_T = WARP_T / FRAG, FRAGS_N = WARP_N / FRAG;
// Rows of the staged slices are padded by 8 halves (16 bytes) so that the fragment loads of a subgroup
// spread over the shared-memory banks. The slices are kept as 16-byte words (8 halves): one store per
// staged chunk, and fragment offsets and strides in words.
const uint STRIDE = TILE_K + 8u;
const uint ROW_WORDS = STRIDE / 8u;
const uint CHUNKS = TILE_K / 8u;  // 16-byte chunks per staged row

#define FragA fcoopmatNV<16, gl_ScopeSubgroup, FRAG, FRAG>
#define FragB fcoopmatNV<16, gl_ScopeSubgroup, FRAG, FRAG>
#define FragC fcoopmatNV<32, gl_ScopeSubgroup, FRAG, FRAG>

// Each stage holds the x slice ([token][k]: A, row-major) and then the weight slice ([n][k]: B,
// column-major), at xAt(slot) and wAt(slot) of tiles_.
const uint X_WORDS = TILE_T * ROW_WORDS, STAGE_WORDS = (TILE_T + TILE_N) * ROW_WORDS;
uint xAt(uint slot) { return slot * STAGE_WORDS; }
uint wAt(uint slot) { return slot * STAGE_WORDS + X_WORDS; }
// The epilogue writes the accumulators with bounds checks and the residual through one 16 × 16 f32
// fragment a subgroup. After the loop's last barrier the staged slices are dead, so the fragments take
// their memory: 16 subgroups' fragments (16 KiB) would not fit in 48 KiB beside two stages of 128 × 128
// slices.
const uint EPILOGUE_FLOATS = WARPS_T * WARPS_N * FRAG * FRAG;
shared uvec4 tiles_[max(COOP_STAGES * STAGE_WORDS, EPILOGUE_FLOATS / 4u)];
#define storeEpilogue(fragment, at) coopMatStoreNV(fragment, tiles_, (at) / 4u, FRAG / 4u, false)
#define epilogue(e) uintBitsToFloat(tiles_[(e) / 4u][(e) % 4u])
#if NORM_PROLOGUE
shared float rowScale_[TILE_T];  // the RMS scales of the tile's rows
#endif

// A slice is staged in two halves: the global loads into registers (issued before the products of the
// previous slice, so that their latency hides behind them) and, after the products, the arithmetic on them
// (norm, rounding to f16) and the stores into shared memory; nothing between uses a loaded value, so no
// instruction waits on the loads before the products are issued.
const uint X_CHUNKS = TILE_T * CHUNKS / WORKGROUP, W_CHUNKS = TILE_N * CHUNKS / WORKGROUP;
struct Staged {
#if X_HALF
  uvec4 x[X_CHUNKS];
#else
  vec4 x[X_CHUNKS][2];
#endif
  vec4 g[X_CHUNKS][2];  // the norm weight under x (NORM_PROLOGUE)
  uvec4 w[W_CHUNKS];
};

// COOP_DIAG_NO_GLOBAL (gerbil-kernel-bench only): no global loads, to time the rest. COOP_DIAG_HALF_X: half
// of each x chunk loaded (the other half a copy), to time x in f16 instead of f32. COOP_DIAG_NO_FRAGMENT_LOADS:
// the products reuse the fragments of the first slice instead of loading each slice's from shared memory,
// to time the tensor-core products and the staging without them. All give wrong results.
#ifndef COOP_DIAG_NO_GLOBAL
#define COOP_DIAG_NO_GLOBAL 0
#endif
#ifndef COOP_DIAG_HALF_X
#define COOP_DIAG_HALF_X 0
#endif
#ifndef COOP_DIAG_NO_FRAGMENT_LOADS
#define COOP_DIAG_NO_FRAGMENT_LOADS 0
#endif
// COOP_FRAGMENT_PIPELINE: a slice's fragments for step kk + FRAG are loaded before the products of step kk
// (codegen sets it by the subgroup block's size; the driver does not overlap them by itself).
#ifndef COOP_FRAGMENT_PIPELINE
#define COOP_FRAGMENT_PIPELINE 0
#endif

// This workgroup's tile: its column (outputs) and row (tokens). COOP_ROWS_FASTEST: the workgroups that
// start one after another take the rows of one column (then the next column), instead of the columns of one
// row: the tile rows of a prefill read each slice of weights close together in time, so that only the first
// reads it from memory and the others from the L2 (a projection's weights are larger than the L2).
#ifndef COOP_ROWS_FASTEST
#define COOP_ROWS_FASTEST 0
#endif
uvec2 tile_;
#if MODE_GATE_UP
// The output that staged weight row `row` belongs to: within each subgroup's block of WARP_N rows, fragment
// f holds outputs (f / 2) * FRAG.. of the gate (f even) or the up (f odd) matrix.
uint outputOfRow(uint row) {
  uint inBlock = row % WARP_N;
  return tile_.x * (TILE_N / 2u) + (row / WARP_N) * (WARP_N / 2u) + (inBlock / FRAG / 2u) * FRAG +
         inBlock % FRAG;
}
#endif
#if MODE_QKV
uvec3 part_;  // this workgroup's part (0 q, 1 k, 2 v), its tile within the part, the part's rows
#endif

// COOP_CLAMPED_LOADS (codegen sets it where it measured faster: MatMulKernel.cpp): rows of tokens or outputs
// past the step's or the matrix's load its last row instead of zeros (their results are never stored), and
// where every workgroup's slices lie within K nothing else is checked: every staging load is unconditional,
// as the tensor-core attention's are since 19adeb5 (its loads, issued under a per-lane condition, had cost
// it 12%: sweep cg). Columns past K must still be zeros (they would add to the sums), so a K that TILE_K
// does not divide, or whose slices SPLIT_K does not (a last split's slices past K), keeps that check.
#ifndef COOP_CLAMPED_LOADS
#define COOP_CLAMPED_LOADS 0
#endif
const bool CLAMPED_K = COOP_CLAMPED_LOADS != 0 && K % TILE_K == 0u && (K / TILE_K) % SPLIT_K == 0u;
// Row `row` of `rows` (at least 1) as loaded: clamped to the last where COOP_CLAMPED_LOADS, else as it is;
// and whether the loaded row is one to load (always, clamped).
uint loadedRow(uint row, uint rows) { return COOP_CLAMPED_LOADS != 0 ? min(row, rows - 1u) : row; }
bool rowLive(uint row, uint rows) { return COOP_CLAMPED_LOADS != 0 || row < rows; }
bool columnLive(uint k) { return CLAMPED_K || k < K; }

void loadSlice(uint k0, out Staged st) {
#if COOP_DIAG_NO_GLOBAL
  return;
#endif
  [[unroll]] for (uint i = 0; i < X_CHUNKS; ++i) {
    uint c = gl_LocalInvocationIndex + i * WORKGROUP;
    uint row = c / CHUNKS, k = k0 + (c % CHUNKS) * 8u;
    uint t = loadedRow(tile_.y * TILE_T + row, step_.tokens);
    bool live = rowLive(t, step_.tokens) && columnLive(k);
#if X_HALF
    st.x[i] = live ? x_v4[(t * K + k) / 8u] : uvec4(0u);
#else
    st.x[i][0] = live ? x_v4[(t * K + k) / 4u] : vec4(0.0);
#if COOP_DIAG_HALF_X
    st.x[i][1] = st.x[i][0];
#else
    st.x[i][1] = live ? x_v4[(t * K + k) / 4u + 1u] : vec4(0.0);
#endif
#endif
#if NORM_PROLOGUE && NORM_WEIGHTED
    st.g[i][0] = g_v4[min(k, K - 8u) / 4u];
    st.g[i][1] = g_v4[min(k, K - 8u) / 4u + 1u];
#endif
  }
  [[unroll]] for (uint i = 0; i < W_CHUNKS; ++i) {
    uint c = gl_LocalInvocationIndex + i * WORKGROUP;
    uint row = c / CHUNKS, k = k0 + (c % CHUNKS) * 8u;
    uvec4 w = uvec4(0u);
#if MODE_GATE_UP
    // A subgroup's rows all come from one matrix: 32 / CHUNKS rows divide a fragment's 16.
    uint n = loadedRow(outputOfRow(row), N);
    if (rowLive(n, N) && columnLive(k)) w = (row % WARP_N) / FRAG % 2u == 0u ? w_gate_v4[(n * K + k) / 8u] : w_up_v4[(n * K + k) / 8u];
#elif MODE_QKV
    uint n = loadedRow(part_.y * TILE_N + row, part_.z);
    if (rowLive(n, part_.z) && columnLive(k)) {
      if (part_.x == 0u) w = w_q_v4[(n * K + k) / 8u];
      else if (part_.x == 1u) w = w_k_v4[(n * K + k) / 8u];
      else w = w_v_v4[(n * K + k) / 8u];
    }
#else
    uint n = loadedRow(tile_.x * TILE_N + row, N);
    if (rowLive(n, N) && columnLive(k)) w = w_v4[(n * K + k) / 8u];
#endif
    st.w[i] = w;
  }
}

#if W_BF16
// Two bf16 in a word to two f16.
uint bf16PairToHalf(uint p) {
  return packHalf2x16(vec2(uintBitsToFloat(p << 16), uintBitsToFloat(p & 0xffff0000u)));
}
#endif

void storeSlice(uint slot, Staged st) {
  [[unroll]] for (uint i = 0; i < X_CHUNKS; ++i) {
    uint c = gl_LocalInvocationIndex + i * WORKGROUP;
#if X_HALF
    tiles_[xAt(slot) + (c / CHUNKS) * ROW_WORDS + c % CHUNKS] = st.x[i];
#else
    vec4 a = st.x[i][0], b = st.x[i][1];
#if NORM_PROLOGUE
    float scale = rowScale_[c / CHUNKS];
#if NORM_WEIGHTED
    a *= scale * st.g[i][0];
    b *= scale * st.g[i][1];
#else  // the norm weight was folded into w's columns at load
    a *= scale;
    b *= scale;
#endif
#endif
    tiles_[xAt(slot) + (c / CHUNKS) * ROW_WORDS + c % CHUNKS] = packHalf8(a, b);
#endif
  }
  [[unroll]] for (uint i = 0; i < W_CHUNKS; ++i) {
    uint c = gl_LocalInvocationIndex + i * WORKGROUP;
#if W_BF16
    uvec4 p = st.w[i];
    tiles_[wAt(slot) + (c / CHUNKS) * ROW_WORDS + c % CHUNKS] =
        uvec4(bf16PairToHalf(p.x), bf16PairToHalf(p.y), bf16PairToHalf(p.z), bf16PairToHalf(p.w));
#else
    tiles_[wAt(slot) + (c / CHUNKS) * ROW_WORDS + c % CHUNKS] = st.w[i];
#endif
  }
}

// A subgroup's fragments of step kk of the slice in buffer `slot` (the timing variants below).
void loadFragments(uint slot, uint kk, uint warpT, uint warpN, out FragA a[FRAGS_T], out FragB b[FRAGS_N]) {
  [[unroll]] for (uint i = 0; i < FRAGS_T; ++i)
    coopMatLoadNV(a[i], tiles_, xAt(slot) + (warpT * WARP_T + i * FRAG) * ROW_WORDS + kk / 8u, ROW_WORDS, false);
  [[unroll]] for (uint j = 0; j < FRAGS_N; ++j)
    coopMatLoadNV(b[j], tiles_, wAt(slot) + (warpN * WARP_N + j * FRAG) * ROW_WORDS + kk / 8u, ROW_WORDS, true);
}
#if COOP_DIAG_NO_FRAGMENT_LOADS
FragA diagA_[TILE_K / FRAG][FRAGS_T];
FragB diagB_[TILE_K / FRAG][FRAGS_N];
bool diagLoaded_ = false;
#endif
// The products of the slice in buffer `slot`: each subgroup's FRAGS_T x FRAGS_N fragments.
void multiplySlice(uint slot, inout FragC acc[FRAGS_T][FRAGS_N], uint warpT, uint warpN) {
#if COOP_DIAG_NO_FRAGMENT_LOADS
  if (!diagLoaded_) {
    [[unroll]] for (uint kk = 0; kk < TILE_K; kk += FRAG) loadFragments(slot, kk, warpT, warpN, diagA_[kk / FRAG], diagB_[kk / FRAG]);
    diagLoaded_ = true;
  }
  [[unroll]] for (uint kk = 0; kk < TILE_K; kk += FRAG)
    [[unroll]] for (uint i = 0; i < FRAGS_T; ++i)
      [[unroll]] for (uint j = 0; j < FRAGS_N; ++j)
        acc[i][j] = coopMatMulAddNV(diagA_[kk / FRAG][i], diagB_[kk / FRAG][j], acc[i][j]);
#elif COOP_FRAGMENT_PIPELINE
  FragA a[2][FRAGS_T];
  FragB b[2][FRAGS_N];
  loadFragments(slot, 0u, warpT, warpN, a[0], b[0]);
  [[unroll]] for (uint kk = 0; kk < TILE_K; kk += FRAG) {
    const uint now = (kk / FRAG) % 2u;
    if (kk + FRAG < TILE_K) loadFragments(slot, kk + FRAG, warpT, warpN, a[1u - now], b[1u - now]);
    [[unroll]] for (uint i = 0; i < FRAGS_T; ++i)
      [[unroll]] for (uint j = 0; j < FRAGS_N; ++j) acc[i][j] = coopMatMulAddNV(a[now][i], b[now][j], acc[i][j]);
  }
#else
  // The loads written out here rather than through loadFragments: the code the H200 timings are of.
  [[unroll]] for (uint kk = 0; kk < TILE_K; kk += FRAG) {
    FragA a[FRAGS_T];
    FragB b[FRAGS_N];
    [[unroll]] for (uint i = 0; i < FRAGS_T; ++i)
      coopMatLoadNV(a[i], tiles_, xAt(slot) + (warpT * WARP_T + i * FRAG) * ROW_WORDS + kk / 8u, ROW_WORDS, false);
    [[unroll]] for (uint j = 0; j < FRAGS_N; ++j)
      coopMatLoadNV(b[j], tiles_, wAt(slot) + (warpN * WARP_N + j * FRAG) * ROW_WORDS + kk / 8u, ROW_WORDS, true);
    [[unroll]] for (uint i = 0; i < FRAGS_T; ++i)
      [[unroll]] for (uint j = 0; j < FRAGS_N; ++j) acc[i][j] = coopMatMulAddNV(a[i], b[j], acc[i][j]);
  }
#endif
}

#if MODE_QKV
// Output n of this workgroup's part (q, k or v) for token t, plus its bias; none outside the step's tokens
// or the part's rows.
void writeOutput(uint t, uint n, float v) {
  if (t >= step_.tokens || n >= part_.z) return;
  if (part_.x == 0u)
    store_result_q(t * N_Q + n, v + load_bias_q(n));
  else if (part_.x == 1u)
    store_result_k(t * N_K + n, v + load_bias_k(n));
  else
    store_result_v(t * N_V + n, v + load_bias_v(n));
}
#elif !MODE_GATE_UP
// Whether (t, n) is an output of a plain projection: within the step's tokens and the N outputs.
bool isOutput(uint t, uint n) { return t < step_.tokens && n < N; }
// One output of a plain projection, plus the residual; none outside the outputs.
void writeOutput(uint t, uint n, float v) {
  if (!isOutput(t, n)) return;
#if RESIDUAL
  v += load_residual(t * N + n);
#endif
  store_result(t * N + n, v);
}
#endif
// COOP_RESIDUAL_AHEAD (plain projections with RESIDUAL, unsplit): the epilogue loads each fragment's
// residual a fragment ahead, so that its trip to memory overlaps the stores of the one before instead of
// following them; every tile of a launch ends on these trips. 0: as writeOutput, a trip a fragment.
#ifndef COOP_RESIDUAL_AHEAD
#define COOP_RESIDUAL_AHEAD 1
#endif
#define RESIDUAL_AHEAD (RESIDUAL != 0 && !MODE_QKV && !MODE_GATE_UP && COOP_RESIDUAL_AHEAD != 0)
const uint PER_LANE = FRAG * FRAG / SUBGROUP;  // the elements of a fragment each lane writes out
#if RESIDUAL_AHEAD
// The residual under this lane's elements of the fragment at (t0, n0) (0 outside the outputs).
void residualOf(uint t0, uint n0, uint lane, out float r[PER_LANE]) {
  [[unroll]] for (uint m = 0; m < PER_LANE; ++m) {
    uint e = lane + m * SUBGROUP, t = t0 + e / FRAG, n = n0 + e % FRAG;
    r[m] = isOutput(t, n) ? load_residual(t * N + n) : 0.0;
  }
}
#endif
// The first output (column) of this workgroup's tile: within its part for q/k/v.
uint tileColumn() {
#if MODE_QKV
  return part_.y * TILE_N;
#else
  return tile_.x * TILE_N;
#endif
}

void main() {
  uint warp = gl_LocalInvocationIndex / SUBGROUP;
#if COOP_ROWS_FASTEST
  {
    uint linear = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    tile_ = uvec2(linear / gl_NumWorkGroups.y, linear % gl_NumWorkGroups.y);
  }
#else
  tile_ = gl_WorkGroupID.xy;
#endif
#if MODE_QKV
  {
    uint g = tile_.x;
    uint part = g < GROUPS_Q ? 0u : g < GROUPS_Q + GROUPS_K ? 1u : 2u;
    part_ = uvec3(part, g - (part == 0u ? 0u : part == 1u ? GROUPS_Q : GROUPS_Q + GROUPS_K),
                  part == 0u ? N_Q : part == 1u ? N_K : N_V);
  }
#endif
  uint warpT = warp / WARPS_N, warpN = warp % WARPS_N;

#if NORM_PROLOGUE
  // Each subgroup sums the squares of TILE_T / (WARPS_T · WARPS_N) rows, up to 32 16-byte loads per lane
  // in flight (a whole row of 4096, or several shorter rows): a loop that waited on each load would take
  // longer than the products.
  const uint ROWS_PER_WARP = TILE_T / (WARPS_T * WARPS_N);
  const uint ROW_VECS = K / 4u, LANE_VECS = (ROW_VECS + SUBGROUP - 1u) / SUBGROUP;
  const uint BATCH = LANE_VECS < 32u ? LANE_VECS : 32u;
  const uint ROWS_AT_ONCE = clamp(32u / LANE_VECS, 1u, ROWS_PER_WARP);
  uint rmsLane = gl_LocalInvocationIndex % SUBGROUP;
  for (uint r0 = 0; r0 < ROWS_PER_WARP; r0 += ROWS_AT_ONCE) {
    float sums[ROWS_AT_ONCE];
    [[unroll]] for (uint j = 0; j < ROWS_AT_ONCE; ++j) sums[j] = 0.0;
    for (uint v0 = 0; v0 < LANE_VECS; v0 += BATCH) {
      vec4 xs[ROWS_AT_ONCE][BATCH];
      [[unroll]] for (uint j = 0; j < ROWS_AT_ONCE; ++j) {
        uint t = min(tile_.y * TILE_T + warp * ROWS_PER_WARP + r0 + j, step_.tokens - 1u);
        [[unroll]] for (uint v = 0; v < BATCH; ++v)
          xs[j][v] = x_v4[t * ROW_VECS + min(rmsLane + (v0 + v) * SUBGROUP, ROW_VECS - 1u)];
      }
      [[unroll]] for (uint j = 0; j < ROWS_AT_ONCE; ++j)
        [[unroll]] for (uint v = 0; v < BATCH; ++v)
          if (rmsLane + (v0 + v) * SUBGROUP < ROW_VECS) sums[j] += dot(xs[j][v], xs[j][v]);
    }
    [[unroll]] for (uint j = 0; j < ROWS_AT_ONCE; ++j) {
      float sum = subgroupAdd(sums[j]);
      if (rmsLane == 0u && r0 + j < ROWS_PER_WARP)
        rowScale_[warp * ROWS_PER_WARP + r0 + j] = inversesqrt(sum / float(K) + EPS);
    }
  }
  barrier();
#endif

  FragC acc[FRAGS_T][FRAGS_N];
  [[unroll]] for (uint i = 0; i < FRAGS_T; ++i)
    [[unroll]] for (uint j = 0; j < FRAGS_N; ++j) acc[i][j] = FragC(0.0);

  const uint SLICES = (K + TILE_K - 1u) / TILE_K, SPLIT_SLICES = (SLICES + SPLIT_K - 1u) / SPLIT_K;
  // This workgroup's slices [first, first + SPLIT_SLICES): a trip count the compiler knows (a count read
  // from the workgroup ID made every tensor-core matmul 20-50% slower on the H200). The slices of a last
  // split that lie past K load zeros.
#if SPLIT_K > 1
  uint first = gl_WorkGroupID.z * SPLIT_SLICES;
#else
  const uint first = 0u;
#endif
  const uint slices = SPLIT_SLICES;
  Staged staged;
  loadSlice(first * TILE_K, staged);
  storeSlice(0u, staged);
  barrier();
  for (uint s = 0; s < slices; ++s) {
    uint current = s % COOP_STAGES;
    bool more = s + 1u < slices;
    if (more) loadSlice((first + s + 1u) * TILE_K, staged);
    multiplySlice(current, acc, warpT, warpN);
#if COOP_STAGES == 1
    barrier();  // every subgroup is done with the buffer before it is rewritten
#endif
    // With two buffers, the other one was last read in iteration s - 1, which every invocation finished
    // before the barrier that ended it.
    if (more) storeSlice((s + 1u) % COOP_STAGES, staged);
    barrier();
  }

#if SPLIT_K > 1 && !MODE_GATE_UP
  // Publish this split's share of the tile, then count it in; the tile's last split adds the shares.
  const uint TILE_ELEMENTS = TILE_T * TILE_N;
  uint tile = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  [[unroll]] for (uint i = 0; i < FRAGS_T; ++i)
    [[unroll]] for (uint j = 0; j < FRAGS_N; ++j)
      coopMatStoreNV(acc[i][j], partial_,
                     (tile * SPLIT_K + gl_WorkGroupID.z) * TILE_ELEMENTS + (warpT * WARP_T + i * FRAG) * TILE_N +
                         warpN * WARP_N + j * FRAG,
                     TILE_N, false);
  memoryBarrierBuffer();
  barrier();
  // Whether this workgroup adds the tile's shares, in the epilogue's memory (the loop's last barrier ended
  // its other uses).
  if (gl_LocalInvocationIndex == 0u) tiles_[0].x = atomicAdd(counters[tile], 1) == int(SPLIT_K) - 1 ? 1u : 0u;
  barrier();
  if (tiles_[0].x == 0u) return;
  memoryBarrierBuffer();
  if (gl_LocalInvocationIndex == 0u) atomicExchange(counters[tile], 0);  // ready for the next launch
  for (uint e = gl_LocalInvocationIndex; e < TILE_ELEMENTS / 4u; e += WORKGROUP) {
    vec4 sum = vec4(0.0);
    [[unroll]] for (uint s = 0; s < SPLIT_K; ++s) sum += partial_v4[(tile * SPLIT_K + s) * (TILE_ELEMENTS / 4u) + e];
    uint t = tile_.y * TILE_T + 4u * e / TILE_N, n0 = tileColumn() + 4u * e % TILE_N;
    [[unroll]] for (uint c = 0; c < 4u; ++c) writeOutput(t, n0 + c, sum[c]);
  }
  return;
#endif

  // The loop's last barrier ended every read of the staged slices, whose memory the fragments now take.
  uint lane = gl_LocalInvocationIndex % SUBGROUP, fragment = warp * FRAG * FRAG;
#if MODE_GATE_UP
  // Each lane takes OUT_STEP neighbouring outputs at a time (two with RESULT_HALF: one word of halves).
  const uint OUT_STEP = RESULT_HALF != 0 ? 2u : 1u, OUT_PER_LANE = PER_LANE / OUT_STEP;
  [[unroll]] for (uint i = 0; i < FRAGS_T; ++i)
    [[unroll]] for (uint p = 0; p < FRAGS_N / 2u; ++p) {
      vec2 gate[OUT_PER_LANE];
      storeEpilogue(acc[i][2u * p], fragment);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      [[unroll]] for (uint m = 0; m < OUT_PER_LANE; ++m) {
        uint e = (lane + m * SUBGROUP) * OUT_STEP;
        gate[m] = vec2(epilogue(fragment + e), epilogue(fragment + e + OUT_STEP - 1u));
      }
      subgroupBarrier();
      storeEpilogue(acc[i][2u * p + 1u], fragment);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      uint t0 = tile_.y * TILE_T + warpT * WARP_T + i * FRAG;
      uint n0 = tile_.x * (TILE_N / 2u) + warpN * (WARP_N / 2u) + p * FRAG;
      [[unroll]] for (uint m = 0; m < OUT_PER_LANE; ++m) {
        uint e = (lane + m * SUBGROUP) * OUT_STEP, t = t0 + e / FRAG, n = n0 + e % FRAG;
        if (t >= step_.tokens || n >= N) continue;
        float g = gate[m].x + load_bias_gate(n), u = epilogue(fragment + e) + load_bias_up(n);
#if RESULT_HALF
        float g1 = gate[m].y + load_bias_gate(n + 1u), u1 = epilogue(fragment + e + 1u) + load_bias_up(n + 1u);
        result_[(t * N + n) / 2u] = packHalf2x16(vec2(activation(g) * u, activation(g1) * u1));
#else
        store_result(t * N + n, activation(g) * u);
#endif
      }
      subgroupBarrier();  // the fragment is written out before the next one overwrites it
    }
#else
  const uint blockT = tile_.y * TILE_T + warpT * WARP_T, blockN = tileColumn() + warpN * WARP_N;
#if RESIDUAL_AHEAD
  float ahead[PER_LANE];
  residualOf(blockT, blockN, lane, ahead);
#endif
  [[unroll]] for (uint i = 0; i < FRAGS_T; ++i)
    [[unroll]] for (uint j = 0; j < FRAGS_N; ++j) {
      uint t0 = blockT + i * FRAG, n0 = blockN + j * FRAG;
#if RESIDUAL_AHEAD
      float residual[PER_LANE] = ahead;
      if (i * FRAGS_N + j + 1u < FRAGS_T * FRAGS_N) {
        uint nextI = j + 1u == FRAGS_N ? i + 1u : i, nextJ = j + 1u == FRAGS_N ? 0u : j + 1u;
        residualOf(blockT + nextI * FRAG, blockN + nextJ * FRAG, lane, ahead);
      }
#endif
      storeEpilogue(acc[i][j], fragment);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      [[unroll]] for (uint m = 0; m < PER_LANE; ++m) {
        uint e = lane + m * SUBGROUP, t = t0 + e / FRAG, n = n0 + e % FRAG;
#if RESIDUAL_AHEAD
        if (isOutput(t, n)) store_result(t * N + n, epilogue(fragment + e) + residual[m]);
#else
        writeOutput(t, n, epilogue(fragment + e));
#endif
      }
      subgroupBarrier();  // the fragment is written out before the next one overwrites it
    }
#endif
}
