// gerbil-kernel-bench's --define NAME=VALUE, split once for every subcommand by codegen's parser (the one of
// gerbilc --kernel-define), which refuses names that are not macro names.
#pragma once

#include "compiler/codegen/KernelWriter.h"
#include "compiler/codegen/ShaderCompiler.h"

#include <string>
#include <utility>
#include <vector>

namespace gerbil::bench {

// (NAME, VALUE) as codegen's KernelSource::defines hold them; a bare NAME is NAME=1.
using Define = std::pair<std::string, std::string>;

// Throws CodegenError for a name that is not a macro name, and for a FAMILY: prefix (the bench times one
// kernel: its defines are that kernel's).
inline std::vector<Define> parseDefines(const std::vector<std::string> &texts) {
  std::vector<Define> defines;
  for (const std::string &text : texts) {
    codegen::KernelDefine define;
    try {
      define = codegen::parseKernelDefine(text);
    } catch (const codegen::CodegenError &e) {
      throw codegen::CodegenError(std::string("--define ") + e.what());
    }
    if (!define.family.empty())
      throw codegen::CodegenError("--define '" + text + "': NAME[=VALUE], without a kernel family");
    defines.emplace_back(define.name, define.value);
  }
  return defines;
}

} // namespace gerbil::bench
