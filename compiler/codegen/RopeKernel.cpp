#include "compiler/codegen/RopeKernel.h"

#include "compiler/codegen/ShaderCompiler.h"

#include "gerbil/Passes/KernelShapes.h"

namespace gerbil::codegen {

void defineRotary(KernelSource &k, const RotarySpec &rotary) {
  k.defines.emplace_back("ROTARY_DIM", uintValue(rotary.rotaryDim));
  k.defines.emplace_back("ATTENTION_SCALING", glslFloat(rotary.attentionScaling));
  std::string values;
  for (double f : rotary.invFreq) values += (values.empty() ? "" : ", ") + glslFloat(static_cast<float>(f));
  k.defines.emplace_back("INV_FREQ_VALUES", values);
}

namespace {

// rope_append.glsl's units: 4 dims (16-byte loads and stores) where the rotating half and the head are
// multiples of 4, else single dims; and the units an invocation takes.
int64_t ropeUnitDims(const RotarySpec &rotary) {
  return rotary.rotaryDim % 8 == 0 && rotary.headDim % 4 == 0 ? 4 : 1;
}
int64_t ropeUnitLoads(const RotarySpec &rotary) {
  return ropeUnitDims(rotary) == 4 ? 2 : mlir::gerbil::kRowLoads;
}

} // namespace

KernelSource ropeAppendKernel(const RotarySpec &rotary, int64_t qHeads, int64_t kvHeads, int64_t sequence) {
  if (rotary.rotaryDim <= 0 || rotary.rotaryDim > rotary.headDim || rotary.rotaryDim % 2 != 0 ||
      static_cast<int64_t>(rotary.invFreq.size()) != rotary.rotaryDim / 2)
    throw CodegenError("rope_append: rotary_dim " + std::to_string(rotary.rotaryDim) + " of head_dim " +
                       std::to_string(rotary.headDim) + " with " + std::to_string(rotary.invFreq.size()) +
                       " frequencies");
  KernelSource k;
  k.templateFile = "rope_append.glsl";
  k.workgroup = {mlir::gerbil::kRowWorkgroup, 1, 1};
  k.defines = {{"Q_HEADS", uintValue(qHeads)},
               {"KV_HEADS", uintValue(kvHeads)},
               {"HEAD_DIM", uintValue(rotary.headDim)},
               {"SEQ", uintValue(sequence)},
               {"LOADS", uintValue(ropeUnitLoads(rotary))},
               {"UNIT_DIMS", std::to_string(ropeUnitDims(rotary))}};
  defineRotary(k, rotary);
  k.bindings = {{"q", Access::Read, plan::DType::F32},        {"k", Access::Read, plan::DType::F32},
                {"v", Access::Read, plan::DType::F32},        {"result", Access::Write, plan::DType::F32},
                {"k_cache", Access::Write, plan::DType::F32}, {"v_cache", Access::Write, plan::DType::F32}};
  if (ropeUnitDims(rotary) == 4)
    for (KernelBinding &b : k.bindings) b.vec4View = true;
  return k;
}

uint32_t ropeAppendColumns(const RotarySpec &rotary, int64_t qHeads, int64_t kvHeads) {
  // A query or key head is (headDim - rotaryDim / 2) / unit dims units (a rotating pair of dims is one), a
  // value head headDim / unit dims (rope_append.glsl).
  const int64_t dims = ropeUnitDims(rotary),
                units = ((qHeads + kvHeads) * (rotary.headDim - rotary.rotaryDim / 2) +
                         kvHeads * rotary.headDim) /
                        dims,
                perGroup = mlir::gerbil::kRowWorkgroup * ropeUnitLoads(rotary);
  return static_cast<uint32_t>((units + perGroup - 1) / perGroup);
}

} // namespace gerbil::codegen
