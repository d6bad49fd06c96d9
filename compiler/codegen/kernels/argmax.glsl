// The greedy token of the last logits row (ties to the lowest index, as torch.argmax). Besides its result it
// writes the token into input_ids[0] and the state's token list and advances the position by T, so that a
// recorded decode step can be replayed back to back on the GPU.
// Grid (GROUPS, 1, 1): workgroup g takes the SPAN logits from g · SPAN, every invocation LOADS of them with
// their loads issued together (one workgroup scanning a 128k vocabulary was a chain of dependent loads, 24 µs
// on an H200). With more than one workgroup each publishes its best (value, index) to the scratch and counts
// itself in; the last to finish (the counter returned to 0 by it) reduces them and writes the token.
const uint SPAN = WORKGROUP * LOADS;
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
  uint tid = gl_LocalInvocationID.x;
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

void writeToken(uint index) {
  uint token = min(index, VOCAB - 1u);  // NO_INDEX only if every logit is NaN
  result[0] = int(token);
  ids[0] = int(token);
  if (state_.generated < SEQ) state_.tokens[state_.generated] = token;
  state_.generated += 1;
  state_.position += step_.tokens;
}

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint base = (step_.tokens - 1u) * VOCAB, begin = gl_WorkGroupID.x * SPAN;
  float values[LOADS];
  [[unroll]] for (uint u = 0; u < LOADS; ++u) {
    uint i = begin + tid + u * WORKGROUP;
    values[u] = i < VOCAB ? load_logits(base + i) : NO_VALUE;
  }
  float best = NO_VALUE;
  uint index = NO_INDEX;
  [[unroll]] for (uint u = 0; u < LOADS; ++u) {
    uint i = begin + tid + u * WORKGROUP;
    if (i < VOCAB && better(values[u], i, best, index)) best = values[u], index = i;
  }
  reduceWorkgroup(best, index);
  if (GROUPS == 1u) {
    if (tid == 0u) writeToken(bestIndex_[0]);
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
  best = NO_VALUE, index = NO_INDEX;
  for (uint g = tid; g < GROUPS; g += WORKGROUP) {
    float value = partial_[g];
    uint i = uint(partial_[GROUPS + g]);
    if (better(value, i, best, index)) best = value, index = i;
  }
  reduceWorkgroup(best, index);
  if (tid == 0u) writeToken(bestIndex_[0]);
}
