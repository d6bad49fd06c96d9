// The greedy token (ties to the lowest index, as torch.argmax) chosen across the workgroups of one dispatch:
// argmax.glsl, and the logits projection's gemv with ARGMAX (gemv.glsl), which picks the token as it writes
// the logits instead of a launch of its own after it. Besides the token it writes input_ids[0] and the
// state's token list and advances the position, so that a recorded decode step can be replayed back to back
// on the GPU. Needs GROUPS (the dispatch's workgroups), VOCAB, SEQ and the bindings token, ids, partial
// (coherent: GROUPS values, then GROUPS indices) and counters.
// With more than one workgroup, each publishes its best (value, index) to the scratch and counts itself in;
// the last to finish (the counter returned to 0 by it) reduces them and writes the token.
#define NO_VALUE uintBitsToFloat(0xff800000u)  // -inf: any logit, -inf included, takes its place
const uint NO_INDEX = 0xffffffffu;

shared float bestValue_[WORKGROUP];
shared uint bestIndex_[WORKGROUP];
shared bool last_;

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

// `advance`: the step's token count, by which the position moves on.
void writeToken(uint index, uint advance) {
  uint chosen = min(index, VOCAB - 1u);  // NO_INDEX only if every logit is NaN
  token[0] = int(chosen);
  ids[0] = int(chosen);
  if (state_.generated < SEQ) state_.tokens[state_.generated] = chosen;
  state_.generated += 1;
  state_.position += advance;
}

// Every invocation of every workgroup calls it with its own candidate (NO_VALUE, NO_INDEX: none).
void chooseToken(float value, uint index, uint advance) {
  uint tid = gl_LocalInvocationIndex;
  reduceWorkgroup(value, index);
  if (GROUPS == 1u) {
    if (tid == 0u) writeToken(bestIndex_[0], advance);
    return;
  }
  // Indices as floats: exact below 2^24, far above any vocabulary.
  if (tid == 0u) {
    partial_[gl_WorkGroupID.x] = bestValue_[0];
    partial_[GROUPS + gl_WorkGroupID.x] = float(bestIndex_[0]);
    memoryBarrierBuffer();
    last_ = atomicAdd(counters[0], 1) == int(GROUPS) - 1;
  }
  barrier();
  if (!last_) return;
  memoryBarrierBuffer();
  if (tid == 0u) atomicExchange(counters[0], 0);  // ready for the next step
  float best = NO_VALUE;
  uint bestAt = NO_INDEX;
  for (uint g = tid; g < GROUPS; g += WORKGROUP) {
    float v = partial_[g];
    uint i = uint(partial_[GROUPS + g]);
    if (better(v, i, best, bestAt)) best = v, bestAt = i;
  }
  reduceWorkgroup(best, bestAt);
  if (tid == 0u) writeToken(bestIndex_[0], advance);
}
