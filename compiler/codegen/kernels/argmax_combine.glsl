// The greedy token (ties to the lowest index, as torch.argmax) chosen across the workgroups of one dispatch:
// argmax.glsl, and the logits projection's gemv with ARGMAX (gemv.glsl), which picks the token as it writes
// the logits instead of a launch of its own after it. Besides the token it writes input_ids[0] and the
// state's token list and advances the position, so that a recorded decode step can be replayed back to back
// on the GPU. Needs GROUPS (the dispatch's workgroups), VOCAB, SEQ and the bindings token, ids, partial
// (coherent: GROUPS values, then GROUPS indices, then with SEGMENTS > 1 as many values and indices of the
// segments) and counters (1, or 1 + SEGMENTS).
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

// The best of candidates [first, first + count) of the scratch (values from `values`, indices from
// `indices`), reduced by the workgroup into bestValue_[0] and bestIndex_[0].
void reduceCandidates(uint first, uint count, uint values, uint indices) {
  float best = NO_VALUE;
  uint bestAt = NO_INDEX;
  for (uint c = gl_LocalInvocationIndex; c < count; c += WORKGROUP) {
    float v = partial_[values + first + c];
    uint i = uint(partial_[indices + first + c]);
    if (better(v, i, best, bestAt)) best = v, bestAt = i;
  }
  reduceWorkgroup(best, bestAt);
}

// Publishes the workgroup's best as candidate `slot` (values at `values`, indices at `indices`) and counts
// it in counter `counter` of `expected`; whether this workgroup was the last (which returns the counter to 0).
bool handOver(uint slot, uint values, uint indices, uint counter, uint expected) {
  if (gl_LocalInvocationIndex == 0u) {
    partial_[values + slot] = bestValue_[0];
    partial_[indices + slot] = float(bestIndex_[0]);  // exact below 2^24, far above any vocabulary
    memoryBarrierBuffer();
    last_ = atomicAdd(counters[counter], 1) == int(expected) - 1;
  }
  barrier();
  if (!last_) return false;
  memoryBarrierBuffer();
  if (gl_LocalInvocationIndex == 0u) atomicExchange(counters[counter], 0);  // ready for the next step
  return true;
}

// Every invocation of every workgroup calls it with its own candidate (NO_VALUE, NO_INDEX: none).
// Up to WORKGROUP workgroups hand their candidates to the last of them. More (the logits gemv has one per 8
// rows, ~19000 for a 152k vocabulary) go up a tree: the last of each of SEGMENTS runs of WORKGROUP reduces
// its run's candidates (one load an invocation) and hands that on, and the last of those reduces the
// SEGMENTS candidates. (Fewer workgroups that took several blocks of rows each made the H200's LM heads
// 20-25% slower than the gemv and the argmax launch apart.)
const uint SEGMENTS = (GROUPS + WORKGROUP - 1u) / WORKGROUP;
void chooseToken(float value, uint index, uint advance) {
  reduceWorkgroup(value, index);
  if (GROUPS == 1u) {
    if (gl_LocalInvocationIndex == 0u) writeToken(bestIndex_[0], advance);
    return;
  }
  uint group = gl_WorkGroupID.x;
  if (SEGMENTS == 1u) {
    if (!handOver(group, 0u, GROUPS, 0u, GROUPS)) return;
    reduceCandidates(0u, GROUPS, 0u, GROUPS);
  } else {
    uint segment = group / WORKGROUP, first = segment * WORKGROUP, count = min(WORKGROUP, GROUPS - first);
    if (!handOver(group, 0u, GROUPS, 1u + segment, count)) return;
    reduceCandidates(first, count, 0u, GROUPS);
    if (!handOver(segment, 2u * GROUPS, 2u * GROUPS + SEGMENTS, 0u, SEGMENTS)) return;
    reduceCandidates(0u, SEGMENTS, 2u * GROUPS, 2u * GROUPS + SEGMENTS);
  }
  if (gl_LocalInvocationIndex == 0u) writeToken(bestIndex_[0], advance);
}
