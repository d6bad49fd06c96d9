// Writes the keys and values of token t into the cache at position start_position + t. The cache of one
// layer is [kv head][position][head dim] (LHSd, SEQ positions). Grid (T, ceil(KV_HEADS · HEAD_DIM /
// (WORKGROUP · LOADS)), 1): each invocation copies LOADS elements of both, their loads issued together.
const uint ROW = KV_HEADS * HEAD_DIM;

void main() {
  uint t = gl_WorkGroupID.x, first = gl_WorkGroupID.y * WORKGROUP * LOADS + gl_LocalInvocationID.x;
  uint position = state_.position + t;
  float keys[LOADS], values[LOADS];
  [[unroll]] for (uint u = 0; u < LOADS; ++u) {
    uint i = min(first + u * WORKGROUP, ROW - 1u);
    keys[u] = load_k(t * ROW + i);
    values[u] = load_v(t * ROW + i);
  }
  [[unroll]] for (uint u = 0; u < LOADS; ++u) {
    uint i = first + u * WORKGROUP;
    if (i >= ROW) continue;
    uint slot = ((i / HEAD_DIM) * SEQ + position) * HEAD_DIM + i % HEAD_DIM;
    store_k_cache(slot, keys[u]);
    store_v_cache(slot, values[u]);
  }
}
