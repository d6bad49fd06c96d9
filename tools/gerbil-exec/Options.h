// The command line of gerbil-exec: one struct for every flag, filled by CLI11.
#pragma once

#include "runtime/exec/Sampler.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gerbil::tool {

struct Options {
  std::string plan, weights, dumpLogits;
  // What to run: exactly one of these.
  std::string promptIds;  // --prompt-ids 1,2,3: ids in, ids out
  std::string prompt;     // --prompt TEXT: text in, text out
  std::string promptFile; // --prompt-file F
  bool chat = false;      // --chat: user turns from stdin
  // Text modes.
  std::string tokenizer;                 // default: tokenizer.json in the weights folder
  std::string system;                    // the chat's system message
  std::vector<std::string> templateVars; // --template-var NAME=JSON, for the chat template
  bool noThinking = false;               // --no-thinking: enable_thinking=false
  std::vector<std::string> stops;
  bool ignoreEos = false;
  // Generation.
  int64_t maxNewTokens = 16;
  exec::SamplingOptions sampling;
  bool stopAtEos = false; // --prompt-ids mode only: text modes always stop at an end-of-sequence token
  // Output and device.
  bool json = false, listDevices = false, deviceInfo = false, planInfo = false, validation = false;
  int device = -1;
  std::optional<uint32_t> spinWaitMicroseconds; // unset: the runtime's default (vk::ContextOptions)
  uint64_t weightBlockMiB = 0;                  // exec::uploadWeights' blockBytes, in MiB
};

void addOptions(CLI::App &app, Options &options);

// Combinations that CLI11 cannot check; returns the usage error, or "" when there is none.
std::string checkOptions(const CLI::App &app, const Options &options);

// The variables --template-var and --no-thinking give the chat template, as a JSON object. Throws
// std::invalid_argument with the usage error (a missing '=', a value that is not JSON, a reserved name).
nlohmann::ordered_json templateVariables(const Options &options);

} // namespace gerbil::tool
