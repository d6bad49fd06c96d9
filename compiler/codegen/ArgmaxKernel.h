// The greedy token of the last logits row (argmax.glsl), split over workgroups that hand their partial
// results to the last one through the scratch. PlanBuilder and the kernel tests both specialise it here.
#pragma once

#include "compiler/codegen/KernelWriter.h"

namespace gerbil::codegen {

// Bindings: logits, token, ids, partial (scratch), counters (scratch), then the state buffer. The scratch
// holds one counter and each workgroup's best value and index.
struct ArgmaxKernel {
  KernelSource source;
  std::array<uint32_t, 3> grid{};
  uint64_t scratchCounterBytes = 0, scratchPartialBytes = 0;
};
ArgmaxKernel argmaxKernel(int64_t vocab, int64_t maxSequence);

} // namespace gerbil::codegen
