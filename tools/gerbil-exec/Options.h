// The command line of gerbil-exec: one struct for every flag, filled by CLI11.
#pragma once

#include "runtime/exec/Sampler.h"

#include <CLI/CLI.hpp>

#include <cstdint>
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
  std::string tokenizer; // default: tokenizer.json in the weights folder
  std::string system;    // the chat's system message
  std::vector<std::string> stops;
  bool ignoreEos = false;
  // Generation.
  int64_t maxNewTokens = 16;
  exec::SamplingOptions sampling;
  bool stopAtEos = false; // --prompt-ids mode only: text modes always stop at an end-of-sequence token
  // Output and device.
  bool json = false, listDevices = false, deviceInfo = false, validation = false;
  int device = -1;
};

void addOptions(CLI::App &app, Options &options);

// Combinations that CLI11 cannot check; returns the usage error, or "" when there is none.
std::string checkOptions(const CLI::App &app, const Options &options);

} // namespace gerbil::tool
