// Rotary embedding, rotate-half form, of HEADS heads of HEAD_DIM; the first ROTARY_DIM dims rotate.
// Grid (T, 1, 1). The angle is position · inv_freq (common.glsl's rotaryCosSin).
const float INV_FREQ[ROTARY_DIM / 2] = float[](INV_FREQ_VALUES);

void main() {
  uint t = gl_WorkGroupID.x;
  float position = float(state_.position + t);
  for (uint i = gl_LocalInvocationID.x; i < HEADS * HEAD_DIM; i += WORKGROUP) {
    uint base = t * HEADS * HEAD_DIM + (i / HEAD_DIM) * HEAD_DIM;
    uint d = i % HEAD_DIM;
    if (d >= ROTARY_DIM) {
      store_result(base + d, load_x(base + d));
      continue;
    }
    const uint half_ = ROTARY_DIM / 2;
    vec2 cs = rotaryCosSin(position, INV_FREQ[d % half_]) * ATTENTION_SCALING;
    float c = cs.x, s = cs.y;
    float v = load_x(base + d);
    float rotated = d < half_ ? -load_x(base + d + half_) : load_x(base + d - half_);
    store_result(base + d, v * c + rotated * s);
  }
}
