// --prompt-ids: the original contract of gerbil-exec, unchanged (flags, output, exit codes).
#include "tools/gerbil-exec/LoadedModel.h"
#include "tools/gerbil-exec/Modes.h"

#include "runtime/exec/Generation.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <climits>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <unistd.h>

namespace gerbil::tool {
namespace {

std::vector<int32_t> parseIds(const std::string &text) {
  std::vector<int32_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception &) {
      used = 0;
    }
    while (used < item.size() && std::isspace(static_cast<unsigned char>(item[used]))) ++used;
    if (item.empty() || used != item.size() || v < INT32_MIN || v > INT32_MAX)
      throw exec::RuntimeError("--prompt-ids: '" + item + "' is not a token id");
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) throw exec::RuntimeError("--prompt-ids: no token ids given");
  return ids;
}

} // namespace

int runIds(const Options &options, Clock::time_point started) {
  std::vector<int32_t> prompt = parseIds(options.promptIds);
  plan::Plan plan = plan::readFile(options.plan);
  for (int32_t id : prompt)
    if (id < 0 || id >= plan.model.vocabSize)
      throw exec::RuntimeError("--prompt-ids: token id " + std::to_string(id) +
                               " is outside the vocabulary of " + std::to_string(plan.model.vocabSize));
  if (prompt.size() + static_cast<size_t>(options.maxNewTokens) > plan.limits.maxSequence)
    throw exec::RuntimeError("the prompt of " + std::to_string(prompt.size()) + " tokens and " +
                             std::to_string(options.maxNewTokens) +
                             " new tokens exceed the plan's --max-seq " +
                             std::to_string(plan.limits.maxSequence));
  bool interactive = !options.json && isatty(fileno(stderr));
  LoadedModel model(plan, weightsFolder(plan, options.weights), options, interactive);

  exec::GenerationOptions generation;
  generation.maxNewTokens = options.maxNewTokens;
  generation.sampling = options.sampling;
  generation.sampling.context = prompt; // what the repetition penalty sees
  generation.keepLogits = !options.dumpLogits.empty();
  if (options.stopAtEos) generation.stopTokenIds = plan.model.eosTokenIds;
  bool first = true;
  if (!options.json)
    generation.onToken = [&](int32_t token) {
      std::printf("%s%d", first ? "" : ",", token);
      std::fflush(stdout);
      first = false;
      return true;
    };
  exec::GenerationResult generated = exec::generate(model.executor(), prompt, generation);
  if (!options.json && !generated.output.empty()) std::printf("\n");
  if (!options.dumpLogits.empty())
    writeLogits(options.dumpLogits, generated.promptLogits, generated.stepLogits, plan.model.vocabSize);
  double prefillMs = generated.prefillMs, decodeMs = generated.decodeMs;
  const std::vector<int32_t> &output = generated.output;
  double decodeSteps = static_cast<double>(output.size() > 1 ? output.size() - 1 : 0);
  if (options.json) {
    nlohmann::json result = {
        {"prompt_ids", prompt},
        {"output_ids", output},
        {"device", model.device().name},
        {"stop_reason", generated.stopReason},
        {"timings",
         {{"total_ms", msSince(started)},
          {"load_ms", model.loadMs()},
          {"prefill_ms", prefillMs},
          {"decode_ms", decodeMs},
          {"prefill_tokens_per_s", prompt.size() / (prefillMs / 1000.0)},
          {"decode_tokens_per_s", decodeSteps > 0 ? decodeSteps / (decodeMs / 1000.0) : 0.0}}}};
    std::cout << result.dump() << "\n";
  } else {
    std::fprintf(stderr, "prompt %zu tokens in %.1f ms, %lld new tokens in %.1f ms on %s\n", prompt.size(),
                 prefillMs, static_cast<long long>(output.size()), decodeMs, model.device().name.c_str());
  }
  return kOk;
}

} // namespace gerbil::tool
