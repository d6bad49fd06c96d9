// Decode's one-token matmul (gemv.glsl): gerbil.linear of one token, and the shape and weight defines that
// the grouped projections (q/k/v, gate/up; PlanBuilder::lowerGroup) share with it. PlanBuilder and the kernel
// tests both specialise it here.
#pragma once

#include "compiler/codegen/KernelWriter.h"
#include "compiler/codegen/PrefetchWorkers.h"
#include "compiler/codegen/RopeKernel.h"

#include <optional>

namespace gerbil::codegen {

// The mode-independent defines of gemv.glsl for a K -> N projection (N outputs; with MODE_GATE_UP, N gate/up
// pairs): mode, rows per workgroup, teams per pair, load width and weight type; and the workgroup size.
void defineGemv(KernelSource &k, const std::string &mode, int64_t kDim, int64_t n, plan::DType weights,
                bool subgroupOps, int64_t split = 0, int64_t workgroup = 0);

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
  int64_t workgroup = 0; // invocations a workgroup at least; 0: the catalog's (a variant to tune with)
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

// MODE_SINGLE, or MODE_GATE_UP (gateUp: groupedGemvKernel's, without biases). Bindings in this order: x, w
// (or w_gate, w_up), [g], [residual], result, [token, ids, partial, counters], [prefetch0...] (then the state
// buffer).
KernelSource gemvKernel(const GemvSpec &spec);
std::array<uint32_t, 3> gemvGrid(const GemvSpec &spec);

// A grouped projection's decode gemv (the fusion groups of gerbil-group-projections;
// PlanBuilder::lowerGroup): MODE_QKV, q, k and v of one input with their biases, RoPE and the KV-cache write
// where given, or MODE_GATE_UP, gate and up with their activation product.
struct GroupedGemvSpec {
  bool qkv = false;
  int64_t k = 0;
  int64_t n = 0;                  // MODE_GATE_UP: outputs (gate/up pairs)
  int64_t nq = 0, nk = 0, nv = 0; // MODE_QKV: rows of each
  plan::DType weight = plan::DType::F32;
  bool norm = false;        // RMSNorm prologue
  bool normWeighted = true; // its weight g bound (false: folded into the matrices)
  double eps = 0;
  bool subgroupOps = true;
  std::array<bool, 3> biases{};        // a bias for each part (q, k, v; gate, up)
  bool gelu = false, geluTanh = false; // MODE_GATE_UP's activation: SiLU unless gelu
  int64_t split = 0;                   // MODE_GATE_UP: teams per pair; 0: the catalog's (a variant to tune)
  int64_t workgroup = 0;               // invocations a workgroup at least; 0: the catalog's (a variant)
  std::optional<RotarySpec> rope;      // MODE_QKV: q and k rotated
  // MODE_QKV: k and v written into the KV cache of this head_dim and maxSequence positions (bindings k_cache,
  // v_cache) instead of results of their own; 0: not.
  int64_t cacheHeadDim = 0, maxSequence = 0;
  // EMBED_INPUT (gerbil-fuse-embedding): the input is row ids[0] of an embedding table of `vocab` rows (f32,
  // or f16 beside f16/bf16 matrices), which the kernel also writes to `embedding`.
  bool embedding = false;
  plan::DType table = plan::DType::F32;
  int64_t vocab = 0;
};
// Bindings in this order: [ids], x, [embedding], w_q, w_k, w_v (or w_gate, w_up), [g], the biases there are
// (bias_q...), then result_q and k_cache, v_cache (or result_k, result_v), or result; absent biases read 0.
// Throws CodegenError for an embedding table it cannot read.
KernelSource groupedGemvKernel(const GroupedGemvSpec &spec);
// Its grid (the catalog's qkvKernel / gateUpKernel decode grid).
std::array<uint32_t, 3> groupedGemvGrid(const GroupedGemvSpec &spec);

} // namespace gerbil::codegen
