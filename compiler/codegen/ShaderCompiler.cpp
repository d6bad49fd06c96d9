#include "compiler/codegen/ShaderCompiler.h"

#include "compiler/codegen/CooperativeMatrixKHR.h"
#include "compiler/codegen/KernelWriter.h"

#include <shaderc/shaderc.h>
#include <spirv-tools/libspirv.hpp>
#include <spirv/unified1/spirv.hpp>

#include <cstring>
#include <map>
#include <set>

namespace gerbil::codegen {

struct ShaderCompiler::Impl {
  shaderc_compiler_t compiler = shaderc_compiler_initialize();
  shaderc_compile_options_t options = shaderc_compile_options_initialize();
  spvtools::SpirvTools validator{SPV_ENV_VULKAN_1_2};
  std::string validationMessages;

  Impl() {
    shaderc_compile_options_set_target_env(options, shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_2);
    shaderc_compile_options_set_target_spirv(options, shaderc_spirv_version_1_5);
    shaderc_compile_options_set_optimization_level(options, shaderc_optimization_level_performance);
    validator.SetMessageConsumer([this](spv_message_level_t, const char *, const spv_position_t &position,
                                        const char *message) {
      validationMessages += "  word " + std::to_string(position.index) + ": " + message + "\n";
    });
  }
  ~Impl() {
    shaderc_compile_options_release(options);
    shaderc_compiler_release(compiler);
  }
};

uint32_t workgroupMemoryBytes(const std::vector<uint32_t> &spirv) {
  using namespace spv;
  std::map<uint32_t, uint64_t> typeBytes, constants, pointee;
  auto bytesOf = [&](uint32_t id) { return typeBytes.count(id) ? typeBytes[id] : 0; };
  uint64_t total = 0;
  for (size_t at = 5; at < spirv.size();) {
    uint32_t count = spirv[at] >> 16, opcode = spirv[at] & 0xffff;
    if (count == 0 || at + count > spirv.size())
      throw CodegenError("malformed SPIR-V: truncated instruction");
    const uint32_t *w = &spirv[at];
    switch (opcode) {
    case OpTypeBool:
      typeBytes[w[1]] = 4;
      break;
    case OpTypeInt:
    case OpTypeFloat:
      typeBytes[w[1]] = w[2] / 8;
      break;
    case OpTypeVector:
    case OpTypeMatrix:
      typeBytes[w[1]] = bytesOf(w[2]) * w[3];
      break;
    case OpTypeArray:
      typeBytes[w[1]] = bytesOf(w[2]) * (constants.count(w[3]) ? constants[w[3]] : 0);
      break;
    case OpTypeStruct: {
      uint64_t sum = 0;
      for (uint32_t i = 2; i < count; ++i) sum += bytesOf(w[i]);
      typeBytes[w[1]] = sum;
      break;
    }
    case OpTypePointer:
      if (w[2] == StorageClassWorkgroup) pointee[w[1]] = bytesOf(w[3]);
      break;
    case OpConstant:
      if (count >= 4) constants[w[2]] = w[3];
      break;
    case OpVariable:
      if (count >= 4 && w[3] == StorageClassWorkgroup && pointee.count(w[1])) total += pointee[w[1]];
      break;
    default:
      break;
    }
    at += count;
  }
  return static_cast<uint32_t>(total);
}

size_t privateConstantCopies(const std::vector<uint32_t> &spirv) {
  // Arrays of numbers and vectors (not of cooperative matrices, whose initialized variables are the
  // accumulators), and the Function pointers to them.
  std::set<uint32_t> numbers, tables, pointersToTables;
  size_t copies = 0;
  for (size_t at = 5; at < spirv.size();) {
    const uint32_t count = spirv[at] >> 16, opcode = spirv[at] & 0xffff;
    if (count == 0 || at + count > spirv.size())
      throw CodegenError("malformed SPIR-V: truncated instruction");
    const uint32_t *w = &spirv[at];
    if ((opcode == spv::OpTypeInt || opcode == spv::OpTypeFloat || opcode == spv::OpTypeVector) && count >= 2)
      numbers.insert(w[1]);
    else if (opcode == spv::OpTypeArray && count >= 3 && numbers.count(w[2]))
      tables.insert(w[1]);
    else if (opcode == spv::OpTypePointer && count >= 4 && w[2] == spv::StorageClassFunction &&
             tables.count(w[3]))
      pointersToTables.insert(w[1]);
    // OpVariable result-type result storage-class [initializer]
    else if (opcode == spv::OpVariable && count == 5 && pointersToTables.count(w[1]))
      ++copies;
    at += count;
  }
  return copies;
}

ShaderCompiler::ShaderCompiler() : impl_(std::make_unique<Impl>()) {
  if (!impl_->compiler || !impl_->options) throw CodegenError("cannot initialise libshaderc");
}
ShaderCompiler::~ShaderCompiler() = default;

std::vector<uint32_t> ShaderCompiler::compile(const KernelSource &kernel, const std::string &name) {
  return compile(writeKernel(kernel), name,
                 kernel.khrCooperativeMatrix ? CooperativeMatrices::RetargetToKhr
                                             : CooperativeMatrices::AsWritten);
}

std::vector<uint32_t> ShaderCompiler::compile(const std::string &glsl, const std::string &name,
                                              CooperativeMatrices matrices) {
  shaderc_compilation_result_t result = shaderc_compile_into_spv(
      impl_->compiler, glsl.data(), glsl.size(), shaderc_compute_shader, name.c_str(), "main", impl_->options);
  std::unique_ptr<shaderc_compilation_result, decltype(&shaderc_result_release)> guard(result,
                                                                                       shaderc_result_release);
  if (shaderc_result_get_compilation_status(result) != shaderc_compilation_status_success)
    throw CodegenError("kernel '" + name + "' does not compile:\n" + shaderc_result_get_error_message(result));
  size_t bytes = shaderc_result_get_length(result);
  std::vector<uint32_t> words(bytes / 4);
  std::memcpy(words.data(), shaderc_result_get_bytes(result), words.size() * 4);

  impl_->validationMessages.clear();
  if (!impl_->validator.Validate(words))
    throw CodegenError("kernel '" + name + "' is not valid SPIR-V for Vulkan 1.2:\n" + impl_->validationMessages);
  // A kernel's own mistake, not the user's: found by the tests that compile every kernel.
  if (privateConstantCopies(words) != 0)
    throw CodegenError("kernel '" + name +
                       "' indexes a constant array by a value the compiler does not know (a private copy of "
                       "the array in each invocation): select the element instead (common.glsl's invFreqAt)");
  if (matrices == CooperativeMatrices::AsWritten) return words;
  try {
    return retargetToKhrCooperativeMatrix(words);
  } catch (const CodegenError &e) {
    throw CodegenError("kernel '" + name + "': " + e.what());
  }
}

} // namespace gerbil::codegen
