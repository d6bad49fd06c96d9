// RMSNorm of the step's rows of x (K wide, a multiple of 8) times the norm weight g (NORM_WEIGHTED; else
// g was folded into the projection's weights), rounded to f16 (8 halves a 16-byte word): the input of a
// grouped projection on tensor cores (matmul_coop.glsl's X_HALF), which then stages it as it is, instead
// of every workgroup column loading f32 rows and the norm weight and rounding them again. The rows are
// normalised before they are rounded (an unnormalised residual stream can exceed the f16 range). One
// workgroup a row; grid (T, 1, 1).
void main() {
  uint row = gl_WorkGroupID.x;
  float sum = 0.0;
  for (uint i = gl_LocalInvocationID.x; i < K / 4u; i += WORKGROUP) {
    vec4 v = x_v4[row * (K / 4u) + i];
    sum += dot(v, v);
  }
  float scale = inversesqrt(workgroupSum(sum) / float(K) + EPS);
  for (uint i = gl_LocalInvocationID.x; i < K / 8u; i += WORKGROUP) {
    vec4 a = x_v4[row * (K / 4u) + 2u * i] * scale, b = x_v4[row * (K / 4u) + 2u * i + 1u] * scale;
#if NORM_WEIGHTED  // else folded into the projection's weights at load
    a *= g_v4[2u * i], b *= g_v4[2u * i + 1u];
#endif
    result_v4[row * (K / 8u) + i] = packHalf8(a, b);
  }
}
