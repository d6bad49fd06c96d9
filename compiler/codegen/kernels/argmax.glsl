// The greedy token of the last logits row, as a launch of its own (argmax_combine.glsl chooses it across
// workgroups and writes it, with the state).
// Grid (GROUPS, 1, 1): workgroup g takes the SPAN logits from g · SPAN, every invocation LOADS of them with
// their loads issued together (one workgroup scanning a 128k vocabulary was a chain of dependent loads, 24 µs
// on an H200).
const uint SPAN = WORKGROUP * LOADS;

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
  chooseToken(best, index, step_.tokens);
}
