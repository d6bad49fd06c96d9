// result[t, n] = sum_k x[t, k] · w[n, k]. Each workgroup computes ROWS outputs for TOKENS tokens; its
// invocations stride over k (coalesced reads along weight rows) and reduce in shared memory.
// Grid (ceil(N / ROWS), ceil(T / TOKENS), 1).
shared float partial_[ROWS * TOKENS][WORKGROUP];

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint row0 = gl_WorkGroupID.x * ROWS;
  uint token0 = gl_WorkGroupID.y * TOKENS;
  float acc[ROWS][TOKENS];
  [[unroll]] for (uint r = 0; r < ROWS; ++r)
    [[unroll]] for (uint t = 0; t < TOKENS; ++t) acc[r][t] = 0.0;

  for (uint k = tid; k < K; k += WORKGROUP) {
    float xs[TOKENS];
    [[unroll]] for (uint t = 0; t < TOKENS; ++t) xs[t] = token0 + t < step_.tokens ? load_x((token0 + t) * K + k) : 0.0;
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
    if (row0 + r < N && token0 + t < step_.tokens) store_result((token0 + t) * N + row0 + r, partial_[tid][0]);
  }
}
