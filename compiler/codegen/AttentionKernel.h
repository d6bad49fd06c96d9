// The prefill kernel of gerbil.attention: flash-style attention over tiles of queries and keys
// (attention_prefill.glsl). PlanBuilder and the kernel tests both specialise it here; decode's split
// attention (attention_decode.glsl) is PlanBuilder::specifyDecodeAttention's.
#pragma once

#include "compiler/codegen/KernelWriter.h"

namespace gerbil::codegen {

struct AttentionSpec {
  int64_t heads = 0, kvHeads = 0, headDim = 0;
  int64_t sequence = 0; // KV cache positions
  double scale = 0;
  int64_t window = 0; // sliding window; 0: none
};

// Bindings: q, k_cache, v_cache, result (then the state buffer). The workgroup is the kernel catalog's.
KernelSource attentionKernel(const AttentionSpec &spec);

// Workgroups for T queries (the kernel catalog gives dispatch formation the same).
std::array<uint32_t, 3> attentionGrid(const AttentionSpec &spec, uint32_t tokens);

} // namespace gerbil::codegen
