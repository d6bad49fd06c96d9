// The best (value, index) candidate of a workgroup's invocations, ties to the lowest index as torch.argmax:
// argmax_combine.glsl (the greedy token) and sample.glsl (the penalised maximum) share it.
#define NO_VALUE uintBitsToFloat(0xff800000u)  // -inf: any logit, -inf included, takes its place
const uint NO_INDEX = 0xffffffffu;

shared float bestValue_[WORKGROUP];
shared uint bestIndex_[WORKGROUP];

bool better(float value, uint index, float than, uint thanIndex) {
  return value > than || (value == than && index < thanIndex);
}

// The workgroup's best candidate, into bestValue_[0] and bestIndex_[0] (every invocation must call it).
void reduceWorkgroup(float value, uint index) {
  uint tid = gl_LocalInvocationIndex;
  bestValue_[tid] = value;
  bestIndex_[tid] = index;
  barrier();
  for (uint s = WORKGROUP / 2u; s > 0u; s >>= 1) {
    if (tid < s && better(bestValue_[tid + s], bestIndex_[tid + s], bestValue_[tid], bestIndex_[tid])) {
      bestValue_[tid] = bestValue_[tid + s];
      bestIndex_[tid] = bestIndex_[tid + s];
    }
    barrier();
  }
}
