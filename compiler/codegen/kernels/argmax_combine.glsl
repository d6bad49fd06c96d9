// The greedy token (ties to the lowest index, as torch.argmax) chosen across the workgroups of one dispatch:
// argmax.glsl, and the logits projection's gemv with ARGMAX (gemv.glsl), which picks the token as it writes
// the logits instead of a launch of its own after it. Besides the token it writes input_ids[0] and the
// state's token list and advances the position, so that a recorded decode step can be replayed back to back
// on the GPU. Needs GROUPS (the dispatch's workgroups), VOCAB, SEQ and the bindings token, ids, partial
// (coherent: GROUPS values, then GROUPS indices, then with SEGMENTS > 1 as many values and indices of the
// segments) and counters (1, or 1 + SEGMENTS).
// With more than one workgroup, each publishes its best (value, index) to the scratch and counts itself in;
// the last to finish (the counter returned to 0 by it) reduces them and writes the token.
// (after best_candidate.glsl: better, reduceWorkgroup, NO_VALUE, NO_INDEX)

// `advance`: the step's token count, by which the position moves on.
void writeToken(uint index, uint advance) {
  uint chosen = min(index, VOCAB - 1u);  // NO_INDEX only if every logit is NaN
  token[0] = int(chosen);
  ids[0] = int(chosen);
  if (state_.generated < SEQ) state_.tokens[state_.generated] = chosen;
  state_.generated += 1;
  state_.position += advance;
}

#if SUBGROUP_OPS
// With subgroup operations the workgroup's candidates meet in subgroup 0, which alone goes on: it hands
// the workgroup's best over and, in the last workgroup, reduces the scratch's candidates, while the other
// subgroups leave (the logits gemv's ~19000 workgroups each waited for an atomic and 8 barriers of a
// shared-memory reduction before, and its LM head took 92.8 µs against 68.0 + 9.3 for the gemv and the
// argmax launch on the H200).

// The best (value, index) of the subgroup's invocations, in each of them.
void subgroupBest(inout float value, inout uint index) {
  float best = subgroupMax(value);
  index = subgroupMin(value == best ? index : NO_INDEX);
  value = best;
}

// The workgroup's best, in every invocation of subgroup 0: the only ones for which it returns true.
bool workgroupBest(inout float value, inout uint index) {
  subgroupBest(value, index);
  if (subgroupElect()) bestValue_[gl_SubgroupID] = value, bestIndex_[gl_SubgroupID] = index;
  barrier();
  if (gl_SubgroupID != 0u) return false;
  value = NO_VALUE, index = NO_INDEX;
  for (uint s = gl_SubgroupInvocationID; s < gl_NumSubgroups; s += gl_SubgroupSize)
    if (better(bestValue_[s], bestIndex_[s], value, index)) value = bestValue_[s], index = bestIndex_[s];
  subgroupBest(value, index);
  return true;
}

// The invocation that hands the candidates over and writes the token: subgroup 0's first.
bool leads() { return gl_SubgroupInvocationID == 0u; }

// The leader's `last`, in every invocation that goes on (subgroup 0's).
bool fromLeader(bool last) { return subgroupMax(last ? 1u : 0u) != 0u; }

#else
// Without subgroup operations the whole workgroup reduces through shared memory.

// The workgroup's best, in every invocation (through bestValue_[0] and bestIndex_[0]); true for invocation
// 0, and with more than one workgroup for all of them, which hand it over and reduce the scratch together.
bool workgroupBest(inout float value, inout uint index) {
  reduceWorkgroup(value, index);
  value = bestValue_[0], index = bestIndex_[0];
  return gl_LocalInvocationIndex == 0u || GROUPS > 1u;  // more groups: all invocations reduce the scratch
}

bool leads() { return gl_LocalInvocationIndex == 0u; }

shared bool last_;
bool fromLeader(bool last) {
  if (leads()) last_ = last;
  barrier();
  return last_;
}

#endif

// Publishes (value, index) as candidate `slot` (values at `values`, indices at `indices`) and counts it in
// counter `counter` of `expected`; whether this workgroup was the last (which returns the counter to 0).
bool handOver(float value, uint index, uint slot, uint values, uint indices, uint counter, uint expected) {
  bool last = false;
  if (leads()) {
    partial_[values + slot] = value;
    partial_[indices + slot] = float(index);  // exact below 2^24, far above any vocabulary
    memoryBarrierBuffer();
    last = atomicAdd(counters[counter], 1) == int(expected) - 1;
    if (last) atomicExchange(counters[counter], 0);  // ready for the next step
  }
  if (!fromLeader(last)) return false;
  memoryBarrierBuffer();
  return true;
}

// The best of candidates [first, first + count) of the scratch, in every invocation that goes on (subgroup
// 0's, or the workgroup's).
void bestCandidate(uint first, uint count, uint values, uint indices, out float value, out uint index) {
#if SUBGROUP_OPS
  const uint lane = gl_SubgroupInvocationID, lanes = gl_SubgroupSize;
#else
  const uint lane = gl_LocalInvocationIndex, lanes = WORKGROUP;
#endif
  value = NO_VALUE, index = NO_INDEX;
  for (uint c = lane; c < count; c += lanes) {
    float v = partial_[values + first + c];
    uint i = uint(partial_[indices + first + c]);
    if (better(v, i, value, index)) value = v, index = i;
  }
#if SUBGROUP_OPS
  subgroupBest(value, index);
#else
  reduceWorkgroup(value, index);
  value = bestValue_[0], index = bestIndex_[0];
#endif
}

// Every invocation of every workgroup calls it with its own candidate (NO_VALUE, NO_INDEX: none).
// Up to WORKGROUP workgroups hand their candidates to the last of them. More (the logits gemv has one per 8
// rows, ~19000 for a 152k vocabulary) go up a tree: the last of each of SEGMENTS runs of WORKGROUP reduces
// its run's candidates and hands that on, and the last of those reduces the SEGMENTS candidates.
// SEGMENTS = ceil(GROUPS / WORKGROUP), defined by codegen (ArgmaxGrid), which sizes the scratch with it.
void chooseToken(float value, uint index, uint advance) {
  if (!workgroupBest(value, index)) return;
  if (GROUPS > 1u) {
    uint group = gl_WorkGroupID.x;
    if (SEGMENTS == 1u) {
      if (!handOver(value, index, group, 0u, GROUPS, 0u, GROUPS)) return;
      bestCandidate(0u, GROUPS, 0u, GROUPS, value, index);
    } else {
      uint segment = group / WORKGROUP, first = segment * WORKGROUP, count = min(WORKGROUP, GROUPS - first);
      if (!handOver(value, index, group, 0u, GROUPS, 1u + segment, count)) return;
      bestCandidate(first, count, 0u, GROUPS, value, index);
      if (!handOver(value, index, segment, 2u * GROUPS, 2u * GROUPS + SEGMENTS, 0u, SEGMENTS)) return;
      bestCandidate(0u, SEGMENTS, 2u * GROUPS, 2u * GROUPS + SEGMENTS, value, index);
    }
  }
  if (leads()) writeToken(index, advance);
}
