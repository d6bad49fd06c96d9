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
// spread over the shared-memory banks.
const uint STRIDE = TILE_K + 8u;
const uint CHUNKS = TILE_K / 8u;  // 16-byte chunks per staged row

#define FragA fcoopmatNV<16, gl_ScopeSubgroup, FRAG, FRAG>
#define FragB fcoopmatNV<16, gl_ScopeSubgroup, FRAG, FRAG>
#define FragC fcoopmatNV<32, gl_ScopeSubgroup, FRAG, FRAG>

shared float16_t xTile_[2][TILE_T * STRIDE];  // [token][k]: A, row-major
shared float16_t wTile_[2][TILE_N * STRIDE];  // [n][k]: B, column-major
// One 16 × 16 f32 fragment per subgroup, through which the epilogue writes the accumulators with bounds
// checks and the residual. Until then its first TILE_T words hold the RMS scales of the tile's rows.
shared float scratch_[WARPS_T * WARPS_N * FRAG * FRAG];
#define rowScale_ scratch_

// A slice is staged in two halves: the global loads into registers (issued before the products of the
// previous slice, so that their latency hides behind them) and the stores into shared memory after.
const uint X_CHUNKS = TILE_T * CHUNKS / WORKGROUP, W_CHUNKS = TILE_N * CHUNKS / WORKGROUP;
vec4 xStaged_[X_CHUNKS][2];
uvec4 wStaged_[W_CHUNKS];

void loadSlice(uint k0) {
  [[unroll]] for (uint i = 0; i < X_CHUNKS; ++i) {
    uint c = gl_LocalInvocationIndex + i * WORKGROUP;
    uint row = c / CHUNKS, k = k0 + (c % CHUNKS) * 8u;
    uint t = gl_WorkGroupID.y * TILE_T + row;
    vec4 a = vec4(0.0), b = vec4(0.0);
    if (t < step_.tokens && k < K) {
      a = x_v4[(t * K + k) / 4u];
      b = x_v4[(t * K + k) / 4u + 1u];
#if NORM_PROLOGUE
      a *= rowScale_[row] * g_v4[k / 4u];
      b *= rowScale_[row] * g_v4[k / 4u + 1u];
#endif
    }
    xStaged_[i][0] = a;
    xStaged_[i][1] = b;
  }
  [[unroll]] for (uint i = 0; i < W_CHUNKS; ++i) {
    uint c = gl_LocalInvocationIndex + i * WORKGROUP;
    uint row = c / CHUNKS, k = k0 + (c % CHUNKS) * 8u;
    uint n = gl_WorkGroupID.x * TILE_N + row;
    wStaged_[i] = n < N && k < K ? w_v4[(n * K + k) / 8u] : uvec4(0u);
  }
}

void storeSlice(uint slot) {
  [[unroll]] for (uint i = 0; i < X_CHUNKS; ++i) {
    uint c = gl_LocalInvocationIndex + i * WORKGROUP;
    uint at = (c / CHUNKS) * STRIDE + (c % CHUNKS) * 8u;
    [[unroll]] for (uint e = 0; e < 8u; ++e) xTile_[slot][at + e] = float16_t(xStaged_[i][e / 4u][e % 4u]);
  }
  [[unroll]] for (uint i = 0; i < W_CHUNKS; ++i) {
    uint c = gl_LocalInvocationIndex + i * WORKGROUP;
    uint at = (c / CHUNKS) * STRIDE + (c % CHUNKS) * 8u;
    [[unroll]] for (uint e = 0; e < 4u; ++e) {
      uint p = wStaged_[i][e];
#if W_BF16
      f16vec2 h = f16vec2(uintBitsToFloat(p << 16), uintBitsToFloat(p & 0xffff0000u));
#else
      f16vec2 h = unpackFloat2x16(p);
#endif
      wTile_[slot][at + 2u * e] = h.x;
      wTile_[slot][at + 2u * e + 1u] = h.y;
    }
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
    uint current = s % 2u;
    bool more = s + 1u < slices;
    if (more) loadSlice((s + 1u) * TILE_K);
    [[unroll]] for (uint kk = 0; kk < TILE_K; kk += FRAG) {
      FragA a[FRAGS_T];
      FragB b[FRAGS_N];
      [[unroll]] for (uint i = 0; i < FRAGS_T; ++i)
        coopMatLoadNV(a[i], xTile_[current], (warpT * WARP_T + i * FRAG) * STRIDE + kk, STRIDE, false);
      [[unroll]] for (uint j = 0; j < FRAGS_N; ++j)
        coopMatLoadNV(b[j], wTile_[current], (warpN * WARP_N + j * FRAG) * STRIDE + kk, STRIDE, true);
      [[unroll]] for (uint i = 0; i < FRAGS_T; ++i)
        [[unroll]] for (uint j = 0; j < FRAGS_N; ++j) acc[i][j] = coopMatMulAddNV(a[i], b[j], acc[i][j]);
    }
    // The other buffer was last read in iteration s - 1, which every invocation finished before the
    // barrier that ended it.
    if (more) storeSlice(1u - current);
    barrier();
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
