#include "compiler/codegen/ArgmaxKernel.h"

#include "gerbil/Passes/KernelShapes.h"

namespace gerbil::codegen {

ArgmaxKernel argmaxKernel(int64_t vocab, int64_t maxSequence) {
  ArgmaxKernel a;
  KernelSource &k = a.source;
  const mlir::gerbil::ArgmaxGrid grid = mlir::gerbil::argmaxGrid(vocab);
  k.templateFile = "argmax.glsl";
  k.libraries = {"best_candidate.glsl", "argmax_combine.glsl"};
  k.workgroup = {mlir::gerbil::kArgmaxWorkgroup, 1, 1};
  k.defines = {{"VOCAB", uintValue(vocab)},
               {"SEQ", uintValue(maxSequence)},
               {"LOADS", uintValue(mlir::gerbil::kArgmaxLoads)},
               {"GROUPS", uintValue(grid.groups)},
               {"SEGMENTS", uintValue(grid.segments)}};
  k.bindings = {{"logits", Access::Read, plan::DType::F32},
                {"token", Access::TokenIdsWrite, plan::DType::I32},
                {"ids", Access::TokenIdsWrite, plan::DType::I32},
                {"partial", Access::ReadWrite, plan::DType::F32, false, true},
                {"counters", Access::TokenIdsWrite, plan::DType::I32}};
  a.grid = {static_cast<uint32_t>(grid.groups), 1, 1};
  // Over 256 · 2048 logits the workgroups hand over in segments, whose counters and candidates need room.
  a.scratchCounterBytes = static_cast<uint64_t>(grid.counters()) * 4;
  a.scratchPartialBytes = static_cast<uint64_t>(2 * grid.candidates()) * 4;
  return a;
}

} // namespace gerbil::codegen
