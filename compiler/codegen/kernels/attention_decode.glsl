// Decode attention: the one query token of a step against the cache, split over the cached positions
// (flash-decoding) so that one layer's attention spreads over the GPU at any context length.
// Workgroup (x, split): x is kv head x / HEAD_GROUPS and its QUERY_HEADS query heads (GQA: the group's keys
// and values are read once for all of them); the positions [first, position] are cut into `activeSplits` chunks
// of at least MIN_CHUNK (at most SPLITS), one per split. Each split runs an online softmax over its chunk
// in blocks of WORKGROUP keys (one key per invocation for the scores; one head dim per invocation, every
// query head at once, for the values). With one active split it writes the result; otherwise each split
// writes its partial (max, sum, unnormalised output) to scratch and the last split to finish (an atomic
// counter per x, returned to 0 by that split) combines them. Grid (KV_HEADS * HEAD_GROUPS, SPLITS, 1).
const uint GROUP = HEADS / KV_HEADS;
const uint QH = QUERY_HEADS;
const uint XS = KV_HEADS * HEAD_GROUPS;
const uint DIMS_PER_INVOCATION = (HEAD_DIM + WORKGROUP - 1) / WORKGROUP;
const float NO_SCORE = -3.0e38;

#if D_VEC4
shared vec4 queries_[QH * HEAD_DIM / 4u];
#else
shared float queries_[QH * HEAD_DIM];
#endif
shared float p_[QH][WORKGROUP];
shared float reduced_[QH];
shared float combineMax_[QH], combineSum_[QH];
shared bool last_;
#if SUBGROUP_OPS
shared float partials_[QH][WORKGROUP / MIN_SUBGROUP_SIZE];
#else
shared float partials_[WORKGROUP];
#endif

// The max (or sum) over the workgroup of each head's value, into reduced_ (all invocations must call it).
void reduceHeads(float values[QH], bool isMax) {
  uint tid = gl_LocalInvocationID.x;
#if SUBGROUP_OPS
  [[unroll]] for (uint h = 0; h < QH; ++h) values[h] = isMax ? subgroupMax(values[h]) : subgroupAdd(values[h]);
  if (subgroupElect())
    [[unroll]] for (uint h = 0; h < QH; ++h) partials_[h][gl_SubgroupID] = values[h];
  barrier();
  if (tid < QH) {
    float r = partials_[tid][0];
    for (uint i = 1; i < gl_NumSubgroups; ++i) r = isMax ? max(r, partials_[tid][i]) : r + partials_[tid][i];
    reduced_[tid] = r;
  }
  barrier();
#else
  for (uint h = 0; h < QH; ++h) {
    partials_[tid] = values[h];
    barrier();
    for (uint s = WORKGROUP / 2u; s > 0u; s >>= 1) {
      if (tid < s) partials_[tid] = isMax ? max(partials_[tid], partials_[tid + s]) : partials_[tid] + partials_[tid + s];
      barrier();
    }
    if (tid == 0u) reduced_[h] = partials_[0];
    barrier();
  }
#endif
}

// Scratch layout: [x][split][head][dim] unnormalised outputs, then [x][split][head] maxima, then sums.
uint accIndex(uint x, uint split, uint h, uint d) { return ((x * SPLITS + split) * QH + h) * HEAD_DIM + d; }
uint maxIndex(uint x, uint split, uint h) { return XS * SPLITS * QH * HEAD_DIM + (x * SPLITS + split) * QH + h; }
uint sumIndex(uint x, uint split, uint h) { return maxIndex(x, split, h) + XS * SPLITS * QH; }

