// Weight prefetch (gerbil-prefetch-weights): workgroups of a latency-bound launch that only read
// PREFETCH_READS_i 16-byte words, PREFETCH_STRIDE_i words apart, of bindings prefetch0..prefetch{PREFETCH_COUNT
// - 1}, so that the launches after it, which read those weights, find them in the L2 (stride 1) or their
// pages' address translations cached (a page's stride). Workgroup w of them (0-based) makes reads
// [w - PREFETCH_FIRST_i, + 1) · PREFETCH_CHUNK of the binding whose workers it falls among: each invocation
// issues PREFETCH_STEPS loads before it uses any. What they load decides a store that never happens (no
// step position is 2^32 - 1), which the compiler cannot know, so the loads stay; the store target is the
// including kernel's PREFETCH_SINK(value).
const uint PREFETCH_CHUNK = PREFETCH_STEPS * WORKGROUP;

#define PREFETCH_PART(I)                                                                         \
  if (worker >= PREFETCH_FIRST_##I && worker < PREFETCH_FIRST_##I + (PREFETCH_READS_##I + PREFETCH_CHUNK - 1u) / PREFETCH_CHUNK) { \
    uint base = (worker - PREFETCH_FIRST_##I) * PREFETCH_CHUNK + gl_LocalInvocationID.x;       \
    uvec4 words[PREFETCH_STEPS];                                                                 \
    [[unroll]] for (uint u = 0u; u < PREFETCH_STEPS; ++u)                                        \
      words[u] = prefetch##I##_v4[min(base + u * WORKGROUP, PREFETCH_READS_##I - 1u) * PREFETCH_STRIDE_##I]; \
    [[unroll]] for (uint u = 0u; u < PREFETCH_STEPS; ++u) seen ^= words[u];                      \
  }

void prefetchWeights(uint worker) {
  uvec4 seen = uvec4(0u);
#if PREFETCH_COUNT > 0
  PREFETCH_PART(0)
#endif
#if PREFETCH_COUNT > 1
  PREFETCH_PART(1)
#endif
#if PREFETCH_COUNT > 2
  PREFETCH_PART(2)
#endif
#if PREFETCH_COUNT > 3
  PREFETCH_PART(3)
#endif
#if PREFETCH_COUNT > 4
  PREFETCH_PART(4)
#endif
#if PREFETCH_COUNT > 5
  PREFETCH_PART(5)
#endif
#if PREFETCH_COUNT > 6
  PREFETCH_PART(6)
#endif
#if PREFETCH_COUNT > 7
  PREFETCH_PART(7)
#endif
  if (state_.position == 0xffffffffu && seen.x == seen.y) PREFETCH_SINK(float(seen.z));
}
