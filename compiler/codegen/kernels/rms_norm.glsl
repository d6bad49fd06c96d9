// RMSNorm of each GROUP-wide group of a ROW-wide row. Grid (ROW / GROUP, T, 1).
void main() {
  uint base = gl_WorkGroupID.y * ROW + gl_WorkGroupID.x * GROUP;
  float sumSquares = 0.0;
  for (uint i = gl_LocalInvocationID.x; i < GROUP; i += WORKGROUP) {
    float v = load_x(base + i);
    sumSquares += v * v;
  }
  float scale = inversesqrt(workgroupSum(sumSquares) / float(GROUP) + EPS);
  for (uint i = gl_LocalInvocationID.x; i < GROUP; i += WORKGROUP)
    store_result(base + i, load_x(base + i) * scale * load_w(i));
}
