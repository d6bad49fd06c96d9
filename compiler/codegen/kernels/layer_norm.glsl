// LayerNorm of each ROW-wide row, with weight and bias. Grid (T, 1, 1). Two passes for the variance.
void main() {
  uint base = gl_WorkGroupID.x * ROW;
  float sum = 0.0;
  for (uint i = gl_LocalInvocationID.x; i < ROW; i += WORKGROUP) sum += load_x(base + i);
  float mean = workgroupSum(sum) / float(ROW);
  float sumSquares = 0.0;
  for (uint i = gl_LocalInvocationID.x; i < ROW; i += WORKGROUP) {
    float d = load_x(base + i) - mean;
    sumSquares += d * d;
  }
  float scale = inversesqrt(workgroupSum(sumSquares) / float(ROW) + EPS);
  for (uint i = gl_LocalInvocationID.x; i < ROW; i += WORKGROUP)
    store_result(base + i, (load_x(base + i) - mean) * scale * load_w(i) + load_bias(i));
}
