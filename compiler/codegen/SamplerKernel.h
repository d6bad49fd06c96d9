// The GPU sampler (sample.glsl): five launches over the last logits row that choose the next token with
// the repetition penalty, temperature, top-k, top-p, min-p and a seeded draw. PlanBuilder and the kernel
// tests both specialise it here.
#pragma once

#include "compiler/codegen/KernelWriter.h"

#include <array>

namespace gerbil::codegen {

// Bindings: logits, token (input_ids), sampling (the state's sampling words), counters (scratch, 5), work
// (scratch), then the state buffer.
struct SamplerKernels {
  static constexpr int kStages = 5;
  std::array<KernelSource, kStages> stages;
  std::array<uint32_t, 3> grid{};
  uint64_t counterBytes = 0, workBytes = 0;
};
// Throws CodegenError for a vocabulary too large for one run of workgroups.
SamplerKernels samplerKernels(int64_t vocab, int64_t maxSequence);

} // namespace gerbil::codegen
