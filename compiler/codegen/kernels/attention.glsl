// Causal grouped-query attention with an online softmax: one workgroup per (head, query). Keys are
// visited in blocks of WORKGROUP (one per invocation), so no T×T score matrix is ever stored.
// Grid (HEADS, T, 1).
shared float query_[HEAD_DIM];
shared float weights_[WORKGROUP];
const uint DIMS_PER_INVOCATION = (HEAD_DIM + WORKGROUP - 1) / WORKGROUP;

void main() {
  uint head = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
  uint kvHead = head / (HEADS / KV_HEADS);
  uint position = state_.position + t;
  uint first = (WINDOW > 0 && position + 1 > WINDOW) ? position + 1 - WINDOW : 0;
  uint qBase = t * HEADS * HEAD_DIM + head * HEAD_DIM;
  for (uint d = tid; d < HEAD_DIM; d += WORKGROUP) query_[d] = load_q(qBase + d) * SCALE;
  barrier();

  float runningMax = -3.0e38, runningSum = 0.0;
  float acc[DIMS_PER_INVOCATION];
  [[unroll]] for (uint i = 0; i < DIMS_PER_INVOCATION; ++i) acc[i] = 0.0;

  for (uint block = first; block <= position; block += WORKGROUP) {
    uint key = block + tid;
    float score = -3.0e38;
    if (key <= position) {
      uint kBase = (kvHead * SEQ + key) * HEAD_DIM;
      score = 0.0;
      for (uint d = 0; d < HEAD_DIM; ++d) score += query_[d] * load_k_cache(kBase + d);
    }
    float newMax = max(runningMax, workgroupMax(score));
    float weight = key <= position ? exp(score - newMax) : 0.0;
    weights_[tid] = weight;
    float correction = exp(runningMax - newMax);
    runningSum = runningSum * correction + workgroupSum(weight);  // its barrier also publishes weights_
    uint count = min(uint(WORKGROUP), position + 1 - block);
    [[unroll]] for (uint i = 0; i < DIMS_PER_INVOCATION; ++i) {
      uint d = tid + i * WORKGROUP;
      if (d < HEAD_DIM) {
        float a = acc[i] * correction;
        for (uint j = 0; j < count; ++j) a += weights_[j] * load_v_cache((kvHead * SEQ + block + j) * HEAD_DIM + d);
        acc[i] = a;
      }
    }
    runningMax = newMax;
    barrier();
  }
  [[unroll]] for (uint i = 0; i < DIMS_PER_INVOCATION; ++i) {
    uint d = tid + i * WORKGROUP;
    if (d < HEAD_DIM) store_result(qBase + d, acc[i] / runningSum);
  }
}
