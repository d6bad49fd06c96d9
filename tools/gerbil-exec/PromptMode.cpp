// --prompt / --prompt-file: a text prompt, its continuation streamed to stdout as it is generated.
#include "tools/gerbil-exec/Interrupt.h"
#include "tools/gerbil-exec/LoadedModel.h"
#include "tools/gerbil-exec/Modes.h"
#include "tools/gerbil-exec/TextGeneration.h"

#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>

namespace gerbil::tool {
namespace {

std::string promptText(const Options &options) {
  if (options.promptFile.empty()) return options.prompt;
  std::ifstream in(options.promptFile, std::ios::binary);
  if (!in) throw exec::RuntimeError("--prompt-file: cannot read '" + options.promptFile + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

} // namespace

int runPrompt(const Options &options, Clock::time_point started) {
  std::string text = promptText(options);
  if (auto bad = tokenizer::firstInvalidUtf8(text))
    throw exec::RuntimeError(
        (options.promptFile.empty() ? "--prompt" : "--prompt-file '" + options.promptFile + "'") +
        std::string(": not UTF-8 text (byte ") + std::to_string(*bad + 1) + " is not)");
  TextModel model = loadTextModel(options);
  // As transformers' tokenizer(text) does: the tokenizer's special tokens (a BOS) are added.
  std::vector<int32_t> prompt = model.tokenizer.encode(text, /*addSpecialTokens=*/true);
  if (prompt.empty()) throw exec::RuntimeError("the prompt is empty: it encodes to no tokens");
  if (prompt.size() + static_cast<size_t>(options.maxNewTokens) > model.plan.limits.maxSequence)
    throw exec::RuntimeError("the prompt of " + std::to_string(prompt.size()) + " tokens and " +
                             std::to_string(options.maxNewTokens) +
                             " new tokens exceed the plan's --max-seq " +
                             std::to_string(model.plan.limits.maxSequence));
  bool interactive = !options.json && isatty(fileno(stderr));
  LoadedModel loaded(model.plan, model.weightsDir, options, interactive);

  TextRequest request;
  request.maxNewTokens = options.maxNewTokens;
  request.sampling = options.sampling;
  request.sampling.context = prompt;
  request.stopTokenIds = model.stopTokenIds;
  request.stopStrings = options.stops;
  request.keepLogits = !options.dumpLogits.empty();
  request.interruptible = true;
  catchInterrupts();
  TextReply reply =
      generateText(loaded.executor(), model.tokenizer, prompt, request, options.json ? nullptr : stdout);
  if (!options.dumpLogits.empty())
    writeLogits(options.dumpLogits, reply.generation.promptLogits, reply.generation.stepLogits,
                model.plan.model.vocabSize);
  if (options.json) {
    nlohmann::json result = {
        {"prompt_ids", prompt},
        {"output_ids", reply.generation.output},
        {"text", reply.text},
        {"device", loaded.device().name},
        {"stop_reason", reply.stopReason},
        {"timings", timingsJson(prompt.size(), reply.generation, msSince(started), loaded.loadMs())}};
    std::cout << result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::printf("\n");
    printStats(prompt.size(), reply.generation, loaded.device().name);
  }
  return reply.stopReason == "interrupted" ? kInterrupted : kOk;
}

} // namespace gerbil::tool
