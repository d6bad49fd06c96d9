#include "compiler/codegen/SamplerKernel.h"

#include "compiler/codegen/ShaderCompiler.h"

#include <algorithm>

namespace gerbil::codegen {
namespace {
constexpr int64_t kWorkgroup = 256; // = the histograms' bins
// The draw's last workgroup takes one block a invocation: at most kWorkgroup workgroups, so each takes at
// least vocab / (256 · 256) logits an invocation; 4 keeps ~150 workgroups over a 152k vocabulary.
constexpr int64_t kMinLoads = 4;
constexpr int64_t kResultWords = 16, kHistogramWords = 3 * 256;
} // namespace

SamplerKernels samplerKernels(int64_t vocab, int64_t maxSequence) {
  if (vocab <= 0) throw CodegenError("the sampler needs a vocabulary");
  const int64_t loads =
      std::max(kMinLoads, (vocab + kWorkgroup * kWorkgroup - 1) / (kWorkgroup * kWorkgroup));
  const int64_t groups = (vocab + kWorkgroup * loads - 1) / (kWorkgroup * loads);
  if (loads > 64)
    throw CodegenError("a vocabulary of " + std::to_string(vocab) +
                       " tokens is larger than the GPU sampler takes");
  SamplerKernels s;
  for (int stage = 0; stage < SamplerKernels::kStages; ++stage) {
    KernelSource &k = s.stages[static_cast<size_t>(stage)];
    k.templateFile = "sample.glsl";
    k.libraries = {"best_candidate.glsl"};
    k.workgroup = {kWorkgroup, 1, 1};
    k.defines = {{"STAGE", std::to_string(stage)},
                 {"VOCAB", uintValue(vocab)},
                 {"SEQ", uintValue(maxSequence)},
                 {"LOADS", uintValue(loads)},
                 {"GROUPS", uintValue(groups)}};
    k.bindings = {{"logits", Access::Read, plan::DType::F32},
                  {"token", Access::TokenIdsWrite, plan::DType::I32},
                  {"sampling", Access::TokenIdsWrite, plan::DType::I32},
                  {"counters", Access::TokenIdsWrite, plan::DType::I32},
                  {"work", Access::TokenIdsWrite, plan::DType::I32, false, true}};
  }
  s.grid = {static_cast<uint32_t>(groups), 1, 1};
  s.counterBytes = 4 * SamplerKernels::kStages;
  s.workBytes = 4 * static_cast<uint64_t>(kResultWords + 3 * kHistogramWords + 2 * groups);
  return s;
}

} // namespace gerbil::codegen
