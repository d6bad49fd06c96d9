// The one-token form of matmul that decode steps run: result[n] = x · w[n]. Reading the weights is the
// whole cost, so every load takes 16 bytes (8 f16/bf16 or 4 f32 weights) and consecutive invocations read
// consecutive bytes of a row. Each workgroup computes ROWS rows and reduces in shared memory.
// Grid (ceil(N / ROWS), 1, 1). NORM_PROLOGUE and RESIDUAL as in matmul.glsl.
shared float partial_[ROWS][WORKGROUP];

#if W_PACKED16
const uint PER_LOAD = 8u;
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
#else
const uint PER_LOAD = 4u;
#endif

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint row0 = gl_WorkGroupID.x * ROWS;
  float acc[ROWS];
  [[unroll]] for (uint r = 0; r < ROWS; ++r) acc[r] = 0.0;

#if NORM_PROLOGUE
  float sum = 0.0;
  for (uint k = tid; k < K / 4; k += WORKGROUP) sum += dot(x_v4[k], x_v4[k]);
  partial_[0][tid] = sum;
  barrier();
  for (uint s = WORKGROUP / 2; s > 0; s >>= 1) {
    if (tid < s) partial_[0][tid] += partial_[0][tid + s];
    barrier();
  }
  float scale = inversesqrt(partial_[0][0] / float(K) + EPS);
  barrier();
#define NORMED(i) (x_v4[i] * (scale * g_v4[i]))
#else
#define NORMED(i) x_v4[i]
#endif
  for (uint k = tid; k < K / PER_LOAD; k += WORKGROUP) {
#if W_PACKED16
    vec4 xa = NORMED(2 * k), xb = NORMED(2 * k + 1);
    [[unroll]] for (uint r = 0; r < ROWS; ++r)
      if (row0 + r < N) acc[r] += dot8(w_v4[(row0 + r) * (K / 8) + k], xa, xb);
#else
    vec4 xs = NORMED(k);
    [[unroll]] for (uint r = 0; r < ROWS; ++r)
      if (row0 + r < N) acc[r] += dot(w_v4[(row0 + r) * (K / 4) + k], xs);
#endif
  }
  [[unroll]] for (uint r = 0; r < ROWS; ++r) partial_[r][tid] = acc[r];
  barrier();
  for (uint s = WORKGROUP / 2; s > 0; s >>= 1) {
    if (tid < s)
      [[unroll]] for (uint r = 0; r < ROWS; ++r) partial_[r][tid] += partial_[r][tid + s];
    barrier();
  }
#if RESIDUAL
  if (tid < ROWS && row0 + tid < N) store_result(row0 + tid, partial_[tid][0] + load_residual(row0 + tid));
#else
  if (tid < ROWS && row0 + tid < N) store_result(row0 + tid, partial_[tid][0]);
#endif
}
