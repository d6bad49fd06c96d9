// The kernels of gerbil.attention: prefill's flash-style attention over tiles of queries and keys
// (attention_prefill.glsl) and decode's split attention of one query (attention_decode.glsl). PlanBuilder
// and the kernel tests both specialise them here.
#pragma once

#include "compiler/codegen/KernelWriter.h"
#include "compiler/codegen/PrefetchWorkers.h"
#include "gerbil/Passes/KernelShapes.h"

namespace gerbil::codegen {

struct AttentionSpec {
  int64_t heads = 0, kvHeads = 0, headDim = 0;
  int64_t sequence = 0; // KV cache positions
  double scale = 0;
  int64_t window = 0; // sliding window; 0: none
  // The tensor-core prefill kernel's key splits (1 to kCoopAttentionMaxKeySplits); 0: the catalog's
  // (coopAttentionKeySplits). gerbil-kernel-bench's variants to tune with.
  int64_t keySplits = 0;
  // The tensor-core prefill kernel's keys staged at a time; 0: the catalog's (kCoopAttentionKeyTile).
  int64_t keyTile = 0;
  // The tensor-core prefill kernel: the result in f16 (8 dims a 16-byte word), for a Coop matmul with
  // halfInput.
  bool halfResult = false;
  // The KV cache holds f16: the decode attention's shape follows it (decodeAttentionShape).
  bool halfCache = false;
};

// Prefill: the scalar flash-style kernel everywhere, or (coop) the tensor-core one of the nvidia target
// (attention_prefill_coop.glsl; throws CodegenError for head dims it cannot take, see fitsCoopAttention).
// Bindings: q, k_cache, v_cache, result (then the state buffer). The workgroup is the kernel catalog's.
KernelSource attentionKernel(const AttentionSpec &spec, bool coop = false);

// Workgroups for T queries (the kernel catalog gives dispatch formation the same).
std::array<uint32_t, 3> attentionGrid(const AttentionSpec &spec, uint32_t tokens, bool coop = false);

// The tensor-core kernel binds two more: partial and counters (scratch). For steps of up to maxTokens
// queries they hold a counter per (head, query tile), zeroed before the first launch and returned to 0 by
// each tile's last split, and every split's output (not yet divided by its sums) and row maxima and sums.
struct AttentionScratch {
  uint64_t counterBytes = 0, partialBytes = 0;
};
AttentionScratch coopAttentionScratch(const AttentionSpec &spec, int64_t maxTokens);

// Decode: bindings q, k_cache, v_cache, result, partial (scratch), counters (scratch), then one prefetchI
// for each prefetch range (the weights gerbil-prefetch-weights chose; PrefetchWorkers.h), then the state
// buffer. The scratch holds a counter per workgroup column and every split's partial softmax result.
// Prefetching adds grid rows of workers past the splits.
struct DecodeAttentionKernel {
  KernelSource source;
  mlir::gerbil::DecodeAttentionShape shape{}; // its query heads, warps, splits
  std::array<uint32_t, 3> grid{};
  uint64_t scratchCounterBytes = 0, scratchPartialBytes = 0;
};
// `choice` replaces the catalog's query heads, warps or splits where not 0
// (mlir::gerbil::decodeAttentionShape); scoreLanes, where not 0, replaces decodeScoreLanes's.
DecodeAttentionKernel decodeAttentionKernel(const AttentionSpec &spec, bool subgroupOps,
                                            const mlir::gerbil::DecodeAttentionChoice &choice = {},
                                            const std::vector<PrefetchRange> &prefetch = {},
                                            int64_t scoreLanes = 0);
// The lanes that share a cached key's scores in the decode attention (attention_decode.glsl's SCORE_LANES):
// 4 with subgroup operations (every plan's subgroups have at least 4 invocations) where the key's vec4s,
// all loaded at once, split evenly; else 1.
int64_t decodeScoreLanes(const AttentionSpec &spec, bool subgroupOps);

} // namespace gerbil::codegen
