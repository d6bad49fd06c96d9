// Samples the next token of a logits row on the GPU, so that sampling decodes in replayed batches like
// greedy decoding: the repetition penalty, temperature, top-k, top-p (over the top-k), min-p and a seeded
// draw, in five launches (STAGE 0 to 4) over GROUPS workgroups of SPAN logits each. In each, the last
// workgroup to finish (a counter) combines what the others published and leaves the next launch its
// results in `work`.
//   0: the largest penalised logit (the token itself when greedy: temperature 0 with a penalty);
//   1: a histogram of the candidates' keys' high bytes (counts and weights): the top-k's or else the
//      top-p's bin;
//   2: the histogram of that bin's low bytes: the top-k's exact key, then the top-p's (or its bin);
//   3: where the top-p's bin was another, the histogram of its low bytes: the top-p's key;
//   4: the draw: each workgroup's weight of the tokens kept, then the last finds the token.
// A candidate's weight exp(s), s = (logit - max) / temperature, is an integer of 2^-31 units, so that sums
// are exact and the same in any order: a seed gives the same tokens on every run. Tokens less likely than
// 2^-31 of the most likely one are never drawn. Cuts are found on a 16-bit key of s over [ln 2^-31, 0]:
// tokens within 21.49 / 65536 of the cut's s (0.033% of its weight) count as tied with it and are kept, as
// transformers keeps whatever its sort left before the cut.
// Bindings: logits (row step_.firstRow), token (input_ids[0]), sampling (the state's sampling words: the
// parameters, then a bit per vocabulary token already in the context), counters (5, at 0 between steps),
// work (RESULT_WORDS, then 3 histograms, then 2 words a workgroup).
const uint SPAN = WORKGROUP * LOADS;
const uint BINS = 256u;  // one per invocation
// ln 2^-31 and 65536 / -S_MIN as floats, written out so that no compiler's folding changes a key
// (plan::kSamplingMinScaled and kSamplingKeyScale).
const float S_MIN = -21.48756217956543;
const float KEY_SCALE = 3049.950439453125;

// The parameters (words of `sampling`), as exec::Executor::setSampling writes them.
const uint P_INVERSE_TEMPERATURE = 0u, P_TOP_K = 1u, P_TOP_P = 2u, P_MIN_P_KEY = 3u, P_PENALTY = 4u,
           P_INVERSE_PENALTY = 5u, P_SEED_LOW = 6u, P_SEED_HIGH = 7u, P_ADVANCES = 8u, PARAMS = 9u;
// What the launches leave each other in `work`.
const uint R_MAX = 0u, R_FINE1 = 1u, R_FINE2 = 2u, R_KEY_K = 3u, R_KEY_P = 4u, R_COUNT_ABOVE = 5u,
           R_WEIGHT_ABOVE = 6u /* 2 words */, R_TARGET = 8u /* 2 */, R_WEIGHT_ABOVE2 = 10u /* 2 */,
           R_CUT = 12u, R_ARGMAX = 13u, RESULT_WORDS = 16u;
// R_CUT: which cut stage 1 looked for in the bin it chose.
const int CUT_TOP_K = 1, CUT_TOP_P = 2;
const uint HISTOGRAM_WORDS = 3u * BINS;  // counts, then weights' high 16 bits, then low 16 bits, by bin
const uint BLOCKS = RESULT_WORDS + 3u * HISTOGRAM_WORDS;
const uint NO_BIN = 0xffffffffu;

float inverseTemperature() { return intBitsToFloat(sampling[P_INVERSE_TEMPERATURE]); }

// The logit of token i with the repetition penalty on the tokens already seen.
float penalised(uint i) {
  float logit = load_logits(step_.firstRow * VOCAB + i);
  if (sampling[P_PENALTY] != floatBitsToInt(1.0) && (uint(sampling[PARAMS + (i >> 5)]) & (1u << (i & 31u))) != 0u)
    logit *= intBitsToFloat(sampling[logit < 0.0 ? P_PENALTY : P_INVERSE_PENALTY]);
  return logit;
}

