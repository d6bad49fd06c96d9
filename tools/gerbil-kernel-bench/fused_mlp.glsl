#version 450
// gerbil-kernel-bench mlp (MlpBench.h): a decode step's MLP in one launch instead of two, to measure
// before the compiler fuses it. Phase p reads x = vectors[p % 3] and leaves
//   x + W_down · (silu(s · W_gate (g ⊙ x)) ⊙ s · W_up (g ⊙ x)),  s = 1 / rms(x),
// in vectors[(p + 1) % 3]. Workgroup w takes SLICE rows of the intermediate: it works out their gate/up
// products (phase 1, into shared memory), then adds their columns' share of the down projection into the
// result with float atomics (phase 2; workgroup 0 adds x as well). A result buffer must start at zero, so
// each phase zeroes vectors[(p + 2) % 3], which the phase before read and the next one fills: the three
// buffers rotate and no launch of its own clears them. W_down is stored transposed ([INTER][HIDDEN]) so
// that a slice's columns are rows, or with MLP_DOWN_ROWS=1 as checkpoints store it ([HIDDEN][INTER]: each
// invocation takes hidden rows and reads the slice's part of each, 16 bytes at a time; SLICE and INTER
// multiples of 8), which a compiler could use without a layout of its own. The weights rotate over `copies` sets. MlpBench.cpp inserts the #defines
// (HIDDEN, INTER, SLICE, WORKGROUP, EPS) after the #version line.
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_atomic_float : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = WORKGROUP) in;

layout(std430, binding = 0) restrict readonly buffer Gate { uvec4 gate_[]; };
layout(std430, binding = 1) restrict readonly buffer Up { uvec4 up_[]; };
layout(std430, binding = 2) restrict readonly buffer Down { uvec4 down_[]; };
layout(std430, binding = 3) restrict readonly buffer Norm { vec4 g_[]; };
layout(std430, binding = 4) buffer Vectors { float v_[]; };
layout(std430, binding = 5) restrict readonly buffer VectorsV4 { vec4 v4_[]; };
layout(push_constant) uniform Push { uint phase; uint copies; } push_;
#ifndef MLP_DOWN_ROWS
#define MLP_DOWN_ROWS 0
#endif

const uint CH = HIDDEN / 8u;  // 16-byte chunks of a row of HIDDEN f16 weights
// Phase 2: threads take (row group, chunk) places: R row groups over the slice's rows, CHW chunks at a time.
const uint CHW = WORKGROUP < CH ? WORKGROUP : CH;
const uint R = WORKGROUP / CHW;
const uint CPT = (CH + CHW - 1u) / CHW;     // chunks a thread
const uint RPT = (SLICE + R - 1u) / R;      // rows a thread
// The down loads are issued before phase 1 where they fit in registers, so that they overlap it.
const bool PREFETCH_DOWN = CPT * RPT <= 16u;
const uint DOWN_REGS = PREFETCH_DOWN ? CPT * RPT : 1u;

shared float m_[SLICE];

#if MLP_DOWN_ROWS
const uint SV = SLICE / 8u;                                  // 16-byte loads of a hidden row's slice
const uint HPT = (HIDDEN + WORKGROUP - 1u) / WORKGROUP;      // hidden rows an invocation
const bool PREFETCH_ROWS = HPT * SV <= 16u;
const uint ROW_REGS = PREFETCH_ROWS ? HPT * SV : 1u;

// Loads v of hidden row i's slice (a valid address past the ends, where m is 0 or the row is not used).
uvec4 downRowLoad(uint copy, uint i, uint j0, uint v) {
  return down_[copy * HIDDEN * (INTER / 8u) + min(i, HIDDEN - 1u) * (INTER / 8u) + min(j0 / 8u + v, INTER / 8u - 1u)];
}
#endif
shared float rowGroupSums_[R > 1u ? R : 1u][R > 1u ? CHW * 8u : 1u];

float dot8(uvec4 w, vec4 a, vec4 b) {
  return dot(vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)), a) + dot(vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w)), b);
}

