// The gerbil passes and the standard pipeline gerbilc runs.
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include <memory>
#include <string>

namespace mlir::gerbil {

#define GEN_PASS_DECL
#include "gerbil/Passes/Passes.h.inc"

struct PipelineOptions {
  std::string weightDtype = "f32";
  std::string kvDtype = "f32"; // what the KV cache holds
  int64_t maxTokens = 512;
  int64_t maxSequence = 0; // the KV cache's positions (--max-seq); 0: not known
  bool fuse = true;
  std::string target = "generic"; // a TargetProfile name
  // gerbil-fuse-logits-argmax: on the H200 the LM head's gemv with the argmax took longer than the two
  // launches apart (docs/decode-latency.md), so it runs only when asked.
  bool fuseLogitsArgmax = false;
  // gerbil-fuse-embedding: one launch a decode token fewer, but no faster on the H200 (BENCHMARKS.md).
  bool fuseEmbedding = false;
  // gerbil-prefetch-weights' budget: the target profile's (decodePrefetchBytes) where negative, with the
  // profile's thresholds of launch size; given, it applies to every launch (and a page stride given, to
  // every model).
  int64_t prefetchBytes = -1;
  int64_t prefetchPageBytes = -1; // and its page stride (decodePrefetchPageBytes)
  bool spreadPages = false;       // gerbil-prefetch-weights' spread-pages
};

// verify -> layout -> [fuse-norm-prologue -> fuse-residual -> group-qkv -> fuse-rope-kv-write ->
// (fuse-embedding) -> group-gate-up -> (fuse-logits-argmax) -> fold-norm-weights]
// -> dispatch formation -> weight prefetch -> memory planning -> verify.

void buildGerbilPipeline(OpPassManager &pm, const PipelineOptions &options);

#define GEN_PASS_REGISTRATION
#include "gerbil/Passes/Passes.h.inc"

} // namespace mlir::gerbil
