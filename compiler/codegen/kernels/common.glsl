// Shared by every kernel: the step's push constants and workgroup reductions.
layout(push_constant) uniform Step {
  uint tokens;          // T of this step
  uint start_position;  // position of its first token
} step_;

#ifdef NEEDS_REDUCTION
shared float reduction_[WORKGROUP];

// Sum and max over the workgroup. Every invocation must call them (they contain barriers).
float workgroupSum(float v) {
  uint tid = gl_LocalInvocationID.x;
  reduction_[tid] = v;
  barrier();
  for (uint s = WORKGROUP / 2; s > 0; s >>= 1) {
    if (tid < s) reduction_[tid] += reduction_[tid + s];
    barrier();
  }
  float total = reduction_[0];
  barrier();
  return total;
}

float workgroupMax(float v) {
  uint tid = gl_LocalInvocationID.x;
  reduction_[tid] = v;
  barrier();
  for (uint s = WORKGROUP / 2; s > 0; s >>= 1) {
    if (tid < s) reduction_[tid] = max(reduction_[tid], reduction_[tid + s]);
    barrier();
  }
  float m = reduction_[0];
  barrier();
  return m;
}
#endif
