// The front end of gerbilc: a HuggingFace config.json and the arch spec its `architectures[0]` selects
// (arch-specs/*.yaml, compiled in) resolve into a ModelDescription. Every error is a FrontendError whose
// message names the file and the key at fault.
#pragma once

#include "compiler/frontend/ModelDescription.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gerbil {

struct ArchitectureEntry {
  std::string architecture; // "LlamaForCausalLM"
  std::string family;       // "llama"
  std::string specFile;     // "arch-specs/llama.yaml", or the path of a spec from extraSpecDir
};

// Every architecture the built-in specs and those in `extraSpecDir` (if given) handle, sorted by name.
std::vector<ArchitectureEntry> listArchitectures(const std::string &extraSpecDir = "");

struct FrontendOptions {
  // A folder of *.yaml arch specs that add architectures or override built-in ones (by architecture).
  std::string extraSpecDir;
  // The longest sequence the plan will run (gerbilc --max-seq). 0: unknown. Chooses longrope's long factors
  // when it exceeds the pretraining length, and is checked against a learned position table.
  int64_t maxSequence = 0;
};

// Reads and resolves a config.json; messages name the file as `configPath` spells it.
ModelDescription loadModel(const std::string &configPath, const FrontendOptions &options = {});

// Resolves config.json text; `configName` names it in messages.
ModelDescription resolveModel(const std::string &configJson, const std::string &configName,
                              const FrontendOptions &options = {});

} // namespace gerbil
