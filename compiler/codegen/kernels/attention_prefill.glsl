// Causal grouped-query attention for prefill, flash-attention style: each workgroup takes Q_TILE queries of
// one head and walks the keys up to its last query in tiles of KV_TILE, staging each tile's keys and values
// in shared memory once for all its queries, with an online softmax per query. No T×T score matrix is
// stored; only a Q_TILE × KV_TILE tile of probabilities lives in shared memory.
// Grid (HEADS, ceil(T / Q_TILE), 1); WORKGROUP = Q_TILE · LANES invocations, LANES of them per query: each
// scores KV_TILE / LANES keys of a tile and accumulates every LANES-th dimension of the output.
const uint LANES = WORKGROUP / Q_TILE;
const uint KEYS_PER_LANE = KV_TILE / LANES;
const uint DIMS_PER_LANE = (HEAD_DIM + LANES - 1) / LANES;
const float NO_SCORE = -3.0e38;

shared float query_[Q_TILE][HEAD_DIM];
shared float keys_[KV_TILE][HEAD_DIM + 1];  // padded: the lanes of a query read different keys' rows
shared float values_[KV_TILE][HEAD_DIM];
shared float probabilities_[Q_TILE][KV_TILE];
shared float laneMax_[Q_TILE][LANES];
shared float laneSum_[Q_TILE][LANES];

void main() {
  uint head = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
  uint kvHead = head / (HEADS / KV_HEADS);
  uint t0 = gl_WorkGroupID.y * Q_TILE;
  uint row = tid / LANES, lane = tid % LANES;
  uint t = t0 + row;
  bool queryPresent = t < step_.tokens;
  uint position = state_.position + t;
  // Keys this query may see: [first, position] (a sliding window starts later).
  uint first = (WINDOW > 0 && position + 1 > WINDOW) ? position + 1 - WINDOW : 0;
  // Keys any query of the tile may see: the loop bounds, the same for every invocation.
  uint tileFirstPosition = state_.position + t0;
  uint tileFirst = (WINDOW > 0 && tileFirstPosition + 1 > WINDOW) ? tileFirstPosition + 1 - WINDOW : 0;
  uint tileLast = state_.position + min(t0 + Q_TILE, step_.tokens) - 1;

  for (uint i = tid; i < Q_TILE * HEAD_DIM; i += WORKGROUP) {
    uint r = i / HEAD_DIM, d = i % HEAD_DIM;
    query_[r][d] = t0 + r < step_.tokens ? load_q((t0 + r) * HEADS * HEAD_DIM + head * HEAD_DIM + d) * SCALE : 0.0;
  }

  float runningMax = NO_SCORE, runningSum = 0.0;
  float acc[DIMS_PER_LANE];
  [[unroll]] for (uint i = 0; i < DIMS_PER_LANE; ++i) acc[i] = 0.0;

  for (uint block = tileFirst; block <= tileLast; block += KV_TILE) {
    barrier();  // the previous tile has been consumed (the first time: query_ is written)
    for (uint i = tid; i < KV_TILE * HEAD_DIM; i += WORKGROUP) {
      uint j = i / HEAD_DIM, d = i % HEAD_DIM;
      bool present = block + j <= tileLast;
      uint at = (kvHead * SEQ + block + j) * HEAD_DIM + d;
      keys_[j][d] = present ? load_k_cache(at) : 0.0;
      values_[j][d] = present ? load_v_cache(at) : 0.0;
    }
    barrier();

    float scores[KEYS_PER_LANE];
    float tileMax = NO_SCORE;
    [[unroll]] for (uint i = 0; i < KEYS_PER_LANE; ++i) {
      uint j = lane + i * LANES, key = block + j;
      float score = NO_SCORE;
      if (queryPresent && key >= first && key <= position) {
        score = 0.0;
        for (uint d = 0; d < HEAD_DIM; ++d) score += query_[row][d] * keys_[j][d];
      }
      scores[i] = score;
      tileMax = max(tileMax, score);
    }
    laneMax_[row][lane] = tileMax;
    barrier();
    float newMax = runningMax;
    for (uint l = 0; l < LANES; ++l) newMax = max(newMax, laneMax_[row][l]);
    float sum = 0.0;
    [[unroll]] for (uint i = 0; i < KEYS_PER_LANE; ++i) {
      float p = scores[i] > NO_SCORE ? exp(scores[i] - newMax) : 0.0;
      probabilities_[row][lane + i * LANES] = p;
      sum += p;
    }
    laneSum_[row][lane] = sum;
    barrier();
    float correction = exp(runningMax - newMax);
    float tileSum = 0.0;
    for (uint l = 0; l < LANES; ++l) tileSum += laneSum_[row][l];
    runningSum = runningSum * correction + tileSum;
    [[unroll]] for (uint i = 0; i < DIMS_PER_LANE; ++i) {
      uint d = lane + i * LANES;
      if (d < HEAD_DIM) {
        float a = acc[i] * correction;
        for (uint j = 0; j < KV_TILE; ++j) a += probabilities_[row][j] * values_[j][d];
        acc[i] = a;
      }
    }
    runningMax = newMax;
  }
  if (!queryPresent) return;
  uint base = t * HEADS * HEAD_DIM + head * HEAD_DIM;
  [[unroll]] for (uint i = 0; i < DIMS_PER_LANE; ++i) {
    uint d = lane + i * LANES;
    if (d < HEAD_DIM) store_result(base + d, acc[i] / runningSum);
  }
}
