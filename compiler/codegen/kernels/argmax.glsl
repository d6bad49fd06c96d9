// The greedy token of the last logits row (ties to the lowest index). One workgroup. Besides its result it
// writes the token into input_ids[0] and the state's token list and advances the position by T, so that a
// recorded decode step can be replayed back to back on the GPU.
shared float bestValue_[WORKGROUP];
shared uint bestIndex_[WORKGROUP];

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint base = (step_.tokens - 1) * VOCAB;
  float best = -3.4e38;
  uint index = 0;
  // UNROLL loads in flight per invocation: the scan is latency-bound (one workgroup, one multiprocessor), and
  // a loop of one load at a time took 0.1 ms for a 128k vocabulary on an H200. Each invocation still visits
  // its indices in increasing order, so a tie keeps the lowest.
  const uint UNROLL = 16u;
  uint i = tid;
  for (; i + (UNROLL - 1u) * WORKGROUP < VOCAB; i += UNROLL * WORKGROUP) {
    float v[UNROLL];
    [[unroll]] for (uint u = 0; u < UNROLL; ++u) v[u] = load_logits(base + i + u * WORKGROUP);
    [[unroll]] for (uint u = 0; u < UNROLL; ++u)
      if (v[u] > best) best = v[u], index = i + u * WORKGROUP;
  }
  for (; i < VOCAB; i += WORKGROUP) {
    float v = load_logits(base + i);
    if (v > best) best = v, index = i;
  }
  bestValue_[tid] = best;
  bestIndex_[tid] = index;
  barrier();
  for (uint s = WORKGROUP / 2; s > 0; s >>= 1) {
    if (tid < s) {
      float other = bestValue_[tid + s];
      uint otherIndex = bestIndex_[tid + s];
      if (other > bestValue_[tid] || (other == bestValue_[tid] && otherIndex < bestIndex_[tid]))
        bestValue_[tid] = other, bestIndex_[tid] = otherIndex;
    }
    barrier();
  }
  if (tid == 0) {
    uint token = bestIndex_[0];
    result[0] = int(token);
    ids[0] = int(token);
    if (state_.generated < SEQ) state_.tokens[state_.generated] = token;
    state_.generated += 1;
    state_.position += step_.tokens;
  }
}
