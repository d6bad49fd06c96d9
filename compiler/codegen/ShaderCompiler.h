// GLSL -> SPIR-V with libshaderc, then SPIRV-Tools validation for Vulkan 1.2 (and, for kernels that run on
// VK_KHR_cooperative_matrix, the retargeting of CooperativeMatrixKHR.h, which Debian 12's SPIRV-Tools
// cannot validate).
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace gerbil::codegen {

struct KernelSource;

class CodegenError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// Bytes of workgroup (shared) memory the module's variables take, packed tightly: what a plan's
// maxSharedMemoryBytes requirement is made of. Throws CodegenError on a malformed module.
uint32_t workgroupMemoryBytes(const std::vector<uint32_t> &spirv);

// Function-storage variables with an initializer: what glslang makes of a constant array indexed by a value
// it does not know (a private copy of the table, which a driver may build in every invocation's local
// memory before the first use). compile() refuses kernels that have any.
size_t privateConstantCopies(const std::vector<uint32_t> &spirv);

class ShaderCompiler {
public:
  ShaderCompiler();
  ~ShaderCompiler();
  ShaderCompiler(const ShaderCompiler &) = delete;
  ShaderCompiler &operator=(const ShaderCompiler &) = delete;

  enum class CooperativeMatrices { AsWritten, RetargetToKhr };
  // Throws CodegenError with the compiler's or validator's message, naming the kernel.
  std::vector<uint32_t> compile(const std::string &glsl, const std::string &name,
                                CooperativeMatrices matrices = CooperativeMatrices::AsWritten);
  // writeKernel(kernel), compiled for the extension the kernel asks (KernelSource::khrCooperativeMatrix).
  std::vector<uint32_t> compile(const KernelSource &kernel, const std::string &name);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace gerbil::codegen