void main() {
  uint tid = gl_LocalInvocationID.x, x = gl_WorkGroupID.x, split = gl_WorkGroupID.y;
  uint kvHead = x / HEAD_GROUPS, head0 = kvHead * GROUP + (x % HEAD_GROUPS) * QH;
  uint position = state_.position;
  uint first = (WINDOW > 0u && position + 1u > WINDOW) ? position + 1u - WINDOW : 0u;
  uint len = position + 1u - first;
  uint activeSplits = min(SPLITS, (len + MIN_CHUNK - 1u) / MIN_CHUNK);
  if (split >= activeSplits) return;
  uint chunk = (len + activeSplits - 1u) / activeSplits;
  uint begin = min(first + split * chunk, position + 1u), end = min(begin + chunk, position + 1u);

  for (uint i = tid; i < QH * HEAD_DIM; i += WORKGROUP) {
    float v = load_q(head0 * HEAD_DIM + i) * SCALE;
#if D_VEC4
    queries_[i >> 2][i & 3u] = v;
#else
    queries_[i] = v;
#endif
  }
  barrier();

  float runningMax[QH], runningSum[QH], acc[QH][DIMS_PER_INVOCATION];
  [[unroll]] for (uint h = 0; h < QH; ++h) {
    runningMax[h] = NO_SCORE, runningSum[h] = 0.0;
    [[unroll]] for (uint i = 0; i < DIMS_PER_INVOCATION; ++i) acc[h][i] = 0.0;
  }

  for (uint block = begin; block < end; block += WORKGROUP) {
    uint key = block + tid;
    float score[QH];
    [[unroll]] for (uint h = 0; h < QH; ++h) score[h] = NO_SCORE;
    if (key < end) {
      [[unroll]] for (uint h = 0; h < QH; ++h) score[h] = 0.0;
#if D_VEC4
      uint base = (kvHead * SEQ + key) * (HEAD_DIM / 4u);
      for (uint d = 0; d < HEAD_DIM / 4u; ++d) {
        vec4 k = k_cache_v4[base + d];
        [[unroll]] for (uint h = 0; h < QH; ++h) score[h] += dot(queries_[h * (HEAD_DIM / 4u) + d], k);
      }
#else
      uint base = (kvHead * SEQ + key) * HEAD_DIM;
      for (uint d = 0; d < HEAD_DIM; ++d) {
        float k = load_k_cache(base + d);
        [[unroll]] for (uint h = 0; h < QH; ++h) score[h] += queries_[h * HEAD_DIM + d] * k;
      }
#endif
    }
    reduceHeads(score, true);
    float correction[QH], weight[QH];
    [[unroll]] for (uint h = 0; h < QH; ++h) {
      float newMax = max(runningMax[h], reduced_[h]);
      correction[h] = exp(runningMax[h] - newMax);
      weight[h] = key < end ? exp(score[h] - newMax) : 0.0;
      p_[h][tid] = weight[h];
      runningMax[h] = newMax;
    }
    reduceHeads(weight, false);  // its barriers also publish p_
    uint count = min(WORKGROUP, end - block);
    [[unroll]] for (uint h = 0; h < QH; ++h) runningSum[h] = runningSum[h] * correction[h] + reduced_[h];
    [[unroll]] for (uint i = 0; i < DIMS_PER_INVOCATION; ++i) {
      uint d = tid + i * WORKGROUP;
      if (d < HEAD_DIM) {
        float a[QH];
        [[unroll]] for (uint h = 0; h < QH; ++h) a[h] = acc[h][i] * correction[h];
        for (uint j = 0; j < count; ++j) {
          float v = load_v_cache((kvHead * SEQ + block + j) * HEAD_DIM + d);
          [[unroll]] for (uint h = 0; h < QH; ++h) a[h] += p_[h][j] * v;
        }
        [[unroll]] for (uint h = 0; h < QH; ++h) acc[h][i] = a[h];
      }
    }
    barrier();  // p_ is rewritten by the next block
  }

  if (activeSplits == 1u) {
    [[unroll]] for (uint i = 0; i < DIMS_PER_INVOCATION; ++i) {
      uint d = tid + i * WORKGROUP;
      if (d < HEAD_DIM)
        [[unroll]] for (uint h = 0; h < QH; ++h) store_result((head0 + h) * HEAD_DIM + d, acc[h][i] / runningSum[h]);
    }
    return;
  }

  // Publish this split's partial, then count it in; the last split of x combines.
  [[unroll]] for (uint i = 0; i < DIMS_PER_INVOCATION; ++i) {
    uint d = tid + i * WORKGROUP;
    if (d < HEAD_DIM)
      [[unroll]] for (uint h = 0; h < QH; ++h) partial_[accIndex(x, split, h, d)] = acc[h][i];
  }
  if (tid == 0u)
    [[unroll]] for (uint h = 0; h < QH; ++h) {
      partial_[maxIndex(x, split, h)] = runningMax[h];
      partial_[sumIndex(x, split, h)] = runningSum[h];
    }
  memoryBarrierBuffer();
  barrier();
  if (tid == 0u) last_ = atomicAdd(counters[x], 1) == int(activeSplits) - 1;
  barrier();
  if (!last_) return;
  memoryBarrierBuffer();
  if (tid == 0u) atomicExchange(counters[x], 0);  // ready for the next layer and step
  if (tid < QH) {
    float m = NO_SCORE;
    for (uint s = 0; s < activeSplits; ++s) m = max(m, partial_[maxIndex(x, s, tid)]);
    float total = 0.0;
    for (uint s = 0; s < activeSplits; ++s) total += exp(partial_[maxIndex(x, s, tid)] - m) * partial_[sumIndex(x, s, tid)];
    combineMax_[tid] = m;
    combineSum_[tid] = total;
  }
  barrier();
  [[unroll]] for (uint i = 0; i < DIMS_PER_INVOCATION; ++i) {
    uint d = tid + i * WORKGROUP;
    if (d < HEAD_DIM)
      [[unroll]] for (uint h = 0; h < QH; ++h) {
        float out_ = 0.0;
        for (uint s = 0; s < activeSplits; ++s)
          out_ += exp(partial_[maxIndex(x, s, h)] - combineMax_[h]) * partial_[accIndex(x, s, h, d)];
        store_result((head0 + h) * HEAD_DIM + d, out_ / combineSum_[h]);
      }
  }
}
