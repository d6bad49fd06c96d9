// Rotary embedding, rotate-half form, of HEADS heads of HEAD_DIM; the first ROTARY_DIM dims rotate.
// Grid (T, 1, 1). The angle is position · inv_freq in f32 as in transformers, reduced to [-pi, pi] in two
// steps so that cos and sin stay accurate for long positions on drivers with fast approximations.
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
    float angle = position * INV_FREQ[d % half_];
    float turns = floor(angle * 0.15915494309189535 + 0.5);
    float reduced = (angle - turns * 6.28125) - turns * 0.0019353071795864769;
    float c = cos(reduced) * ATTENTION_SCALING, s = sin(reduced) * ATTENTION_SCALING;
    float v = load_x(base + d);
    float rotated = d < half_ ? -load_x(base + d + half_) : load_x(base + d - half_);
    store_result(base + d, v * c + rotated * s);
  }
}
