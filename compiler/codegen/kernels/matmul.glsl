// result[t, n] = sum_k x[t, k] · w[n, k]. Each workgroup computes ROWS outputs for TOKENS tokens; its
// invocations stride over k (coalesced reads along weight rows) and reduce in shared memory.
// Grid (ceil(N / ROWS), ceil(T / TOKENS), 1). As gerbil.linear it may normalise its input rows first
// (NORM_PROLOGUE: RMSNorm with weight g) and add a residual as it writes (RESIDUAL).
shared float partial_[ROWS * TOKENS][WORKGROUP];

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint row0 = gl_WorkGroupID.x * ROWS;
  uint token0 = gl_WorkGroupID.y * TOKENS;
  float acc[ROWS][TOKENS];
  [[unroll]] for (uint r = 0; r < ROWS; ++r)
    [[unroll]] for (uint t = 0; t < TOKENS; ++t) acc[r][t] = 0.0;

#if NORM_PROLOGUE
  // The RMSNorm of this workgroup's token rows, computed here instead of in a kernel of its own.
  float scale[TOKENS];
  [[unroll]] for (uint t = 0; t < TOKENS; ++t) {
    float sum = 0.0;
    if (token0 + t < step_.tokens)
      for (uint k = tid; k < K; k += WORKGROUP) {
        float v = load_x((token0 + t) * K + k);
        sum += v * v;
      }
    partial_[t][tid] = sum;
  }
  barrier();
  for (uint s = WORKGROUP / 2; s > 0; s >>= 1) {
    if (tid < s)
      [[unroll]] for (uint t = 0; t < TOKENS; ++t) partial_[t][tid] += partial_[t][tid + s];
    barrier();
  }
  [[unroll]] for (uint t = 0; t < TOKENS; ++t) scale[t] = inversesqrt(partial_[t][0] / float(K) + EPS);
  barrier();
#endif
  for (uint k = tid; k < K; k += WORKGROUP) {
    float xs[TOKENS];
    [[unroll]] for (uint t = 0; t < TOKENS; ++t) xs[t] = token0 + t < step_.tokens ? load_x((token0 + t) * K + k) : 0.0;
#if NORM_PROLOGUE
    float g = load_g(k);
    [[unroll]] for (uint t = 0; t < TOKENS; ++t) xs[t] = xs[t] * scale[t] * g;
#endif
    [[unroll]] for (uint r = 0; r < ROWS; ++r) {
      if (row0 + r < N) {
        float w = load_w((row0 + r) * K + k);
        [[unroll]] for (uint t = 0; t < TOKENS; ++t) acc[r][t] += w * xs[t];
      }
    }
  }
  [[unroll]] for (uint r = 0; r < ROWS; ++r)
    [[unroll]] for (uint t = 0; t < TOKENS; ++t) partial_[r * TOKENS + t][tid] = acc[r][t];
  barrier();
  for (uint s = WORKGROUP / 2; s > 0; s >>= 1) {
    if (tid < s)
      [[unroll]] for (uint i = 0; i < ROWS * TOKENS; ++i) partial_[i][tid] += partial_[i][tid + s];
    barrier();
  }
  if (tid < ROWS * TOKENS) {
    uint r = tid / TOKENS, t = tid % TOKENS;
    uint index = (token0 + t) * N + row0 + r;
    if (row0 + r < N && token0 + t < step_.tokens)
#if RESIDUAL
      store_result(index, partial_[tid][0] + load_residual(index));
#else
      store_result(index, partial_[tid][0]);
#endif
  }
}