// s = (logit - max) * (1 / temperature), precise: the key must not depend on how the compiler fuses it.
float scaled(uint i, float best) {
  precise float s = (penalised(i) - best) * inverseTemperature();
  return s;
}
uint keyOf(float s) {
  precise float k = (s - S_MIN) * KEY_SCALE;
  return min(uint(max(k, 0.0)), 65535u);
}
uint weightOf(float s) {
  return !(s >= S_MIN) ? 0u : uint(min(exp(s), 1.0) * 2147483648.0);
}

// Token i's weight (0: not a candidate, or past the vocabulary) and its key.
uint weightAndKey(uint i, float best, out uint key) {
  key = 0u;
  if (i >= VOCAB) return 0u;
  float s = scaled(i, best);
  key = keyOf(s);
  return weightOf(s);
}
// The workgroup's u-th token of this invocation: a workgroup takes SPAN consecutive tokens, strided over its
// invocations so that their loads coalesce.
uint blockToken(uint u) { return gl_WorkGroupID.x * SPAN + gl_LocalInvocationIndex + u * WORKGROUP; }

// 64-bit unsigned values as uvec2 (low, high).
uvec2 add64(uvec2 a, uvec2 b) {
  uint carry;
  uint low = uaddCarry(a.x, b.x, carry);
  return uvec2(low, a.y + b.y + carry);
}
bool atLeast64(uvec2 a, uvec2 b) { return a.y > b.y || (a.y == b.y && a.x >= b.x); }
// A weight summed as its high and low 16 bits.
uvec2 fromHalves(uint high, uint low) { return add64(uvec2(high << 16, high >> 16), uvec2(low, 0u)); }
// (a * fraction) >> 32: a fraction of 2^32 of a.
uvec2 scale64(uvec2 a, uint fraction) {
  uint lowHigh, lowLow, highHigh, highLow;
  umulExtended(a.x, fraction, lowHigh, lowLow);
  umulExtended(a.y, fraction, highHigh, highLow);
  return add64(uvec2(highLow, highHigh), uvec2(lowHigh, 0u));
}
uvec2 subtract64(uvec2 a, uvec2 b) {
  uint borrow;
  uint low = usubBorrow(a.x, b.x, borrow);
  return uvec2(low, a.y - b.y - borrow);
}
// Whether v lies in [from, to).
bool contains(uvec2 v, uvec2 from, uvec2 to) { return atLeast64(v, from) && !atLeast64(v, to); }
uvec2 loadWork64(uint at) { return uvec2(uint(work[at]), uint(work[at + 1u])); }
void storeWork64(uint at, uvec2 v) { work[at] = int(v.x), work[at + 1u] = int(v.y); }

// Philox4x32-10 (Salmon et al., 2011) of (counter, 0, 0, 0) under the seed: the draw's random word.
uint philox(uint counter, uint seedLow, uint seedHigh) {
  uvec4 c = uvec4(counter, 0u, 0u, 0u);
  uvec2 k = uvec2(seedLow, seedHigh);
  for (int round = 0; round < 10; ++round) {
    uint high0, low0, high1, low1;
    umulExtended(0xD2511F53u, c.x, high0, low0);
    umulExtended(0xCD9E8D57u, c.z, high1, low1);
    c = uvec4(high1 ^ c.y ^ k.x, low1, high0 ^ c.w ^ k.y, low0);
    k += uvec2(0x9E3779B9u, 0xBB67AE85u);
  }
  return c.x;
}

shared bool last_;
// Counts this workgroup in on counter `stage` once every invocation's writes to `work` are out; true in
// every invocation of the last workgroup, which returns the counter to 0 for the next step.
bool lastWorkgroup(uint stage) {
  memoryBarrierBuffer();
  barrier();
  if (gl_LocalInvocationIndex == 0u) {
    last_ = atomicAdd(counters[stage], 1) == int(GROUPS) - 1;
    if (last_) atomicExchange(counters[stage], 0);
  }
  barrier();
  if (!last_) return false;
  memoryBarrierBuffer();
  return true;
}

// Whether the step ran without its greedy argmax launch (P_ADVANCES, set for replayed sampled steps): the
// sampler then appends the token and moves the position on, as that launch would have.
bool advances() { return sampling[P_ADVANCES] != 0; }
// The position of the token drawn, the draw's counter: the argmax launch has moved the position past the
// fed token, or the sampler will.
uint drawnPosition() { return state_.position + (advances() ? 1u : 0u); }

