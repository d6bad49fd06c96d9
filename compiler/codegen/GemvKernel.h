// Decode's one-token matmul (gemv.glsl): gerbil.linear of one token, and the shape and weight defines that
// the grouped projections (q/k/v, gate/up; PlanBuilder::lowerGroup) share with it. PlanBuilder and the kernel
// tests both specialise it here.
#pragma once

#include "compiler/codegen/KernelWriter.h"
#include "compiler/codegen/PrefetchWorkers.h"

namespace gerbil::codegen {

// The mode-independent defines of gemv.glsl for a K -> N projection (N outputs; with MODE_GATE_UP, N gate/up
// pairs): mode, rows per workgroup, teams per pair, load width and weight type; and the workgroup size.
void defineGemv(KernelSource &k, const std::string &mode, int64_t kDim, int64_t n, plan::DType weights,
                bool subgroupOps, int64_t split = 0);

// The 16-byte views of the input, the norm weight and the weight matrices (bindings x, g, w*).
void addGemvViews(KernelSource &k);

struct GemvSpec {
  int64_t k = 0, n = 0;
  plan::DType weight = plan::DType::F32;
  bool norm = false; // RMSNorm prologue with weight g (f32)
  // false: the norm weight was folded into the weights' columns at load (plan::Weight::scaleColumnsBy): no g.
  bool normWeighted = true;
  double eps = 0;
  bool residual = false;
  bool subgroupOps = true;
  int64_t split = 0;   // teams per pair; 0: the catalog's (gemvShape), else a variant to tune with
  bool gateUp = false; // MODE_GATE_UP: n outputs silu(gate) * up of the weights w_gate, w_up (no residual)
  // MODE_SINGLE: the input and result rows are the firstRow push constant's (the logits projection, which
  // Plan::lastRowLogits runs on a prefill's last row), else row 0 (reading it cost the others ~0.5 µs).
  bool rowFromPush = false;
  // MODE_SINGLE of the logits projection that also picks the greedy token (argmax_combine.glsl): bindings
  // token, ids, partial and counters (scratch) after result; maxSequence sizes the state's token list.
  bool argmax = false;
  int64_t maxSequence = 0;
  // Weights of the launch after it whose words its prefetch workers read (gerbil-prefetch-weights with
  // spread-pages: a word a page), in workgroups before its own.
  std::vector<PrefetchRange> prefetch;
};

// The prefetch workers of a gemv.glsl kernel (gemvKernel's, or a grouped projection's): bindings prefetchI
// after its own, and PREFETCH_WORKERS workgroups before its own, whose results `sink` would store (never).
// Returns the number of workers.
int64_t addGemvPrefetch(KernelSource &k, const std::vector<PrefetchRange> &prefetch, const std::string &sink);

// The scratch of an ARGMAX gemv: its counter, and a value and an index per workgroup.
struct GemvScratch {
  uint64_t counterBytes = 0, partialBytes = 0;
};
GemvScratch gemvScratch(const GemvSpec &spec);

// MODE_SINGLE, or MODE_GATE_UP (gateUp). Bindings in this order: x, w (or w_gate, w_up), [g], [residual],
// result, [token, ids, partial, counters], [prefetch0...] (then the state buffer).
KernelSource gemvKernel(const GemvSpec &spec);
std::array<uint32_t, 3> gemvGrid(const GemvSpec &spec);

} // namespace gerbil::codegen
