// result[t, n] = sum_k x[t, k] · w[n, k] on tensor cores (GL_NV_cooperative_matrix: the extension Debian
// 12's glslang 12 compiles; it has no GL_KHR_cooperative_matrix). f16 inputs, f32 accumulators.
// Each workgroup of WARPS_T × WARPS_N subgroups computes a TILE_T × TILE_N block of the result; each
// subgroup a (TILE_T / WARPS_T) × (TILE_N / WARPS_N) block of FRAG × FRAG fragments. Slices TILE_K wide of
// the x rows (converted to f16) and of the weight rows are staged in shared memory, double-buffered so that
// the global loads of slice s + 1 overlap the products of slice s.
// Grid (ceil(N / TILE_N), ceil(T / TILE_T), 1). Any T and N; K a multiple of 8 (16-byte weight loads).
//
// NORM_PROLOGUE (RMSNorm with weight g): the rows are normalised before they are rounded to f16 (an
// unnormalised residual stream can exceed the f16 range), so the workgroup first sums the squares of its
// TILE_T rows. RESIDUAL adds a residual as the result is written.
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

// COOP_STAGES 2: double-buffered slices, one barrier per slice; 1: one buffer (room for TILE_K 64), two.
#ifndef COOP_STAGES
#define COOP_STAGES 2
#endif
shared uvec4 xTile_[COOP_STAGES][TILE_T * ROW_WORDS];  // [token][k]: A, row-major
shared uvec4 wTile_[COOP_STAGES][TILE_N * ROW_WORDS];  // [n][k]: B, column-major
// One 16 × 16 f32 fragment per subgroup, through which the epilogue writes the accumulators with bounds
// checks and the residual. Until then its first TILE_T words hold the RMS scales of the tile's rows.
shared float scratch_[WARPS_T * WARPS_N * FRAG * FRAG];
#define rowScale_ scratch_

// A slice is staged in two halves: the global loads into registers (issued before the products of the
// previous slice, so that their latency hides behind them) and, after the products, the arithmetic on them
// (norm, rounding to f16) and the stores into shared memory; nothing between uses a loaded value, so no
// instruction waits on the loads before the products are issued.
const uint X_CHUNKS = TILE_T * CHUNKS / WORKGROUP, W_CHUNKS = TILE_N * CHUNKS / WORKGROUP;
vec4 xStaged_[X_CHUNKS][2];
#if NORM_PROLOGUE
vec4 gStaged_[X_CHUNKS][2];
#endif
uvec4 wStaged_[W_CHUNKS];

// COOP_DIAG_NO_GLOBAL (gerbil-kernel-bench only): no global loads, to time the rest.
#ifndef COOP_DIAG_NO_GLOBAL
#define COOP_DIAG_NO_GLOBAL 0
#endif
#ifndef COOP_DIAG_NO_MMA
#define COOP_DIAG_NO_MMA 0
#endif

void loadSlice(uint k0) {
#if COOP_DIAG_NO_GLOBAL
  return;
#endif
  [[unroll]] for (uint i = 0; i < X_CHUNKS; ++i) {
    uint c = gl_LocalInvocationIndex + i * WORKGROUP;
    uint row = c / CHUNKS, k = k0 + (c % CHUNKS) * 8u;
    uint t = gl_WorkGroupID.y * TILE_T + row;
    bool live = t < step_.tokens && k < K;
    xStaged_[i][0] = live ? x_v4[(t * K + k) / 4u] : vec4(0.0);
    xStaged_[i][1] = live ? x_v4[(t * K + k) / 4u + 1u] : vec4(0.0);
#if NORM_PROLOGUE
    gStaged_[i][0] = g_v4[min(k, K - 8u) / 4u];
    gStaged_[i][1] = g_v4[min(k, K - 8u) / 4u + 1u];
#endif
  }
  [[unroll]] for (uint i = 0; i < W_CHUNKS; ++i) {
    uint c = gl_LocalInvocationIndex + i * WORKGROUP;
    uint row = c / CHUNKS, k = k0 + (c % CHUNKS) * 8u;
    uint n = gl_WorkGroupID.x * TILE_N + row;
    wStaged_[i] = n < N && k < K ? w_v4[(n * K + k) / 8u] : uvec4(0u);
  }
}

#if W_BF16
// Two bf16 in a word to two f16.
uint bf16PairToHalf(uint p) {
  return packHalf2x16(vec2(uintBitsToFloat(p << 16), uintBitsToFloat(p & 0xffff0000u)));
}
#endif

