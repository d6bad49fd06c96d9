#include "compiler/frontend/Registry.h"

#include "compiler/frontend/EmbeddedSpecs.h"
#include "compiler/frontend/Frontend.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gerbil {

namespace {

// Adds `specs` (all from one source) to the registry; within a source an architecture may appear once, and
// a later source replaces earlier claims.
void addSpecs(SpecRegistry &registry, std::vector<ArchSpec> specs) {
  std::map<std::string, std::string> claimedBy;
  for (auto &spec : specs) {
    for (const auto &architecture : spec.architectures) {
      auto [it, inserted] = claimedBy.emplace(architecture, spec.specFile);
      if (!inserted)
        throw FrontendError(spec.specFile + ": architecture '" + architecture + "' is already handled by " +
                            it->second);
    }
    size_t index = registry.specs.size();
    for (const auto &architecture : spec.architectures) registry.byArchitecture[architecture] = index;
    registry.specs.push_back(std::move(spec));
  }
}

std::vector<ArchSpec> builtinSpecs() {
  std::vector<ArchSpec> specs;
  for (size_t i = 0; i < embedded_specs::kFileCount; ++i) {
    const auto &file = embedded_specs::kFiles[i];
    specs.push_back(parseArchSpec(std::string(file.text, file.size), std::string("arch-specs/") + file.name));
  }
  return specs;
}

std::vector<ArchSpec> folderSpecs(const std::string &folder) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(folder, error))
    throw FrontendError(folder + ": the extra arch-spec folder does not exist or is not a folder");
  std::vector<fs::path> files;
  for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error))
    if (it->path().extension() == ".yaml" && it->is_regular_file()) files.push_back(it->path());
  if (error) throw FrontendError(folder + ": cannot list the extra arch-spec folder: " + error.message());
  std::sort(files.begin(), files.end());

  std::vector<ArchSpec> specs;
  for (const auto &path : files) {
    std::ifstream stream(path, std::ios::binary);
    if (!stream) throw FrontendError(path.string() + ": cannot read the arch spec");
    std::ostringstream text;
    text << stream.rdbuf();
    specs.push_back(parseArchSpec(text.str(), path.string()));
  }
  return specs;
}

} // namespace

const ArchSpec *SpecRegistry::find(const std::string &architecture) const {
  auto it = byArchitecture.find(architecture);
  return it == byArchitecture.end() ? nullptr : &specs[it->second];
}

std::vector<std::string> SpecRegistry::architectures() const {
  std::vector<std::string> names;
  for (const auto &[architecture, index] : byArchitecture) names.push_back(architecture);
  return names; // std::map keeps them sorted
}

SpecRegistry loadSpecRegistry(const std::string &extraSpecDir) {
  SpecRegistry registry;
  addSpecs(registry, builtinSpecs());
  if (!extraSpecDir.empty()) addSpecs(registry, folderSpecs(extraSpecDir));
  return registry;
}

std::vector<ArchitectureEntry> listArchitectures(const std::string &extraSpecDir) {
  SpecRegistry registry = loadSpecRegistry(extraSpecDir);
  std::vector<ArchitectureEntry> entries;
  for (const auto &[architecture, index] : registry.byArchitecture) {
    const ArchSpec &spec = registry.specs[index];
    entries.push_back({architecture, spec.family, spec.specFile});
  }
  return entries;
}

} // namespace gerbil
