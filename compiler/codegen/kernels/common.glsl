// Shared by every kernel: workgroup reductions. The step's push constants (step_.tokens, step_.firstRow) are
// declared before it, the bindings after it (KernelWriter); the position of the step's first token is in
// the state buffer (state_.position).
// CACHE_HALF 1: the KV cache holds f16 (gerbilc --kv-dtype f16); its NAME_v4 views are uvec2 of 4 packed
// values (KernelWriter's halfValues).
#ifndef CACHE_HALF
#define CACHE_HALF 0
#endif

#ifdef NEEDS_REDUCTION
// Sum (isMax false) or max over the workgroup; workgroupSum and workgroupMax name the two. Every invocation
// must call them (they contain barriers), with the same isMax.
float combine_(float a, float b, bool isMax) {
  return isMax ? max(a, b) : a + b;
}
#if SUBGROUP_OPS
// Each subgroup reduces its values, and every invocation combines the subgroups' partials in the same order:
// two barriers instead of one for each halving of a tree over shared memory.
shared float reduction_[WORKGROUP / MIN_SUBGROUP_SIZE];
float workgroupReduce(float v, bool isMax) {
  v = isMax ? subgroupMax(v) : subgroupAdd(v);
  if (subgroupElect()) reduction_[gl_SubgroupID] = v;
  barrier();
  float result = reduction_[0];
  for (uint i = 1; i < gl_NumSubgroups; ++i) result = combine_(result, reduction_[i], isMax);
  barrier();
  return result;
}
#else
shared float reduction_[WORKGROUP];

float workgroupReduce(float v, bool isMax) {
  uint tid = gl_LocalInvocationID.x;
  reduction_[tid] = v;
  barrier();
  for (uint s = WORKGROUP / 2; s > 0; s >>= 1) {
    if (tid < s) reduction_[tid] = combine_(reduction_[tid], reduction_[tid + s], isMax);
    barrier();
  }
  float result = reduction_[0];
  barrier();
  return result;
}
#endif
float workgroupSum(float v) {
  return workgroupReduce(v, false);
}
float workgroupMax(float v) {
  return workgroupReduce(v, true);
}
#endif

// Activations of elementwise.glsl and of gemv.glsl's gate/up epilogue, so that prefill and decode compute
// them alike: SiLU, and GELU in its tanh form (GELU_TANH) or exact, with erf by Abramowitz and Stegun 7.1.26
// (|error| < 1.5e-7).
float silu(float x) {
  return x / (1.0 + exp(-x));
}

float gelu(float x) {
#if GELU_TANH
  // The argument is clamped: tanh saturates long before, and some drivers return NaN for huge inputs.
  float inner = clamp(0.7978845608028654 * (x + 0.044715 * x * x * x), -15.0, 15.0);
  return 0.5 * x * (1.0 + tanh(inner));
#else
  float z = abs(x) * 0.7071067811865476;
  float k = 1.0 / (1.0 + 0.3275911 * z);
  float poly = k * (0.254829592 + k * (-0.284496736 + k * (1.421413741 + k * (-1.453152027 + k * 1.061405429))));
  float erfz = 1.0 - poly * exp(-z * z);
  return 0.5 * x * (1.0 + sign(x) * erfz);
#endif
}

// The activation of a gate/up group's epilogue (gemv.glsl in decode, matmul_coop.glsl in prefill), where
// codegen defines ACT_SILU.
#ifdef ACT_SILU
float activation(float x) {
#if ACT_SILU
  return silu(x);
#else
  return gelu(x);
#endif
}
#endif

// cos and sin of the rotary angle position · inv_freq, in f32 as in transformers, the angle reduced to
// [-pi, pi] in two steps so that they stay accurate for long positions on drivers with fast approximations
// (rope.glsl, and gemv.glsl's q/k/v epilogue).
vec2 rotaryCosSin(float position, float invFreq) {
  float angle = position * invFreq;
  float turns = floor(angle * 0.15915494309189535 + 0.5);
  float reduced = (angle - turns * 6.28125) - turns * 0.0019353071795864769;
  return vec2(cos(reduced), sin(reduced));
}

#ifdef INV_FREQ_VALUES
// The rotary inverse frequencies (ROTARY_DIM / 2) of rope.glsl, rope_append.glsl and gemv.glsl's q/k/v
// epilogue.
const float INV_FREQ[ROTARY_DIM / 2u] = float[](INV_FREQ_VALUES);
// INV_FREQ[i] for an index the compiler does not know, as a chain of selects: SPIR-V can index a constant
// array only through a private copy of it (an OpVariable in Function storage), which a driver may build in
// each invocation's local memory before the first use.
float invFreqAt(uint i) {
  float invFreq = INV_FREQ[0];
  [[unroll]] for (uint j = 1u; j < ROTARY_DIM / 2u; ++j) invFreq = i == j ? INV_FREQ[j] : invFreq;
  return invFreq;
}
#endif

// Eight values rounded to f16, as one 16-byte word (a then b, lowest half first): the f16 rows and tiles
// that the tensor-core kernels stage and hand over.
uvec4 packHalf8(vec4 a, vec4 b) {
  return uvec4(packHalf2x16(a.xy), packHalf2x16(a.zw), packHalf2x16(b.xy), packHalf2x16(b.zw));
}
