#include "compiler/codegen/ShaderCompiler.h"

#include <shaderc/shaderc.h>
#include <spirv-tools/libspirv.hpp>

#include <cstring>

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

ShaderCompiler::ShaderCompiler() : impl_(std::make_unique<Impl>()) {
  if (!impl_->compiler || !impl_->options) throw CodegenError("cannot initialise libshaderc");
}
ShaderCompiler::~ShaderCompiler() = default;

std::vector<uint32_t> ShaderCompiler::compile(const std::string &glsl, const std::string &name) {
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
  return words;
}

} // namespace gerbil::codegen
