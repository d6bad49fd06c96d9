// The arch specs known to a run: those compiled into the library (arch-specs/*.yaml at build time) and, on
// top, those of an extra folder, which add architectures or replace built-in ones.
#pragma once

#include "compiler/frontend/ArchSpec.h"

#include <map>
#include <string>
#include <vector>

namespace gerbil {

struct SpecRegistry {
  std::vector<ArchSpec> specs;
  std::map<std::string, size_t> byArchitecture; // architecture -> index into specs

  const ArchSpec *find(const std::string &architecture) const;
  std::vector<std::string> architectures() const; // sorted
};

// Throws FrontendError for a broken spec (naming it), an unreadable folder, or two specs of one source
// claiming the same architecture.
SpecRegistry loadSpecRegistry(const std::string &extraSpecDir);

} // namespace gerbil
