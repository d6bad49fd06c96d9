// The one-token matmul that decode steps run: gerbil.linear, and the grouped projections (q/k/v, gate/up)
// with their epilogues. Reading the weights is the whole cost, so:
//  - each workgroup computes SLOTS dot products; its invocations stride over K with 16-byte loads (8 f16 or
//    bf16, or 4 f32 weights; VEC_LOADS) so that consecutive invocations read consecutive bytes of a row, and
//    every invocation has one load per slot in flight;
//  - the input row is staged in shared memory once per workgroup, X_TILE floats at a time, multiplied by the
//    norm weight when an RMSNorm is fused in (NORM_PROLOGUE); its 1/rms multiplies the sums at the end;
//  - the sums are reduced with subgroupAdd (SUBGROUP_OPS), then across subgroups through shared memory.
// Modes, by what the slots are and where the sums go (grid (WORKGROUPS, 1, 1)):
//   MODE_SINGLE   slot s: row ROWS * group + s of w; result[row] (+ residual[row] with RESIDUAL).
//   MODE_GATE_UP  slots [0, ROWS): rows ROWS * group + s of w_gate, slots [ROWS, 2 ROWS) the same rows of
//                 w_up; result[row] = act(gate + bias_gate) * (up + bias_up).
//   MODE_QKV      workgroups [0, GROUPS_Q) take rows of w_q, the next GROUPS_K of w_k, the last GROUPS_V of
//                 w_v; sums (+ bias) go to result_q, result_k, result_v, or with ROPE rotated (q, k) and with
//                 KV_WRITE into the KV cache (k, v) at the step's position. For rotated parts a workgroup's
//                 slots are pairs of rows that rotate together (d, d + ROTARY_DIM / 2), so the rotation needs
//                 nothing from other workgroups.
#if W_PACKED16
const uint PER_LOAD = 8u;
float dot8(uvec4 w, vec4 xa, vec4 xb) {
#if W_BF16
  vec4 lo = vec4(uintBitsToFloat(w.x << 16), uintBitsToFloat(w.y << 16), uintBitsToFloat(w.z << 16), uintBitsToFloat(w.w << 16));
  vec4 hi = vec4(uintBitsToFloat(w.x & 0xffff0000u), uintBitsToFloat(w.y & 0xffff0000u),
                 uintBitsToFloat(w.z & 0xffff0000u), uintBitsToFloat(w.w & 0xffff0000u));
  // lo holds elements 0, 2, 4, 6 and hi 1, 3, 5, 7.
  return dot(lo, vec4(xa.x, xa.z, xb.x, xb.z)) + dot(hi, vec4(xa.y, xa.w, xb.y, xb.w));
#else
  vec2 a = unpackHalf2x16(w.x), b = unpackHalf2x16(w.y), c = unpackHalf2x16(w.z), d = unpackHalf2x16(w.w);
  return dot(vec4(a, b), xa) + dot(vec4(c, d), xb);
#endif
}
#define DOT_LOAD(W, row, k) dot8(W[(row) * (K / 8u) + (k)], xs_[2u * (k - kTile)], xs_[2u * (k - kTile) + 1u])
#else
const uint PER_LOAD = 4u;
#define DOT_LOAD(W, row, k) dot(W[(row) * (K / 4u) + (k)], xs_[k - kTile])
#endif

shared vec4 xs_[(X_TILE + 3u) / 4u];
// Slot SLOTS carries the input's sum of squares (the norm prologue).
shared float totals_[SLOTS + 1u];
#if SUBGROUP_OPS
shared float partials_[SLOTS + 1u][WORKGROUP / MIN_SUBGROUP_SIZE];
#else
shared float partials_[WORKGROUP];
#endif

float sumSquares = 0.0;

// Copies x[tile0, tile0 + len) into xs_ (times the norm weight), adding to sumSquares.
void stage(uint tile0, uint len) {
  barrier();  // every invocation is done with the previous tile
#if X_VEC4
  for (uint i = gl_LocalInvocationID.x; i < len / 4u; i += WORKGROUP) {
    vec4 v = x_v4[tile0 / 4u + i];
#if NORM_PROLOGUE
    sumSquares += dot(v, v);
    v *= g_v4[tile0 / 4u + i];
#endif
    xs_[i] = v;
  }
#else
  for (uint i = gl_LocalInvocationID.x; i < len; i += WORKGROUP) {
    float v = load_x(tile0 + i);
#if NORM_PROLOGUE
    sumSquares += v * v;
    v *= load_g(tile0 + i);
#endif
    xs_[i >> 2][i & 3u] = v;
  }
#endif
  barrier();
}

