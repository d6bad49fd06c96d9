// Cooperative-matrix kernels for devices with VK_KHR_cooperative_matrix. Debian 12's glslang (12) compiles
// only GL_NV_cooperative_matrix, whose SPIR-V (SPV_NV_cooperative_matrix) differs from
// SPV_KHR_cooperative_matrix's in one way that matters: an NV matrix type does not say whether it is an A, B
// or accumulator operand, and a KHR type must. So kernels are written against the NV extension, compiled and
// validated, and this pass then retargets the module: it infers each matrix's use from the
// multiply-adds it reaches (through loads, stores, variables, access chains, composites and phis), gives
// every type that holds matrices one copy per use, and rewrites the NV instructions to their KHR forms.
#pragma once

#include <cstdint>
#include <vector>

namespace gerbil::codegen {

// Throws CodegenError when the module cannot be expressed with KHR matrices: a matrix that would be both
// an A and a B operand, or one passed to or returned from a function (shaderc's optimiser inlines them).
// A module without NV cooperative matrices is returned as it is.
std::vector<uint32_t> retargetToKhrCooperativeMatrix(const std::vector<uint32_t> &spirv);

} // namespace gerbil::codegen