// The token chosen: the next step's input, the state's token list (in place of the greedy one the argmax
// launch appended, or appended), and one more token the penalty sees.
void writeChoice(uint chosen) {
  chosen = min(chosen, VOCAB - 1u);
  token[0] = int(chosen);
  if (advances()) {
    if (state_.generated < SEQ) state_.tokens[state_.generated] = chosen;
    state_.generated += 1u;
    state_.position += 1u;
  } else if (state_.generated >= 1u && state_.generated <= SEQ) {
    state_.tokens[state_.generated - 1u] = chosen;
  }
  atomicOr(sampling[PARAMS + (chosen >> 5)], int(1u << (chosen & 31u)));
}

shared uint counts_[BINS], highs_[BINS], lows_[BINS];
shared uint suffixCounts_[BINS + 1u];
shared uvec2 suffixWeights_[BINS + 1u];
shared uvec2 keptWeight_;         // stage 2: the top-k's weight
shared uvec2 prefix_[WORKGROUP];  // stage 4: prefix sums
shared uint block_;
shared uvec2 rest_;

// This workgroup's histogram of the candidates whose key's high byte is `bin` (NO_BIN: every candidate, by
// their high bytes; else by their low bytes), added into histogram `h` of `work`.
void histogram(float best, uint bin, uint h) {
  uint tid = gl_LocalInvocationIndex;
  counts_[tid] = 0u, highs_[tid] = 0u, lows_[tid] = 0u;
  barrier();
  [[unroll]] for (uint u = 0u; u < LOADS; ++u) {
    uint key, q = weightAndKey(blockToken(u), best, key);
    if (q == 0u || (bin != NO_BIN && key >> 8 != bin)) continue;
    uint b = bin == NO_BIN ? key >> 8 : key & 0xffu;
    atomicAdd(counts_[b], 1u);
    atomicAdd(highs_[b], q >> 16);
    atomicAdd(lows_[b], q & 0xffffu);
  }
  barrier();
  uint at = RESULT_WORDS + h * HISTOGRAM_WORDS + tid;
  if (counts_[tid] != 0u) {
    atomicAdd(work[at], int(counts_[tid]));
    atomicAdd(work[at + BINS], int(highs_[tid]));
    atomicAdd(work[at + 2u * BINS], int(lows_[tid]));
  }
}

// In the last workgroup: histogram `h`'s counts and weights of the bins at or above each bin, into
// suffixCounts_ and suffixWeights_ (BINS + 1 entries; the last 0).
void suffixSums(uint h) {
  uint tid = gl_LocalInvocationIndex;
  uint at = RESULT_WORDS + h * HISTOGRAM_WORDS + tid;
  suffixCounts_[tid] = uint(work[at]);
  suffixWeights_[tid] = fromHalves(uint(work[at + BINS]), uint(work[at + 2u * BINS]));
  if (tid == 0u) suffixCounts_[BINS] = 0u, suffixWeights_[BINS] = uvec2(0u);
  barrier();
  for (uint d = 1u; d < BINS; d <<= 1) {
    uint count = 0u;
    uvec2 weight = uvec2(0u);
    if (tid + d < BINS) count = suffixCounts_[tid + d], weight = suffixWeights_[tid + d];
    barrier();
    suffixCounts_[tid] += count;
    suffixWeights_[tid] = add64(suffixWeights_[tid], weight);
    barrier();
  }
}

// The bin where the weight from the top, `above` plus the bins' down to it, first reaches `target`: the
// invocation of that bin returns true.
bool reachesWeight(uvec2 above, uvec2 target) {
  uint tid = gl_LocalInvocationIndex;
  return atLeast64(add64(above, suffixWeights_[tid]), target) &&
         !atLeast64(add64(above, suffixWeights_[tid + 1u]), target);
}
bool reachesCount(uint above, uint k) {
  uint tid = gl_LocalInvocationIndex;
  return above + suffixCounts_[tid] >= k && above + suffixCounts_[tid + 1u] < k;
}

// prefix_ summed from the first invocation's on (Hillis and Steele); every invocation must call it.
void inclusivePrefix() {
  uint tid = gl_LocalInvocationIndex;
  barrier();
  for (uint d = 1u; d < WORKGROUP; d <<= 1) {
    uvec2 v = tid >= d ? prefix_[tid - d] : uvec2(0u);
    barrier();
    prefix_[tid] = add64(prefix_[tid], v);
    barrier();
  }
}