// Sums every invocation's values into totals_ (all invocations must call it).
void reduce(float values[SLOTS + 1u]) {
  uint tid = gl_LocalInvocationID.x;
#if SUBGROUP_OPS
  [[unroll]] for (uint s = 0; s <= SLOTS; ++s) values[s] = subgroupAdd(values[s]);
  if (subgroupElect())
    [[unroll]] for (uint s = 0; s <= SLOTS; ++s) partials_[s][gl_SubgroupID] = values[s];
  barrier();
  if (tid <= SLOTS) {
    float total = 0.0;
    for (uint i = 0; i < gl_NumSubgroups; ++i) total += partials_[tid][i];
    totals_[tid] = total;
  }
  barrier();
#else
  for (uint s = 0; s <= SLOTS; ++s) {
    partials_[tid] = values[s];
    barrier();
    for (uint half_ = WORKGROUP / 2u; half_ > 0u; half_ >>= 1) {
      if (tid < half_) partials_[tid] += partials_[tid + half_];
      barrier();
    }
    if (tid == 0u) totals_[s] = partials_[0];
    barrier();
  }
#endif
}

#if MODE_GATE_UP
float activation(float x) {
#if ACT_SILU
  return x / (1.0 + exp(-x));
#elif GELU_TANH
  // As elementwise.glsl: the argument is clamped, tanh saturates long before.
  float inner = clamp(0.7978845608028654 * (x + 0.044715 * x * x * x), -15.0, 15.0);
  return 0.5 * x * (1.0 + tanh(inner));
#else
  // erf by Abramowitz and Stegun 7.1.26, as elementwise.glsl.
  float z = abs(x) * 0.7071067811865476;
  float k = 1.0 / (1.0 + 0.3275911 * z);
  float poly = k * (0.254829592 + k * (-0.284496736 + k * (1.421413741 + k * (-1.453152027 + k * 1.061405429))));
  float erfz = 1.0 - poly * exp(-z * z);
  return 0.5 * x * (1.0 + sign(x) * erfz);
#endif
}
#endif

#if MODE_QKV && ROPE
const float INV_FREQ[ROTARY_DIM / 2u] = float[](INV_FREQ_VALUES);
const uint PAIRS_PER_HEAD = HEAD_DIM / 2u;

// Rows (first, second) of rotary pair p of a rotated part: the pairs (i, i + ROTARY_DIM / 2) of each head,
// then its unrotated dims two by two.
uvec2 pairRows(uint p) {
  uint head = p / PAIRS_PER_HEAD, i = p % PAIRS_PER_HEAD;
  uint a = i < ROTARY_DIM / 2u ? i : ROTARY_DIM + 2u * (i - ROTARY_DIM / 2u);
  uint b = i < ROTARY_DIM / 2u ? i + ROTARY_DIM / 2u : a + 1u;
  return uvec2(head * HEAD_DIM + a, head * HEAD_DIM + b);
}

// As rope.glsl: the angle in f32, reduced to [-pi, pi] in two steps.
vec2 rotation(uint i) {
  float angle = float(state_.position) * INV_FREQ[i];
  float turns = floor(angle * 0.15915494309189535 + 0.5);
  float reduced = (angle - turns * 6.28125) - turns * 0.0019353071795864769;
  return vec2(cos(reduced), sin(reduced)) * ATTENTION_SCALING;
}
#endif

#if MODE_QKV
// Where row `row` of part `part` (0 q, 1 k, 2 v) goes.
void storeRow(uint part, uint row, float v) {
  if (part == 0u) store_result_q(row, v);
#if KV_WRITE
  else if (part == 1u) store_k_cache(((row / HEAD_DIM) * SEQ + state_.position) * HEAD_DIM + row % HEAD_DIM, v);
  else store_v_cache(((row / HEAD_DIM) * SEQ + state_.position) * HEAD_DIM + row % HEAD_DIM, v);
#else
  else if (part == 1u) store_result_k(row, v);
  else store_result_v(row, v);
#endif
}

float biasOf(uint part, uint row) {
  float b = 0.0;
#if BIAS_Q
  if (part == 0u) b = load_bias_q(row);
#endif
#if BIAS_K
  if (part == 1u) b = load_bias_k(row);
#endif
#if BIAS_V
  if (part == 2u) b = load_bias_v(row);
#endif
  return b;
}
#endif

