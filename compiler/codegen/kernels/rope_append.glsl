// Prefill's RoPE of the queries and keys and the cache write of the keys and values as one launch instead
// of three (rope.glsl twice, then kv_append.glsl). Token t's row is Q_HEADS query heads, KV_HEADS key heads
// and KV_HEADS value heads of HEAD_DIM each (in q, k and v); the queries are rotated into result, the keys
// rotated and the values as they are written into the cache at position start + t (layout as in
// kv_append.glsl).
// The row is cut into units: in a query or key head, the HALF pairs of dims (d, d + HALF) that rotate
// together, then the HEAD_DIM - ROTARY_DIM dims that do not rotate; in a value head, each dim. So each
// element is loaded once and each pair's cos/sin computed once. Grid (T, ceil(UNITS / (WORKGROUP · LOADS)),
// 1): each invocation takes LOADS units, their loads issued together.
const uint Q_ROW = Q_HEADS * HEAD_DIM, KV_ROW = KV_HEADS * HEAD_DIM;
const uint HALF = ROTARY_DIM / 2u;
const uint QK_UNITS = HEAD_DIM - HALF;  // a query or key head's: HALF pairs, then the unrotated dims
const uint ROTATED_UNITS = (Q_HEADS + KV_HEADS) * QK_UNITS, UNITS = ROTATED_UNITS + KV_ROW;
shared vec2 cosSin_[HALF];  // the workgroup's token's (one position), computed once

// Element e of part 0 (q), 1 (k) or 2 (v) of token t.
float loadPart(uint part, uint t, uint e) {
  return part == 0u ? load_q(t * Q_ROW + e) : part == 1u ? load_k(t * KV_ROW + e) : load_v(t * KV_ROW + e);
}

// Unit u's part, its first element within the part, and whether a second element (first + HALF) rotates
// with it.
struct Unit {
  uint part, first;
  bool pair;
};
Unit unitOf(uint u) {
  if (u >= ROTATED_UNITS) return Unit(2u, u - ROTATED_UNITS, false);
  uint head = u / QK_UNITS, w = u % QK_UNITS;
  uint part = head < Q_HEADS ? 0u : 1u, inPart = head < Q_HEADS ? head : head - Q_HEADS;
  return Unit(part, inPart * HEAD_DIM + (w < HALF ? w : w + HALF), w < HALF);
}

// Element e (within its part) of token t, rotated or not, to the queries or the cache.
void storePart(uint part, uint t, uint position, uint e, float value) {
  if (part == 0u) {
    store_result(t * Q_ROW + e, value);
  } else {
    uint slot = ((e / HEAD_DIM) * SEQ + position) * HEAD_DIM + e % HEAD_DIM;
    if (part == 1u) store_k_cache(slot, value);
    else store_v_cache(slot, value);
  }
}

void main() {
  uint t = gl_WorkGroupID.x, first = gl_WorkGroupID.y * WORKGROUP * LOADS + gl_LocalInvocationID.x;
  uint position = state_.position + t;
  for (uint i = gl_LocalInvocationID.x; i < HALF; i += WORKGROUP)
    cosSin_[i] = rotaryCosSin(float(position), invFreqAt(i)) * ATTENTION_SCALING;
  float values[LOADS], partners[LOADS];
  [[unroll]] for (uint u = 0; u < LOADS; ++u) {
    Unit unit = unitOf(min(first + u * WORKGROUP, UNITS - 1u));
    values[u] = loadPart(unit.part, t, unit.first);
    partners[u] = unit.pair ? loadPart(unit.part, t, unit.first + HALF) : 0.0;
  }
  barrier();
  [[unroll]] for (uint u = 0; u < LOADS; ++u) {
    if (first + u * WORKGROUP >= UNITS) continue;
    Unit unit = unitOf(first + u * WORKGROUP);
    if (unit.pair) {
      vec2 cs = cosSin_[unit.first % HEAD_DIM];
      storePart(unit.part, t, position, unit.first, values[u] * cs.x - partners[u] * cs.y);
      storePart(unit.part, t, position, unit.first + HALF, partners[u] * cs.x + values[u] * cs.y);
    } else {
      storePart(unit.part, t, position, unit.first, values[u]);
    }
  }
}
