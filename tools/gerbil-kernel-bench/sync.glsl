#version 450
// gerbil-kernel-bench sync (SyncBench.h): a chain of square f16 gemv phases, one dispatch each, one
// persistent dispatch with grid barriers, or one dispatch each ordered by the grid barrier's counter alone;
// with COMPANION, the prefetcher that runs on a second queue beside the dispatches (SYNC_SIGNAL).
// Each subgroup (warp) owns rows warp, warp + warps, ... (ROWS of them) and keeps their f16 weights in
// registers: PER_LANE 16-byte loads a row and lane. x and y are the two halves of `vectors`, swapped every
// phase. SyncBench.cpp inserts the #defines after the #version line.
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_buffer_reference : enable
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = WORKGROUP) in;

// The sync words, in a buffer reference (SYNC_BDA) or a binding. progress_: the phase dispatches' count as they
// start (SYNC_SIGNAL), which the companion follows. Whether the two queues ran side by side: companionBegan_
// (1 once the companion runs), firstSeen_ (1 + the progress its first poll saw), overlapped_ (1 +
// companionBegan_ as the chain's last phase saw it).
#define SYNC_WORDS uint arrived_; uint stalled_; uint progress_; uint companionBegan_; uint firstSeen_; uint overlapped_;

#if SYNC_BDA
// The buffers through their device addresses in the push constants instead of descriptors (the launch then
// has no descriptor to fetch before the first load's address is known).
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer WeightsRef { uvec4 w_[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) VECTOR_QUALIFIER buffer VectorsRef { vec4 v_[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) VECTOR_QUALIFIER buffer ElementsRef { float e_[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) coherent volatile buffer SyncRef { SYNC_WORDS };
layout(push_constant) uniform Push {
  uint first; uint count; uint copies; uint unused;
  WeightsRef weights; VectorsRef vectors; ElementsRef elements; SyncRef sync;
} push_;
#define w_ push_.weights.w_
#define v_ push_.vectors.v_
#define e_ push_.elements.e_
#define arrived_ push_.sync.arrived_
#define stalled_ push_.sync.stalled_
#define progress_ push_.sync.progress_
#define companionBegan_ push_.sync.companionBegan_
#define firstSeen_ push_.sync.firstSeen_
#define overlapped_ push_.sync.overlapped_
#else
layout(std430, binding = 0) restrict readonly buffer Weights { uvec4 w_[]; };
// Persistent: other workgroups wrote the input in this dispatch, so it is read past the caches that are
// not coherent; across dispatches the barrier makes it visible.
layout(std430, binding = 1) VECTOR_QUALIFIER buffer Vectors { vec4 v_[]; };
// The same, element by element: a store of one component through v_ may be a read-modify-write of all four,
// which would lose the neighbours' results that other workgroups store at the same time.
layout(std430, binding = 1) VECTOR_QUALIFIER buffer VectorElements { float e_[]; };
layout(std430, binding = 2) coherent volatile buffer Sync { SYNC_WORDS };
layout(push_constant) uniform Push { uint first; uint count; uint copies; } push_;
#endif

#ifndef SYNC_POLL
#define SYNC_POLL arrived_
#endif
const uint WARPS = WORKGROUP / SUBGROUP;
const uint LOADS = N / 8u;
const uint PER_LANE = (LOADS + SUBGROUP - 1u) / SUBGROUP;

uvec4 w[ROWS][PER_LANE];

uint warpIndex() { return gl_WorkGroupID.x * WARPS + gl_SubgroupID; }
uint warpCount() { return gl_NumWorkGroups.x * WARPS; }

void prefetch(uint phase) {
#if !EMPTY && !SYNC_SKIP_PREFETCH
  uint base = (phase % push_.copies) * (N * LOADS);
  [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
    uint row = min(warpIndex() + r * warpCount(), N - 1u);
    [[unroll]] for (uint i = 0u; i < PER_LANE; ++i)
#if SYNC_NO_W
      w[r][i] = uvec4(0x3c003c00u);  // weights of 1.0 instead of loads (latency diagnosis)
#else
      w[r][i] = w_[base + row * LOADS + min(gl_SubgroupInvocationID + i * SUBGROUP, LOADS - 1u)];
#endif
  }
#endif
}

float dot8(uvec4 q, vec4 a, vec4 b) {
  return dot(vec4(unpackHalf2x16(q.x), unpackHalf2x16(q.y)), a) +
         dot(vec4(unpackHalf2x16(q.z), unpackHalf2x16(q.w)), b);
}

#if SYNC_STAGE_X
// SYNC_STAGE_X: the workgroup reads the input once, each invocation a share of it, into shared memory, and
// its subgroups take their parts from there, instead of every subgroup reading the whole input from memory
// (past the L1 in a persistent grid, where sweep r found it 1.35 us of a 896 phase and ~8.6 MB of L2 reads a
// 2048 phase).
shared vec4 staged_[N / 4u];
#endif

void compute(uint phase) {
#if !EMPTY && !SYNC_SKIP_COMPUTE
  uint in4 = (phase & 1u) * (N / 4u), out0 = N - (phase & 1u) * N;
  vec4 xa[PER_LANE], xb[PER_LANE];
#if SYNC_STAGE_X && !SYNC_NO_X
  // Reused every phase: the barrier of arrive() (persistent) or a new dispatch keeps the last phase's
  // readers ahead of these stores.
  for (uint i = gl_LocalInvocationIndex; i < N / 4u; i += WORKGROUP) staged_[i] = v_[in4 + i];
  barrier();
#endif
  [[unroll]] for (uint i = 0u; i < PER_LANE; ++i) {
    uint k = min(gl_SubgroupInvocationID + i * SUBGROUP, LOADS - 1u);
#if SYNC_NO_X
    xa[i] = vec4(1.0), xb[i] = vec4(1.0);  // no read of the previous phase's result (latency diagnosis)
#elif SYNC_STAGE_X
    xa[i] = staged_[2u * k], xb[i] = staged_[2u * k + 1u];
#else
    xa[i] = v_[in4 + 2u * k], xb[i] = v_[in4 + 2u * k + 1u];
#endif
  }
  [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
    float sum = 0.0;
    [[unroll]] for (uint i = 0u; i < PER_LANE; ++i)
      if (gl_SubgroupInvocationID + i * SUBGROUP < LOADS) sum += dot8(w[r][i], xa[i], xb[i]);
#if !SYNC_NO_REDUCE
    sum = subgroupAdd(sum);
#endif
    uint row = warpIndex() + r * warpCount();
#if SYNC_NO_STORE
    // Stored only under a condition that never holds and that the compiler cannot know (latency diagnosis).
    if (subgroupElect() && row < N && push_.copies == 0u) e_[out0 + row] = sum;
#elif SYNC_STORE_ONE
    if (subgroupElect() && row == 0u) e_[out0 + row] = sum;  // one store a phase (latency diagnosis)
#else
    if (subgroupElect() && row < N) e_[out0 + row] = sum;
#endif
  }
#endif
}

// The grid barrier in two halves: a workgroup arrives once its writes are out, and waits later until all
// `target` arrivals are in, so that what it does between them (its next weights' loads) overlaps the
// wait. A memory barrier waits for the workgroup's loads in flight, so none may be issued before arrive().
// A bound on the polls turns a grid that is not all resident into an error.
void arrive() {
  memoryBarrierBuffer();
  barrier();
  if (gl_LocalInvocationIndex == 0u) atomicAdd(arrived_, 1u);
}

void wait(uint target) {
  if (gl_LocalInvocationIndex == 0u) {
    uint spins = 0u;
    while (SYNC_POLL < target)
      if (++spins == 1048576u) {
        stalled_ = 1u;
        break;
      }
    // No second read of arrived_ after the loop to catch a wait that lavapipe's loop limiter (65535
    // iterations) ended early: on the H200 that read saw fewer arrivals than the poll that ended the loop
    // (sweep r: on every run, with correct results), so it cannot tell. A wait cut short shows as a
    // wrong result, which the host check reports.
  }
  barrier();
  memoryBarrierBuffer();
}

// SYNC_CODE=n (with SYNC_CODE_UNROLLED 0 or 1): n dependent multiply-adds before the phase, as a loop of
// a few instructions or unrolled into n of them, to tell the cost of a kernel's code size at its launch
// (instruction fetch) from that of executing it.
float codeBlock() {
  float v = float(gl_LocalInvocationIndex) * 1e-3;
#if SYNC_CODE_UNROLLED
  [[unroll]]
#else
  [[dont_unroll]]
#endif
  for (uint i = 0u; i < SYNC_CODE; ++i) v = v * 0.999 + 1e-4;
  return v;
}

#if COMPANION
// The companion queue's prefetcher (SyncBench's dispatch-companion way): it follows the phase dispatches
// through the progress word they write as they start, and once phase p has started (phase p - 1 is done)
// loads the weights of phase p + COMPANION_AHEAD into the L2, COMPANION_LOADS 16-byte words an invocation,
// so that the phase finds them there instead of in memory. What it loads decides a store that never happens.
shared bool gaveUp_;
void main() {
  uint seen = 0u;
  const uint words = N * LOADS, stride = gl_NumWorkGroups.x * WORKGROUP;
  if (gl_GlobalInvocationID.x == 0u) {
    companionBegan_ = 1u;
    firstSeen_ = 1u + progress_;
  }
  for (uint p = 0u; p + COMPANION_AHEAD < push_.count; ++p) {
    if (gl_LocalInvocationIndex == 0u) {
      uint spins = 0u;
      gaveUp_ = false;
      while (progress_ < p + 1u)
        if (++spins == 1048576u) {
          stalled_ = 2u;
          gaveUp_ = true;
          break;
        }
    }
    barrier();
    if (gaveUp_) break;
    uint base = ((p + COMPANION_AHEAD) % push_.copies) * words;
    uvec4 loaded[COMPANION_LOADS];
    [[unroll]] for (uint u = 0u; u < COMPANION_LOADS; ++u)
      loaded[u] = w_[base + min(gl_GlobalInvocationID.x + u * stride, words - 1u)];
    [[unroll]] for (uint u = 0u; u < COMPANION_LOADS; ++u) seen ^= loaded[u].x;
    barrier();  // gaveUp_ is written again only after every invocation has read it
  }
  if (seen == 0x7fffffffu && push_.copies == 0u) e_[0] = 0.0;
}
#else
void main() {
#if SYNC_SIGNAL
  // The companion follows the phases by this count: phase `first` has started, so the one before is done.
  if (gl_WorkGroupID.x == 0u && gl_LocalInvocationIndex == 0u) {
    progress_ = push_.first + 1u;
    if (push_.first + 1u == PHASES) overlapped_ = 1u + companionBegan_;
  }
#endif
#if SYNC_CODE > 0
  if (codeBlock() == -1.0 && push_.copies == 0u) e_[0] = 0.0;  // never: keeps the code
#endif
#if SYNC_GUARD_STORE
  // A store that never happens and that the compiler cannot rule out (latency diagnosis, with --empty); its
  // index or value takes one built-in each: 1 the global invocation, 2 the workgroup count, 3 the subgroup,
  // 4 subgroupElect, 5 the lane, 6 a subgroupAdd.
#if SYNC_GUARD_STORE == 2
  if (push_.copies == 0u) e_[gl_WorkGroupID.x * gl_NumWorkGroups.x] = 0.0;
#elif SYNC_GUARD_STORE == 3
  if (push_.copies == 0u) e_[gl_SubgroupID] = 0.0;
#elif SYNC_GUARD_STORE == 4
  if (push_.copies == 0u && subgroupElect()) e_[gl_GlobalInvocationID.x] = 0.0;
#elif SYNC_GUARD_STORE == 5
  if (push_.copies == 0u) e_[gl_SubgroupInvocationID] = 0.0;
#elif SYNC_GUARD_STORE == 6
  float one = subgroupAdd(1.0 + float(gl_LocalInvocationIndex));
  if (push_.copies == 0u) e_[gl_GlobalInvocationID.x] = one;
#else
  if (push_.copies == 0u) e_[gl_GlobalInvocationID.x] = 0.0;
#endif
#endif
  prefetch(push_.first);
#if PERSISTENT
  for (uint p = 0u; p < push_.count; ++p) {
    compute(push_.first + p);
    if (p + 1u == push_.count) break;
    arrive();
    prefetch(push_.first + p + 1u);
    wait((p + 1u) * gl_NumWorkGroups.x);
  }
#elif CHAINED
  // A dispatch a phase without barriers between them: the weights first, then the wait for every workgroup
  // of the phase before (its arrivals), which the counter alone orders.
  if (push_.first > 0u) wait(push_.first * gl_NumWorkGroups.x);
  compute(push_.first);
  arrive();
#else
#if SYNC_PREFETCH_NEXT
  // The next phase's weights of the same rows, loaded into the L2 only: their sum decides a store that
  // never happens, which the compiler cannot know, so the loads stay.
  uint touched = 0u;
  uint next = ((push_.first + 1u) % push_.copies) * (N * LOADS);
  [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
    uint row = min(warpIndex() + r * warpCount(), N - 1u);
    [[unroll]] for (uint i = 0u; i < PER_LANE; ++i)
      touched += w_[next + row * LOADS + min(gl_SubgroupInvocationID + i * SUBGROUP, LOADS - 1u)].x;
  }
#endif
  compute(push_.first);
#if SYNC_PREFETCH_NEXT
  if (touched == 0x7fffffffu && push_.count == 0u) e_[0] = 0.0;
#endif
#endif
}
#endif
