// Prefill's RoPE of the queries and keys and the cache write of the keys and values as one launch instead
// of three (rope.glsl twice, then kv_append.glsl). Token t's row is Q_HEADS query heads, KV_HEADS key heads
// and KV_HEADS value heads of HEAD_DIM each (in q, k and v); the queries are rotated into result, the keys
// rotated and the values as they are written into the cache at position start + t (layout as in
// kv_append.glsl). Grid (T, ceil(ROW / (WORKGROUP · LOADS)), 1): each invocation takes LOADS elements of the
// row, their loads (the element and its rotation partner) issued together.
const float INV_FREQ[ROTARY_DIM / 2] = float[](INV_FREQ_VALUES);
const uint Q_ROW = Q_HEADS * HEAD_DIM, KV_ROW = KV_HEADS * HEAD_DIM, ROW = Q_ROW + 2u * KV_ROW;
const uint HALF = ROTARY_DIM / 2u;

// Element e of part 0 (q), 1 (k) or 2 (v) of token t.
float loadPart(uint part, uint t, uint e) {
  return part == 0u ? load_q(t * Q_ROW + e) : part == 1u ? load_k(t * KV_ROW + e) : load_v(t * KV_ROW + e);
}

// The part of row element i and the element's index within it.
uvec2 partOf(uint i) {
  return i < Q_ROW ? uvec2(0u, i) : i < Q_ROW + KV_ROW ? uvec2(1u, i - Q_ROW) : uvec2(2u, i - Q_ROW - KV_ROW);
}

void main() {
  uint t = gl_WorkGroupID.x, first = gl_WorkGroupID.y * WORKGROUP * LOADS + gl_LocalInvocationID.x;
  uint position = state_.position + t;
  float values[LOADS], partners[LOADS];
  [[unroll]] for (uint u = 0; u < LOADS; ++u) {
    uvec2 pe = partOf(min(first + u * WORKGROUP, ROW - 1u));
    uint d = pe.y % HEAD_DIM, partner = d >= ROTARY_DIM ? d : d < HALF ? d + HALF : d - HALF;
    values[u] = loadPart(pe.x, t, pe.y);
    partners[u] = pe.x < 2u ? loadPart(pe.x, t, pe.y - d + partner) : 0.0;
  }
  [[unroll]] for (uint u = 0; u < LOADS; ++u) {
    uint i = first + u * WORKGROUP;
    if (i >= ROW) continue;
    uvec2 pe = partOf(i);
    uint d = pe.y % HEAD_DIM;
    float v = values[u];
    if (pe.x < 2u && d < ROTARY_DIM) {
      vec2 cs = rotaryCosSin(float(position), INV_FREQ[d % HALF]) * ATTENTION_SCALING;
      v = v * cs.x + (d < HALF ? -partners[u] : partners[u]) * cs.y;
    }
    if (pe.x == 0u) {
      store_result(t * Q_ROW + pe.y, v);
    } else {
      uint slot = ((pe.y / HEAD_DIM) * SEQ + position) * HEAD_DIM + d;
      if (pe.x == 1u) store_k_cache(slot, v);
      else store_v_cache(slot, v);
    }
  }
}
