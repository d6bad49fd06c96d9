// RMSNorm of the step's rows of x (K wide, a multiple of 8) times the norm weight g (NORM_WEIGHTED; else
// g was folded into the projection's weights), rounded to f16 (8 halves a 16-byte word): the input of a
// grouped projection on tensor cores (matmul_coop.glsl's X_HALF), which then stages it as it is, instead
// of every workgroup column loading f32 rows and the norm weight and rounding them again. The rows are
// normalised before they are rounded (an unnormalised residual stream can exceed the f16 range). One
// workgroup a row; grid (T, 1, 1). Each invocation holds its WORDS output words' eight values from the sum
// of squares to the stores, so a row is read once.
const uint ROW_WORDS = K / 8u, WORDS = (ROW_WORDS + WORKGROUP - 1u) / WORKGROUP;

void main() {
  uint row = gl_WorkGroupID.x;
  vec4 a[WORDS], b[WORDS];
  float sum = 0.0;
  [[unroll]] for (uint j = 0; j < WORDS; ++j) {
    uint i = min(gl_LocalInvocationID.x + j * WORKGROUP, ROW_WORDS - 1u);
    a[j] = x_v4[row * (K / 4u) + 2u * i], b[j] = x_v4[row * (K / 4u) + 2u * i + 1u];
  }
  [[unroll]] for (uint j = 0; j < WORDS; ++j)
    if (gl_LocalInvocationID.x + j * WORKGROUP < ROW_WORDS) sum += dot(a[j], a[j]) + dot(b[j], b[j]);
  float scale = inversesqrt(workgroupSum(sum) / float(K) + EPS);
  [[unroll]] for (uint j = 0; j < WORDS; ++j) {
    uint i = gl_LocalInvocationID.x + j * WORKGROUP;
    if (i >= ROW_WORDS) continue;
    vec4 x0 = a[j] * scale, x1 = b[j] * scale;
#if NORM_WEIGHTED  // else folded into the projection's weights at load
    x0 *= g_v4[2u * i], x1 *= g_v4[2u * i + 1u];
#endif
    result_v4[row * ROW_WORDS + i] = packHalf8(x0, x1);
  }
}
