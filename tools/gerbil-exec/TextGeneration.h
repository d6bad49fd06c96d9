// What the text modes share: the tokenizer and stop tokens of a plan, and one generation streamed as text.
#pragma once

#include "tools/gerbil-exec/Options.h"

#include "runtime/exec/Generation.h"
#include "runtime/plan/Plan.h"
#include "runtime/tokenizer/Tokenizer.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <vector>

namespace gerbil::tool {

struct TextModel {
  plan::Plan plan;
  std::string weightsDir, tokenizerPath;
  tokenizer::Tokenizer tokenizer;
  // End-of-sequence ids: config.json's, generation_config.json's and the tokenizer's eos_token (none with
  // --ignore-eos).
  std::vector<int64_t> stopTokenIds;
};

// Reads the plan, the tokenizer (--tokenizer, else tokenizer.json in the weights folder) and the stop tokens;
// touches no device. Throws RuntimeError (a missing file, a vocabulary larger than the model's), PlanError or
// TokenizerError.
TextModel loadTextModel(const Options &options);

// The ids of generation_config.json's "eos_token_id" in `folder` (none without the file). Throws RuntimeError
// naming the file when it is malformed.
std::vector<int64_t> generationConfigEosIds(const std::string &folder);

struct TextRequest {
  int64_t maxNewTokens = 16;
  exec::SamplingOptions sampling;
  std::vector<int64_t> stopTokenIds;
  std::vector<std::string> stopStrings;
  bool keepLogits = false;
  bool interruptible = false; // Ctrl-C (tools/gerbil-exec/Interrupt.h) ends the reply
};

struct TextReply {
  exec::GenerationResult generation;
  std::string text;       // decoded without special tokens (and cleaned up as the tokenizer config says),
                          // cut before a stop string
  std::string stopReason; // length | stop_token | stop_string | interrupted
};

// Generates after the executor's position and writes the text to `stream` as it is made (nullptr: not at
// all), never splitting a UTF-8 character and never showing part of a stop string. Throws RuntimeError
// when the model makes an id the tokenizer does not have.
TextReply generateText(exec::Executor &executor, const tokenizer::Tokenizer &tokenizer,
                       const std::vector<int32_t> &prompt, const TextRequest &request, std::FILE *stream);

// "prompt N tokens in T ms (R tokens/s), M new tokens in T ms (R tokens/s) on DEVICE" on stderr.
void printStats(size_t promptTokens, const exec::GenerationResult &generation, const std::string &device);
nlohmann::json timingsJson(size_t promptTokens, const exec::GenerationResult &generation, double totalMs,
                           double loadMs);

} // namespace gerbil::tool
