// Rotary embedding, rotate-half form, of HEADS heads of HEAD_DIM; the first ROTARY_DIM dims rotate.
// Grid (T, ceil(HEADS · HEAD_DIM / (WORKGROUP · LOADS)), 1): each invocation rotates LOADS elements of token
// t, their loads (the element and its partner ± ROTARY_DIM / 2) issued together. The angle is position ·
// inv_freq (common.glsl's rotaryCosSin); a workgroup's token has one position, so the workgroup computes
// the HALF cos/sin pairs once, into shared memory.
const uint ROW = HEADS * HEAD_DIM;
const uint HALF = ROTARY_DIM / 2u;
shared vec2 cosSin_[HALF];

void main() {
  uint t = gl_WorkGroupID.x, first = gl_WorkGroupID.y * WORKGROUP * LOADS + gl_LocalInvocationID.x;
  float position = float(state_.position + t);
  for (uint i = gl_LocalInvocationID.x; i < HALF; i += WORKGROUP)
    cosSin_[i] = rotaryCosSin(position, invFreqAt(i)) * ATTENTION_SCALING;
  float values[LOADS], partners[LOADS];
  [[unroll]] for (uint u = 0; u < LOADS; ++u) {
    uint i = min(first + u * WORKGROUP, ROW - 1u), d = i % HEAD_DIM, base = t * ROW + i - d;
    uint partner = d >= ROTARY_DIM ? d : d < HALF ? d + HALF : d - HALF;
    values[u] = load_x(base + d);
    partners[u] = load_x(base + partner);
  }
  barrier();
  [[unroll]] for (uint u = 0; u < LOADS; ++u) {
    uint i = first + u * WORKGROUP, d = i % HEAD_DIM;
    if (i >= ROW) continue;
    float v = values[u];
    if (d < ROTARY_DIM) {
      vec2 cs = cosSin_[d % HALF];
      v = v * cs.x + (d < HALF ? -partners[u] : partners[u]) * cs.y;
    }
    store_result(t * ROW + i, v);
  }
}