void storeSlice(uint slot) {
  [[unroll]] for (uint i = 0; i < X_CHUNKS; ++i) {
    uint c = gl_LocalInvocationIndex + i * WORKGROUP;
    vec4 a = xStaged_[i][0], b = xStaged_[i][1];
#if NORM_PROLOGUE
    float scale = rowScale_[c / CHUNKS];
    a *= scale * gStaged_[i][0];
    b *= scale * gStaged_[i][1];
#endif
    xTile_[slot][(c / CHUNKS) * ROW_WORDS + c % CHUNKS] =
        uvec4(packHalf2x16(a.xy), packHalf2x16(a.zw), packHalf2x16(b.xy), packHalf2x16(b.zw));
  }
  [[unroll]] for (uint i = 0; i < W_CHUNKS; ++i) {
    uint c = gl_LocalInvocationIndex + i * WORKGROUP;
#if W_BF16
    uvec4 p = wStaged_[i];
    wTile_[slot][(c / CHUNKS) * ROW_WORDS + c % CHUNKS] =
        uvec4(bf16PairToHalf(p.x), bf16PairToHalf(p.y), bf16PairToHalf(p.z), bf16PairToHalf(p.w));
#else
    wTile_[slot][(c / CHUNKS) * ROW_WORDS + c % CHUNKS] = wStaged_[i];
#endif
  }
}

void main() {
  uint warp = gl_LocalInvocationIndex / SUBGROUP;
  uint warpT = warp / WARPS_N, warpN = warp % WARPS_N;

#if NORM_PROLOGUE
  // Each subgroup sums the squares of TILE_T / (WARPS_T · WARPS_N) rows.
  const uint ROWS_PER_WARP = TILE_T / (WARPS_T * WARPS_N);
  uint rmsLane = gl_LocalInvocationIndex % SUBGROUP;
  for (uint r = 0; r < ROWS_PER_WARP; ++r) {
    uint row = warp * ROWS_PER_WARP + r;
    uint t = gl_WorkGroupID.y * TILE_T + row;
    float sum = 0.0;
    if (t < step_.tokens)
      for (uint k = rmsLane; k < K / 4u; k += SUBGROUP) sum += dot(x_v4[t * (K / 4u) + k], x_v4[t * (K / 4u) + k]);
    sum = subgroupAdd(sum);
    if (rmsLane == 0u) rowScale_[row] = inversesqrt(sum / float(K) + EPS);
  }
  barrier();
#endif

  FragC acc[FRAGS_T][FRAGS_N];
  [[unroll]] for (uint i = 0; i < FRAGS_T; ++i)
    [[unroll]] for (uint j = 0; j < FRAGS_N; ++j) acc[i][j] = FragC(0.0);

  loadSlice(0u);
  storeSlice(0u);
  barrier();
  uint slices = (K + TILE_K - 1u) / TILE_K;
  for (uint s = 0; s < slices; ++s) {
    uint current = s % COOP_STAGES;
    bool more = s + 1u < slices;
    if (more) loadSlice((s + 1u) * TILE_K);
    [[unroll]] for (uint kk = 0; kk < TILE_K; kk += FRAG) {
      FragA a[FRAGS_T];
      FragB b[FRAGS_N];
      [[unroll]] for (uint i = 0; i < FRAGS_T; ++i)
        coopMatLoadNV(a[i], xTile_[current], (warpT * WARP_T + i * FRAG) * ROW_WORDS + kk / 8u, ROW_WORDS, false);
      [[unroll]] for (uint j = 0; j < FRAGS_N; ++j)
        coopMatLoadNV(b[j], wTile_[current], (warpN * WARP_N + j * FRAG) * ROW_WORDS + kk / 8u, ROW_WORDS, true);
#if COOP_DIAG_NO_MMA  // (gerbil-kernel-bench only) the fragment loads, without the products
      [[unroll]] for (uint i = 0; i < FRAGS_T; ++i)
        [[unroll]] for (uint j = 0; j < FRAGS_N; ++j) acc[i][j] += FragC(a[i]) + FragC(b[j]);
#else
      [[unroll]] for (uint i = 0; i < FRAGS_T; ++i)
        [[unroll]] for (uint j = 0; j < FRAGS_N; ++j) acc[i][j] = coopMatMulAddNV(a[i], b[j], acc[i][j]);
#endif
    }
#if COOP_STAGES == 2
    // The other buffer was last read in iteration s - 1, which every invocation finished before the
    // barrier that ended it.
    if (more) storeSlice(1u - current);
    barrier();
#else
    barrier();  // every product of this slice read the buffer
    if (more) storeSlice(0u);
    barrier();
#endif
  }

  // The loop's last barrier ended every use of the row scales.
  uint lane = gl_LocalInvocationIndex % SUBGROUP, fragment = warp * FRAG * FRAG;
  [[unroll]] for (uint i = 0; i < FRAGS_T; ++i)
    [[unroll]] for (uint j = 0; j < FRAGS_N; ++j) {
      coopMatStoreNV(acc[i][j], scratch_, fragment, FRAG, false);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      uint t0 = gl_WorkGroupID.y * TILE_T + warpT * WARP_T + i * FRAG;
      uint n0 = gl_WorkGroupID.x * TILE_N + warpN * WARP_N + j * FRAG;
      for (uint e = lane; e < FRAG * FRAG; e += SUBGROUP) {
        uint t = t0 + e / FRAG, n = n0 + e % FRAG;
        if (t >= step_.tokens || n >= N) continue;
#if RESIDUAL
        store_result(t * N + n, scratch_[fragment + e] + load_residual(t * N + n));
#else
        store_result(t * N + n, scratch_[fragment + e]);
#endif
      }
      subgroupBarrier();  // the fragment is written out before the next one overwrites it
    }
}