void main() {
  uint tid = gl_LocalInvocationID.x, group = gl_WorkGroupID.x;

  // The weight row of each slot, and whether it exists.
  uint rowOf[SLOTS];
  bool live[SLOTS];
#if MODE_SINGLE
  [[unroll]] for (uint s = 0; s < SLOTS; ++s) rowOf[s] = group * SLOTS + s, live[s] = rowOf[s] < N;
#elif MODE_GATE_UP
  [[unroll]] for (uint s = 0; s < SLOTS; ++s) {
    rowOf[s] = group * ROWS + s % ROWS;
    live[s] = rowOf[s] < N;
  }
#else
  uint part = group < GROUPS_Q ? 0u : group < GROUPS_Q + GROUPS_K ? 1u : 2u;
  uint local = group - (part == 0u ? 0u : part == 1u ? GROUPS_Q : GROUPS_Q + GROUPS_K);
  uint partRows = part == 0u ? N_Q : part == 1u ? N_K : N_V;
  bool rotated = ROPE != 0 && part < 2u;
  [[unroll]] for (uint s = 0; s < SLOTS; ++s) {
#if ROPE
    if (rotated) {
      uint p = local * (SLOTS / 2u) + s / 2u;
      live[s] = p < partRows / 2u;
      uvec2 rows = pairRows(live[s] ? p : 0u);
      rowOf[s] = (s & 1u) == 0u ? rows.x : rows.y;
      continue;
    }
#endif
    rowOf[s] = local * SLOTS + s;
    live[s] = rowOf[s] < partRows;
  }
#endif

  float acc[SLOTS + 1u];
  [[unroll]] for (uint s = 0; s <= SLOTS; ++s) acc[s] = 0.0;

  for (uint tile0 = 0; tile0 < K; tile0 += X_TILE) {
    uint len = min(X_TILE, K - tile0);
    stage(tile0, len);
#if VEC_LOADS
    uint kTile = tile0 / PER_LOAD;
    for (uint k = kTile + tid; k < kTile + len / PER_LOAD; k += WORKGROUP) {
#if MODE_SINGLE
      [[unroll]] for (uint s = 0; s < SLOTS; ++s)
        if (live[s]) acc[s] += DOT_LOAD(w_v4, rowOf[s], k);
#elif MODE_GATE_UP
      [[unroll]] for (uint s = 0; s < ROWS; ++s)
        if (live[s]) {
          acc[s] += DOT_LOAD(w_gate_v4, rowOf[s], k);
          acc[ROWS + s] += DOT_LOAD(w_up_v4, rowOf[s], k);
        }
#else
      if (part == 0u) {
        [[unroll]] for (uint s = 0; s < SLOTS; ++s)
          if (live[s]) acc[s] += DOT_LOAD(w_q_v4, rowOf[s], k);
      } else if (part == 1u) {
        [[unroll]] for (uint s = 0; s < SLOTS; ++s)
          if (live[s]) acc[s] += DOT_LOAD(w_k_v4, rowOf[s], k);
      } else {
        [[unroll]] for (uint s = 0; s < SLOTS; ++s)
          if (live[s]) acc[s] += DOT_LOAD(w_v_v4, rowOf[s], k);
      }
#endif
    }
#else
    // Rows that are not 16-byte aligned: one weight at a time.
    for (uint k = tid; k < len; k += WORKGROUP) {
      float x = xs_[k >> 2][k & 3u];
      uint kk = tile0 + k;
#if MODE_SINGLE
      [[unroll]] for (uint s = 0; s < SLOTS; ++s)
        if (live[s]) acc[s] += load_w(rowOf[s] * K + kk) * x;
#elif MODE_GATE_UP
      [[unroll]] for (uint s = 0; s < ROWS; ++s)
        if (live[s]) {
          acc[s] += load_w_gate(rowOf[s] * K + kk) * x;
          acc[ROWS + s] += load_w_up(rowOf[s] * K + kk) * x;
        }
#else
      [[unroll]] for (uint s = 0; s < SLOTS; ++s)
        if (live[s]) {
          float w = part == 0u ? load_w_q(rowOf[s] * K + kk)
                  : part == 1u ? load_w_k(rowOf[s] * K + kk) : load_w_v(rowOf[s] * K + kk);
          acc[s] += w * x;
        }
#endif
    }
#endif
  }
  acc[SLOTS] = sumSquares;
  reduce(acc);
#if NORM_PROLOGUE
  float scale = inversesqrt(totals_[SLOTS] / float(K) + EPS);
#else
  float scale = 1.0;
#endif

#if MODE_SINGLE
  if (tid < SLOTS && live[tid]) {
    float v = totals_[tid] * scale;
#if RESIDUAL
    v += load_residual(rowOf[tid]);
#endif
    store_result(rowOf[tid], v);
  }
#elif MODE_GATE_UP
  if (tid < ROWS && live[tid]) {
    uint row = rowOf[tid];
    float gate = totals_[tid] * scale, up = totals_[ROWS + tid] * scale;
#if BIAS_GATE
    gate += load_bias_gate(row);
#endif
#if BIAS_UP
    up += load_bias_up(row);
#endif
    store_result(row, activation(gate) * up);
  }
#else
#if ROPE
  if (rotated) {
    uint p = local * (SLOTS / 2u) + tid;
    if (tid < SLOTS / 2u && p < partRows / 2u) {
      uvec2 rows = pairRows(p);
      float a = totals_[2u * tid] * scale + biasOf(part, rows.x);
      float b = totals_[2u * tid + 1u] * scale + biasOf(part, rows.y);
      uint i = p % PAIRS_PER_HEAD;
      if (i < ROTARY_DIM / 2u) {
        vec2 cs = rotation(i);
        float ra = a * cs.x - b * cs.y, rb = b * cs.x + a * cs.y;
        a = ra, b = rb;
      }
      storeRow(part, rows.x, a);
      storeRow(part, rows.y, b);
    }
    return;
  }
#endif
  if (tid < SLOTS && live[tid]) storeRow(part, rowOf[tid], totals_[tid] * scale + biasOf(part, rowOf[tid]));
#endif
}
