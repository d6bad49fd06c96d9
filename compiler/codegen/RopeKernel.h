// Rotary embedding kernels: prefill's RoPE of the queries and keys fused with the KV-cache write
// (rope_append.glsl). PlanBuilder and the kernel tests both specialise it here.
#pragma once

#include "compiler/codegen/KernelWriter.h"

#include <vector>

namespace gerbil::codegen {

struct RotarySpec {
  int64_t headDim = 0, rotaryDim = 0;
  std::vector<double> invFreq; // rotaryDim / 2 frequencies
  double attentionScaling = 1.0;
};

// The defines of a rotation (ROTARY_DIM, ATTENTION_SCALING, INV_FREQ_VALUES) that rope.glsl, gemv.glsl's
// q/k/v epilogue and rope_append.glsl read.
void defineRotary(KernelSource &k, const RotarySpec &rotary);

// Bindings: q, k, v, result (the rotated queries), k_cache, v_cache (one layer's, [kv head][seq][head dim]),
// then the state buffer. Grid (T, ropeAppendColumns, 1).
KernelSource ropeAppendKernel(const RotarySpec &rotary, int64_t qHeads, int64_t kvHeads, int64_t sequence);
// Workgroups per token (grid y; grid x is the step's tokens).
uint32_t ropeAppendColumns(const RotarySpec &rotary, int64_t qHeads, int64_t kvHeads);

} // namespace gerbil::codegen
