// result[t, n] = sum_k x[t, k] · w[n, k], tiled for prefill. Each workgroup of 256 invocations computes a
// TILE_T × TILE_N (64 × 64) block of the result: it stages TILE_K-wide slices of the x rows and the weight
// rows in shared memory and each invocation accumulates a 4 × 4 register block in f32.
// Grid (ceil(N / TILE_N), ceil(T / TILE_T), 1). Any T, N and K: partial tiles are zero-filled.
//
// As gerbil.linear it may normalise its input rows first (NORM_PROLOGUE: RMSNorm with weight g) and add a
// residual as it writes (RESIDUAL). The RMS scale of a row is a constant factor of every output of the row,
// so the tile is staged as x·g and the scale applied in the epilogue: the sum of squares is accumulated
// from the very x values staged for the product, and each row's norm is computed once per workgroup without
// a second pass over x.
//
// Staging: invocation i loads token row i % 64 of the x slice and weight row i % 64 of the w slice, 8
// consecutive k each (k offset 8 · (i / 64); 16-byte loads where K is a multiple of 8: K_VEC8). Consecutive
// invocations take consecutive rows, so their shared-memory stores fall in distinct banks.
const uint TILE_T = 64u, TILE_N = 64u, TILE_K = 32u;
const uint BLOCK = 4u;  // outputs per invocation along t and along n

// Transposed ([k][t] and [k][n]) so that the inner product reads 4 consecutive t or n as one vec4.
shared vec4 xTile_[TILE_K][TILE_T / 4];
shared vec4 wTile_[TILE_K][TILE_N / 4];
// 16 KiB of shared memory, the least every Vulkan device has. After the last slice the x tile holds the
// invocations' sums of squares (sumSquares_(i)).
#define sumSquares_(i) xTile_[(i) / TILE_T][((i) % TILE_T) / 4u][(i) % 4u]

void stageX(uint k0, uint tokenRow, uint kPart, inout float sumSquares) {
  uint t = gl_WorkGroupID.y * TILE_T + tokenRow;
  float v[8];
#if K_VEC8
  vec4 a = vec4(0.0), b = vec4(0.0);
  if (t < step_.tokens && k0 + kPart < K) {
    uint base = (t * K + k0 + kPart) / 4u;
    a = x_v4[base];
    b = x_v4[base + 1u];
  }
  v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
#else
  [[unroll]] for (uint e = 0; e < 8u; ++e) v[e] = t < step_.tokens && k0 + kPart + e < K ? load_x(t * K + k0 + kPart + e) : 0.0;
#endif
  [[unroll]] for (uint e = 0; e < 8u; ++e) {
#if NORM_PROLOGUE
    sumSquares += v[e] * v[e];
#if NORM_WEIGHTED  // else folded into w's columns at load
    if (k0 + kPart + e < K) v[e] *= load_g(k0 + kPart + e);
#endif
#endif
    xTile_[kPart + e][tokenRow / 4u][tokenRow % 4u] = v[e];
  }
}

void stageW(uint k0, uint row, uint kPart) {
  uint n = gl_WorkGroupID.x * TILE_N + row;
  float v[8];
#if K_VEC8 && W_PACKED16
  uvec4 p = uvec4(0u);
  if (n < N && k0 + kPart < K) p = w_v4[(n * K + k0 + kPart) / 8u];
#if W_BF16
  [[unroll]] for (uint e = 0; e < 4u; ++e) {
    v[2u * e] = uintBitsToFloat(p[e] << 16);
    v[2u * e + 1u] = uintBitsToFloat(p[e] & 0xffff0000u);
  }
#else
  [[unroll]] for (uint e = 0; e < 4u; ++e) {
    vec2 h = unpackHalf2x16(p[e]);
    v[2u * e] = h.x;
    v[2u * e + 1u] = h.y;
  }
#endif
#elif K_VEC8
  vec4 a = vec4(0.0), b = vec4(0.0);
  if (n < N && k0 + kPart < K) {
    uint base = (n * K + k0 + kPart) / 4u;
    a = w_v4[base];
    b = w_v4[base + 1u];
  }
  v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
#else
  [[unroll]] for (uint e = 0; e < 8u; ++e) v[e] = n < N && k0 + kPart + e < K ? load_w(n * K + k0 + kPart + e) : 0.0;
#endif
  [[unroll]] for (uint e = 0; e < 8u; ++e) wTile_[kPart + e][row / 4u][row % 4u] = v[e];
}

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint tx = tid % (TILE_N / BLOCK), ty = tid / (TILE_N / BLOCK);  // 16 × 16 register blocks
  uint stagedRow = tid % TILE_T, kPart = (tid / TILE_T) * 8u;
  vec4 acc[BLOCK];  // acc[i][j]: token ty·4 + i, output tx·4 + j
  [[unroll]] for (uint i = 0; i < BLOCK; ++i) acc[i] = vec4(0.0);
  float sumSquares = 0.0;

  for (uint k0 = 0; k0 < K; k0 += TILE_K) {
    stageX(k0, stagedRow, kPart, sumSquares);
    stageW(k0, stagedRow, kPart);
    barrier();
    [[unroll]] for (uint kk = 0; kk < TILE_K; ++kk) {
      vec4 a = xTile_[kk][ty], b = wTile_[kk][tx];
      [[unroll]] for (uint i = 0; i < BLOCK; ++i) acc[i] += a[i] * b;
    }
    barrier();
  }

#if NORM_PROLOGUE
  sumSquares_(tid) = sumSquares;  // the loop's last barrier freed the tile
  barrier();
#endif
  [[unroll]] for (uint i = 0; i < BLOCK; ++i) {
    uint tokenRow = ty * BLOCK + i;
    uint t = gl_WorkGroupID.y * TILE_T + tokenRow;
    if (t >= step_.tokens) continue;
    vec4 value = acc[i];
#if NORM_PROLOGUE
    // The four invocations that staged this token row hold its sum of squares between them.
    float total = sumSquares_(tokenRow) + sumSquares_(tokenRow + TILE_T) + sumSquares_(tokenRow + 2u * TILE_T) +
                  sumSquares_(tokenRow + 3u * TILE_T);
    value *= inversesqrt(total / float(K) + EPS);
#endif
    [[unroll]] for (uint j = 0; j < BLOCK; ++j) {
      uint n = gl_WorkGroupID.x * TILE_N + tx * BLOCK + j;
      if (n >= N) continue;
#if RESIDUAL
      store_result(t * N + n, value[j] + load_residual(t * N + n));
#else
      store_result(t * N + n, value[j]);
#endif
    }
  }
}
