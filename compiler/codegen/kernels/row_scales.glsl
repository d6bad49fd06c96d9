// The RMS scales 1 / sqrt(mean(x²) + EPS) of the step's rows of x (K wide), one workgroup a row. The
// cooperative-matrix matmul's norm prologue reads them (ROW_SCALES) instead of summing the squares of its
// tile's rows in every workgroup column again. Grid (T, 1, 1).
void main() {
  uint row = gl_WorkGroupID.x;
  float sum = 0.0;
#if K_VEC4
  for (uint i = gl_LocalInvocationID.x; i < K / 4u; i += WORKGROUP) {
    vec4 v = x_v4[row * (K / 4u) + i];
    sum += dot(v, v);
  }
#else
  for (uint i = gl_LocalInvocationID.x; i < K; i += WORKGROUP) {
    float v = load_x(row * K + i);
    sum += v * v;
  }
#endif
  float total = workgroupSum(sum);
  if (gl_LocalInvocationID.x == 0u) store_result(row, inversesqrt(total / float(K) + EPS));
}
