// Writes the keys and values of token t into the cache at position start_position + t. The cache of one
// layer is [kv head][position][head dim] (LHSd, SEQ positions). Grid (T, 1, 1).
void main() {
  uint t = gl_WorkGroupID.x;
  uint position = state_.position + t;
  for (uint i = gl_LocalInvocationID.x; i < KV_HEADS * HEAD_DIM; i += WORKGROUP) {
    uint slot = ((i / HEAD_DIM) * SEQ + position) * HEAD_DIM + i % HEAD_DIM;
    store_k_cache(slot, load_k(t * KV_HEADS * HEAD_DIM + i));
    store_v_cache(slot, load_v(t * KV_HEADS * HEAD_DIM + i));
  }
}
