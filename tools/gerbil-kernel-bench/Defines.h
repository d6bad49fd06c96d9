// gerbil-kernel-bench's --define NAME=VALUE, split once for every subcommand.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace gerbil::bench {

// (NAME, VALUE) as codegen's KernelSource::defines hold them; a bare NAME is NAME=1.
using Define = std::pair<std::string, std::string>;

inline std::vector<Define> parseDefines(const std::vector<std::string> &texts) {
  std::vector<Define> defines;
  for (const std::string &text : texts) {
    size_t eq = text.find('=');
    defines.emplace_back(text.substr(0, eq), eq == std::string::npos ? "1" : text.substr(eq + 1));
  }
  return defines;
}

} // namespace gerbil::bench
