// Prefill's RoPE of the queries and keys and the cache write of the keys and values as one launch instead
// of three (rope.glsl twice, then kv_append.glsl). Token t's row is Q_HEADS query heads, KV_HEADS key heads
// and KV_HEADS value heads of HEAD_DIM each (in q, k and v); the queries are rotated into result, the keys
// rotated and the values as they are written into the cache at position start + t (layout as in
// kv_append.glsl).
// The row is cut into units of UNIT_DIMS dims: in a query or key head, the HALF / UNIT_DIMS units of dims
// (d, d + HALF) that rotate together, then the (HEAD_DIM - ROTARY_DIM) / UNIT_DIMS that do not rotate; in a
// value head, HEAD_DIM / UNIT_DIMS. So each element is loaded once and each pair's cos/sin computed once.
// UNIT_DIMS is 4 where HALF and HEAD_DIM are multiples of 4 (codegen's ropeUnitDims): a unit is then one
// 16-byte load of each side and one 16-byte (8 with an f16 cache) store, where scalar units took Llama-3-8B's
// 512 tokens 13.0 µs a layer for ~23 MB (H100, 26b2f77); else 1. Grid (T, ceil(UNITS / (WORKGROUP · LOADS)),
// 1): each invocation takes LOADS units, their loads issued together.
#ifndef UNIT_DIMS
#define UNIT_DIMS 1
#endif
#if UNIT_DIMS == 4
#define UnitValue vec4
#else
#define UnitValue float
#endif
const uint Q_ROW = Q_HEADS * HEAD_DIM, KV_ROW = KV_HEADS * HEAD_DIM;
const uint HALF = ROTARY_DIM / 2u, DIMS = uint(UNIT_DIMS);
// A query or key head's units: the rotating pairs, then the unrotated dims.
const uint PAIR_UNITS = HALF / DIMS, QK_UNITS = (HEAD_DIM - HALF) / DIMS;
const uint ROTATED_UNITS = (Q_HEADS + KV_HEADS) * QK_UNITS, UNITS = ROTATED_UNITS + KV_ROW / DIMS;
shared vec2 cosSin_[HALF];  // the workgroup's token's (one position), computed once

// Elements e .. e + UNIT_DIMS - 1 of part 0 (q), 1 (k) or 2 (v) of token t (e a multiple of UNIT_DIMS).
UnitValue loadPart(uint part, uint t, uint e) {
#if UNIT_DIMS == 4
  return part == 0u ? q_v4[(t * Q_ROW + e) / 4u] : part == 1u ? k_v4[(t * KV_ROW + e) / 4u] : v_v4[(t * KV_ROW + e) / 4u];
#else
  return part == 0u ? load_q(t * Q_ROW + e) : part == 1u ? load_k(t * KV_ROW + e) : load_v(t * KV_ROW + e);
#endif
}

// Unit u's part, its first element within the part, and whether UNIT_DIMS more elements (first + HALF)
// rotate with it.
struct Unit {
  uint part, first;
  bool pair;
};
Unit unitOf(uint u) {
  if (u >= ROTATED_UNITS) return Unit(2u, (u - ROTATED_UNITS) * DIMS, false);
  uint head = u / QK_UNITS, w = u % QK_UNITS;
  uint part = head < Q_HEADS ? 0u : 1u, inPart = head < Q_HEADS ? head : head - Q_HEADS;
  return Unit(part, inPart * HEAD_DIM + w * DIMS + (w < PAIR_UNITS ? 0u : HALF), w < PAIR_UNITS);
}

// Elements e .. e + UNIT_DIMS - 1 (within their part) of token t, rotated or not, to the queries or the cache.
void storePart(uint part, uint t, uint position, uint e, UnitValue value) {
  uint slot = ((e / HEAD_DIM) * SEQ + position) * HEAD_DIM + e % HEAD_DIM;
#if UNIT_DIMS == 4
#if CACHE_HALF
  uvec2 cached = uvec2(packHalf2x16(value.xy), packHalf2x16(value.zw));
#else
  vec4 cached = value;
#endif
  if (part == 0u) result_v4[(t * Q_ROW + e) / 4u] = value;
  else if (part == 1u) k_cache_v4[slot / 4u] = cached;
  else v_cache_v4[slot / 4u] = cached;
#else
  if (part == 0u) store_result(t * Q_ROW + e, value);
  else if (part == 1u) store_k_cache(slot, value);
  else store_v_cache(slot, value);
#endif
}

// The cos and sin of the UNIT_DIMS pairs from pair i (< HALF).
void cosSinAt(uint i, out UnitValue c, out UnitValue s) {
#if UNIT_DIMS == 4
  [[unroll]] for (uint j = 0; j < 4u; ++j) c[j] = cosSin_[i + j].x, s[j] = cosSin_[i + j].y;
#else
  c = cosSin_[i].x, s = cosSin_[i].y;
#endif
}

void main() {
  uint t = gl_WorkGroupID.x, first = gl_WorkGroupID.y * WORKGROUP * LOADS + gl_LocalInvocationID.x;
  uint position = state_.position + t;
  for (uint i = gl_LocalInvocationID.x; i < HALF; i += WORKGROUP)
    cosSin_[i] = rotaryCosSin(float(position), invFreqAt(i)) * ATTENTION_SCALING;
  UnitValue values[LOADS], partners[LOADS];
  [[unroll]] for (uint u = 0; u < LOADS; ++u) {
    Unit unit = unitOf(min(first + u * WORKGROUP, UNITS - 1u));
    values[u] = loadPart(unit.part, t, unit.first);
    partners[u] = unit.pair ? loadPart(unit.part, t, unit.first + HALF) : UnitValue(0.0);
  }
  barrier();
  [[unroll]] for (uint u = 0; u < LOADS; ++u) {
    if (first + u * WORKGROUP >= UNITS) continue;
    Unit unit = unitOf(first + u * WORKGROUP);
    if (unit.pair) {
      UnitValue c, s;
      cosSinAt(unit.first % HEAD_DIM, c, s);
      storePart(unit.part, t, position, unit.first, values[u] * c - partners[u] * s);
      storePart(unit.part, t, position, unit.first + HALF, partners[u] * c + values[u] * s);
    } else {
      storePart(unit.part, t, position, unit.first, values[u]);
    }
  }
}