// The top-p's weight: at least one unit, so that the most likely token is always kept.
uvec2 topPTarget(uvec2 total) {
  uvec2 target = scale64(total, uint(sampling[P_TOP_P]));
  return target == uvec2(0u) ? uvec2(1u, 0u) : target;
}
bool topK() { return sampling[P_TOP_K] != 0; }
bool topP() { return sampling[P_TOP_P] != 0; }  // p as a fraction of 2^32; 0: off

void main() {
  uint tid = gl_LocalInvocationIndex;
#if STAGE == 0
  float best = NO_VALUE;
  uint index = NO_INDEX;
  [[unroll]] for (uint u = 0u; u < LOADS; ++u) {
    uint i = blockToken(u);
    if (i >= VOCAB) continue;
    float v = penalised(i);
    if (better(v, i, best, index)) best = v, index = i;
  }
  reduceWorkgroup(best, index);
  uint at = BLOCKS + 2u * gl_WorkGroupID.x;
  if (tid == 0u) work[at] = floatBitsToInt(bestValue_[0]), work[at + 1u] = int(bestIndex_[0]);
  if (!lastWorkgroup(0u)) return;
  best = NO_VALUE, index = NO_INDEX;
  for (uint g = tid; g < GROUPS; g += WORKGROUP) {
    float v = intBitsToFloat(work[BLOCKS + 2u * g]);
    uint i = uint(work[BLOCKS + 2u * g + 1u]);
    if (better(v, i, best, index)) best = v, index = i;
  }
  barrier();
  reduceWorkgroup(best, index);
  // The next launches' histograms start empty.
  for (uint w = tid; w < 3u * HISTOGRAM_WORDS; w += WORKGROUP) work[RESULT_WORDS + w] = 0;
  if (tid == 0u) {
    work[R_MAX] = floatBitsToInt(bestValue_[0]), work[R_ARGMAX] = int(bestIndex_[0]);
    work[R_FINE1] = int(NO_BIN), work[R_FINE2] = int(NO_BIN), work[R_KEY_K] = 0, work[R_KEY_P] = 0;
    if (inverseTemperature() == 0.0) writeChoice(bestIndex_[0]);
  }
#else
  if (inverseTemperature() == 0.0) return;  // greedy: stage 0 chose
  float best = intBitsToFloat(work[R_MAX]);
#if STAGE == 1
  if (!topK() && !topP()) return;
  histogram(best, NO_BIN, 0u);
  if (!lastWorkgroup(1u)) return;
  suffixSums(0u);
  uint k = uint(sampling[P_TOP_K]);
  if (topK() && k < suffixCounts_[0]) {
    if (reachesCount(0u, k)) {
      work[R_FINE1] = int(tid), work[R_CUT] = CUT_TOP_K;
      work[R_COUNT_ABOVE] = int(suffixCounts_[tid + 1u]);
      storeWork64(R_WEIGHT_ABOVE, suffixWeights_[tid + 1u]);
    }
  } else if (topP()) {
    const uvec2 target = topPTarget(suffixWeights_[0]);
    if (reachesWeight(uvec2(0u), target)) {
      work[R_FINE1] = int(tid), work[R_CUT] = CUT_TOP_P;
      storeWork64(R_WEIGHT_ABOVE, suffixWeights_[tid + 1u]);
      storeWork64(R_TARGET, target);
    }
  }
#elif STAGE == 2
  uint bin = uint(work[R_FINE1]);
  if (bin == NO_BIN) return;
  histogram(best, bin, 1u);
  if (!lastWorkgroup(2u)) return;
  suffixSums(1u);
  uvec2 above = loadWork64(R_WEIGHT_ABOVE);
  uint k = uint(sampling[P_TOP_K]);
  if (work[R_CUT] == CUT_TOP_K) {
    // The top-k's key; the top-p's target is a fraction of the weight kept.
    if (reachesCount(uint(work[R_COUNT_ABOVE]), k)) {
      work[R_KEY_K] = int(bin << 8 | tid);
      keptWeight_ = add64(above, suffixWeights_[tid]);
    }
    barrier();
    if (!topP()) return;
    uvec2 target = topPTarget(keptWeight_);
    if (atLeast64(above, target)) {
      // Reached in a higher bin: stage 3 takes its low bytes.
      suffixSums(0u);
      if (reachesWeight(uvec2(0u), target)) {
        work[R_FINE2] = int(tid);
        storeWork64(R_WEIGHT_ABOVE2, suffixWeights_[tid + 1u]);
        storeWork64(R_TARGET, target);
      }
    } else if (reachesWeight(above, target)) {
      work[R_KEY_P] = int(bin << 8 | tid);
    }
  } else if (reachesWeight(above, loadWork64(R_TARGET))) {
    work[R_KEY_P] = int(bin << 8 | tid);
  }
#elif STAGE == 3
  uint bin = uint(work[R_FINE2]);
  if (bin == NO_BIN) return;
  histogram(best, bin, 2u);
  if (!lastWorkgroup(3u)) return;
  suffixSums(2u);
  if (reachesWeight(loadWork64(R_WEIGHT_ABOVE2), loadWork64(R_TARGET))) work[R_KEY_P] = int(bin << 8 | tid);
#elif STAGE == 4
  const uint cut = max(max(uint(work[R_KEY_K]), uint(work[R_KEY_P])), uint(sampling[P_MIN_P_KEY]));
  // Each workgroup's weight kept, as sums of the weights' high and low 16 bits.
  if (tid == 0u) highs_[0] = 0u, lows_[0] = 0u;
  barrier();
  [[unroll]] for (uint u = 0u; u < LOADS; ++u) {
    uint key, q = weightAndKey(blockToken(u), best, key);
    if (q == 0u || key < cut) continue;
    atomicAdd(highs_[0], q >> 16);
    atomicAdd(lows_[0], q & 0xffffu);
  }
  barrier();
  uint at = BLOCKS + 2u * gl_WorkGroupID.x;
  if (tid == 0u) work[at] = int(highs_[0]), work[at + 1u] = int(lows_[0]);
  if (!lastWorkgroup(4u)) return;

  // The draw: a random fraction of the total, found first among the workgroups' blocks (a prefix sum over
  // them; codegen keeps GROUPS <= WORKGROUP), then among the block's invocations (each takes LOADS
  // consecutive tokens), then in one's tokens.
  const uint draw = philox(drawnPosition(), uint(sampling[P_SEED_LOW]), uint(sampling[P_SEED_HIGH]));
  prefix_[tid] = tid < GROUPS ? fromHalves(uint(work[BLOCKS + 2u * tid]), uint(work[BLOCKS + 2u * tid + 1u]))
                              : uvec2(0u);
  if (tid == 0u) block_ = NO_BIN;
  inclusivePrefix();
  const uvec2 target = scale64(prefix_[GROUPS - 1u], draw);
  if (contains(target, tid == 0u ? uvec2(0u) : prefix_[tid - 1u], prefix_[tid]))
    block_ = tid, rest_ = subtract64(target, tid == 0u ? uvec2(0u) : prefix_[tid - 1u]);
  barrier();
  if (block_ == NO_BIN) {  // no candidate at all (NaN or infinite logits): the greedy token
    if (tid == 0u) writeChoice(uint(work[R_ARGMAX]));
    return;
  }
  uint first = block_ * SPAN + tid * LOADS;
  uvec2 mine = uvec2(0u);
  uint weights[LOADS];
  [[unroll]] for (uint u = 0u; u < LOADS; ++u) {
    uint key, q = weightAndKey(first + u, best, key);
    weights[u] = key >= cut ? q : 0u;
    mine = add64(mine, uvec2(weights[u], 0u));
  }
  prefix_[tid] = mine;
  inclusivePrefix();
  uvec2 before = tid == 0u ? uvec2(0u) : prefix_[tid - 1u];
  if (contains(rest_, before, prefix_[tid])) {
    uvec2 cumulative = before;
    for (uint u = 0u; u < LOADS; ++u) {
      cumulative = add64(cumulative, uvec2(weights[u], 0u));
      if (weights[u] != 0u && !atLeast64(rest_, cumulative)) {
        writeChoice(first + u);
        break;
      }
    }
  }
#endif
#endif
}
