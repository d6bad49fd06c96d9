// Shared by every kernel: the step's push constants and workgroup reductions. The position of the step's
// first token is in the state buffer (state_.position), declared with the bindings.
layout(push_constant) uniform Step {
  uint tokens;  // T of this step
  uint unused;
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