void main() {
  const uint tid = gl_LocalInvocationID.x, group = gl_WorkGroupID.x;
  const uint in0 = (push_.phase % 3u) * HIDDEN, out0 = ((push_.phase + 1u) % 3u) * HIDDEN;
  const uint clear0 = ((push_.phase + 2u) % 3u) * HIDDEN;
  const uint copy = push_.phase % push_.copies;
  const uint rows0 = copy * INTER * CH;  // this phase's weights, in uvec4s
  const uint j0 = group * SLICE;         // the slice's first intermediate row

  // Zero the buffer the next phase accumulates into (read by the phase before, idle in this one).
  const uint clearPer = (HIDDEN + gl_NumWorkGroups.x - 1u) / gl_NumWorkGroups.x;
  for (uint i = tid; i < clearPer; i += WORKGROUP)
    if (group * clearPer + i < HIDDEN) v_[clear0 + group * clearPer + i] = 0.0;

#if MLP_DOWN_ROWS
  uvec4 rowLoads[ROW_REGS];
  if (PREFETCH_ROWS)
    [[unroll]] for (uint h = 0u; h < HPT; ++h)
      [[unroll]] for (uint v = 0u; v < SV; ++v)
        rowLoads[PREFETCH_ROWS ? h * SV + v : 0u] = downRowLoad(copy, tid + h * WORKGROUP, j0, v);
#endif
  const uint r = tid / CHW, c0 = tid % CHW;
  uvec4 down[DOWN_REGS];
  if (PREFETCH_DOWN && !bool(MLP_DOWN_ROWS) && r < R)
    [[unroll]] for (uint ci = 0u; ci < CPT; ++ci)
      [[unroll]] for (uint ri = 0u; ri < RPT; ++ri) {
        uint c = min(c0 + ci * CHW, CH - 1u), j = min(r + ri * R, SLICE - 1u);
        down[PREFETCH_DOWN ? ci * RPT + ri : 0u] = down_[rows0 + min(j0 + j, INTER - 1u) * CH + c];
      }

  // Phase 1: each subgroup takes rows sub, sub + subgroups, ... of the slice; its lanes stride the row.
  for (uint j = gl_SubgroupID; j < SLICE; j += gl_NumSubgroups) {
    uint row = min(j0 + j, INTER - 1u);
    float gate = 0.0, up = 0.0, squares = 0.0;
    for (uint c = gl_SubgroupInvocationID; c < CH; c += gl_SubgroupSize) {
      vec4 xa = v4_[in0 / 4u + 2u * c], xb = v4_[in0 / 4u + 2u * c + 1u];
      squares += dot(xa, xa) + dot(xb, xb);
      xa *= g_[2u * c], xb *= g_[2u * c + 1u];
      gate += dot8(gate_[rows0 + row * CH + c], xa, xb);
      up += dot8(up_[rows0 + row * CH + c], xa, xb);
    }
    vec3 sums = subgroupAdd(vec3(gate, up, squares));
    float s = inversesqrt(sums.z / float(HIDDEN) + EPS);
    float a = sums.x * s, b = sums.y * s;
    if (subgroupElect()) m_[j] = j0 + j < INTER ? a / (1.0 + exp(-a)) * b : 0.0;
  }
  barrier();

#if MLP_DOWN_ROWS
  [[unroll]] for (uint h = 0u; h < HPT; ++h) {
    uint i = tid + h * WORKGROUP;
    float sum = 0.0;
    [[unroll]] for (uint v = 0u; v < SV; ++v) {
      uvec4 w = PREFETCH_ROWS ? rowLoads[PREFETCH_ROWS ? h * SV + v : 0u] : downRowLoad(copy, i, j0, v);
      sum += dot8(w, vec4(m_[8u * v], m_[8u * v + 1u], m_[8u * v + 2u], m_[8u * v + 3u]),
                  vec4(m_[8u * v + 4u], m_[8u * v + 5u], m_[8u * v + 6u], m_[8u * v + 7u]));
    }
    if (i < HIDDEN) {
      if (group == 0u) sum += v_[in0 + i];
      atomicAdd(v_[out0 + i], sum);
    }
  }
  return;
#endif

  // Phase 2: this thread's chunks of the down projection over its rows of the slice.
  vec4 acc[CPT][2];
  [[unroll]] for (uint ci = 0u; ci < CPT; ++ci) acc[ci][0] = acc[ci][1] = vec4(0.0);
  if (r < R)
    [[unroll]] for (uint ci = 0u; ci < CPT; ++ci)
      [[unroll]] for (uint ri = 0u; ri < RPT; ++ri) {
        uint c = min(c0 + ci * CHW, CH - 1u), j = r + ri * R;
        uvec4 w = PREFETCH_DOWN ? down[PREFETCH_DOWN ? ci * RPT + ri : 0u]
                                : down_[rows0 + min(j0 + min(j, SLICE - 1u), INTER - 1u) * CH + c];
        float m = j < SLICE ? m_[j] : 0.0;
        acc[ci][0] += m * vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
        acc[ci][1] += m * vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w));
      }
  if (R > 1u) {
    if (r < R)
      [[unroll]] for (uint e = 0u; e < 8u; ++e) rowGroupSums_[r][c0 * 8u + e] = acc[0][e / 4u][e % 4u];
    barrier();
  }
  if (r != 0u) return;
  [[unroll]] for (uint ci = 0u; ci < CPT; ++ci) {
    uint c = c0 + ci * CHW;
    if (c >= CH) break;
    [[unroll]] for (uint e = 0u; e < 8u; ++e) {
      float sum = acc[ci][e / 4u][e % 4u];
      if (R > 1u)
        for (uint other = 1u; other < R; ++other) sum += rowGroupSums_[other][c0 * 8u + e];
      if (group == 0u) sum += v_[in0 + 8u * c + e];
      atomicAdd(v_[out0 + 8u * c + e], sum);
    }
  }
}
