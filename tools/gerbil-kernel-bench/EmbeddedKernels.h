// gerbil-kernel-bench's own kernels (sync.glsl, fused_mlp.glsl), embedded at build time by
// cmake/EmbedFiles.cmake as benchKernelSources(), so that the tool runs without its source tree.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

const std::vector<std::pair<std::string_view, std::string_view>> &benchKernelSources();

namespace gerbil::bench {

// The text of the embedded kernel `file`, with `defines` inserted after its #version line.
inline std::string benchKernel(std::string_view file, const std::string &defines) {
  for (const auto &[name, text] : benchKernelSources())
    if (name == file) {
      std::string glsl(text);
      glsl.insert(glsl.find('\n') + 1, defines);
      return glsl;
    }
  throw std::runtime_error(std::string(file) + " is not embedded");
}

} // namespace gerbil::bench
