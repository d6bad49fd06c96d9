#include "tools/gerbil-exec/Options.h"

#include "runtime/exec/WeightLoader.h"
#include "runtime/vulkan/Device.h"
#include "tools/CliHelpers.h"

namespace gerbil::tool {

void addOptions(CLI::App &app, Options &o) {
  app.add_option("plan", o.plan, "The plan written by gerbilc");
  app.add_option("--weights", o.weights,
                 "Folder with model.safetensors (default: the compiled config's folder)");
  app.add_option("--prompt-ids", o.promptIds, "Prompt token ids, comma separated (prints token ids)");
  app.add_option("--prompt", o.prompt, "Prompt text: generates its continuation and prints the text");
  app.add_option("--prompt-file", o.promptFile, "Read the prompt text from a file");
  app.add_flag("--chat", o.chat,
               "Chat: read user messages from stdin, one a line, and answer each through the chat template "
               "(/exit or end of input ends, /reset starts over)");
  app.add_option("--system", o.system, "The system message of --chat");
  app.add_option(
      "--template-var", o.templateVars,
      "--chat: a variable for the chat template, NAME=JSON (repeatable), e.g. enable_thinking=false "
      "or 'date_string=\"1 May 2025\"'");
  app.add_flag("--no-thinking", o.noThinking,
               "--chat: the same as --template-var enable_thinking=false (Qwen3 answers without thinking)");
  app.add_option("--tokenizer", o.tokenizer, "tokenizer.json (default: the one in the weights folder)");
  app.add_option("--stop", o.stops,
                 "Stop when the text contains this string (repeatable; the string is not printed)");
  app.add_flag("--ignore-eos", o.ignoreEos,
               "Text modes: run all --max-new-tokens, past end-of-sequence tokens");
  app.add_option("--max-new-tokens", o.maxNewTokens, "Tokens to generate after the prompt (per chat turn)")
      ->check(cli::number(0, false))
      ->capture_default_str();
  app.add_option("--temperature", o.sampling.temperature, "Sampling temperature; 0 is greedy")
      ->check(cli::number(0, false))
      ->capture_default_str();
  app.add_option("--top-k", o.sampling.topK, "Sample among the k most likely tokens (0: all)")
      ->check(cli::number(0, false));
  app.add_option("--top-p", o.sampling.topP, "Sample within cumulative probability p")
      ->check(cli::number(0, false, 1));
  app.add_option("--min-p", o.sampling.minP,
                 "Drop tokens less likely than p times the most likely one (0: off)")
      ->check(cli::number(0, false, 1));
  app.add_option("--repetition-penalty", o.sampling.repetitionPenalty,
                 "Penalise tokens already in the prompt or output (transformers' semantics; 1: off)")
      ->check(cli::number(0, true));
  app.add_option("--seed", o.sampling.seed, "Seed of the sampler")->check(cli::unsignedInteger());
  app.add_flag("--host-sampling", o.sampling.onHost,
               "Draw on the host from each step's logits instead of with the plan's GPU sampler (other "
               "tokens for the same seed; slower)");
  app.add_flag("--stop-at-eos", o.stopAtEos,
               "--prompt-ids: stop after an end-of-sequence token (else run all --max-new-tokens)");
  app.add_option("--dump-logits", o.dumpLogits,
                 "Write the logits (safetensors: logits [T, vocab], step_logits [N, vocab])");
  app.add_option("--device", o.device, "Vulkan device index (see --list-devices)");
  app.add_flag("--list-devices", o.listDevices, "List Vulkan devices and exit");
  app.add_flag(
      "--device-info", o.deviceInfo,
      "Describe each Vulkan device (or --device N) as the compiler's targets see it: limits, f16, "
      "subgroup sizes, cooperative-matrix extensions and shapes, all extensions with --json; then exit");
  app.add_flag("--plan-info", o.planInfo,
               "Describe the plan: its model, target, memory and what it needs of a device (with --json, "
               "as JSON); then exit. Needs neither a device nor the weights");
  app.add_flag("--json", o.json,
               "Print one JSON object with the ids, text and timings on stdout (one per chat turn)");
  app.add_flag("--validation", o.validation, "Enable the Vulkan validation layers");
  cli::addSpinWaitOption(app, o.spinWaitMicroseconds, vk::kDefaultSpinWaitMicroseconds);
  cli::addWeightBlockOption(app, o.weightBlockMiB, exec::kDefaultWeightBlockBytes >> 20);
  app.footer(
      "Examples:\n"
      "  gerbilc MODEL/config.json -o model.plan       compile once (MODEL: a HuggingFace model folder)\n"
      "  gerbil-exec model.plan --prompt 'Once upon a time'\n"
      "  gerbil-exec model.plan --chat --system 'Be brief.'\n"
      "In --chat, Ctrl-C ends the reply being written; at the prompt it (or Ctrl-D, or /exit) ends the "
      "chat.\n"
      "Exit codes: 0 success, 2 usage, 3 bad input (config, plan, weights, tokenizer, chat template), "
      "4 device or Vulkan error, 5 I/O, 130 ended by Ctrl-C.");
}

std::string checkOptions(const CLI::App &app, const Options &o) {
  int modes = (app.count("--prompt-ids") > 0) + (app.count("--prompt") > 0) +
              (app.count("--prompt-file") > 0) + o.chat;
  if (modes == 0) return "no prompt: use --prompt TEXT, --prompt-file FILE, --chat or --prompt-ids 1,2,3";
  if (modes > 1) return "give only one of --prompt-ids, --prompt, --prompt-file and --chat";
  bool ids = app.count("--prompt-ids") > 0;
  for (const char *textOnly : {"--tokenizer", "--stop", "--ignore-eos"})
    if (ids && app.count(textOnly))
      return std::string(textOnly) + " needs a text prompt (--prompt, --prompt-file or --chat)";
  if (!ids && o.stopAtEos)
    return "--stop-at-eos is for --prompt-ids: text modes stop at end-of-sequence tokens anyway";
  if (app.count("--system") && !o.chat) return "--system needs --chat";
  for (const char *chatOnly : {"--template-var", "--no-thinking"})
    if (app.count(chatOnly) && !o.chat) return std::string(chatOnly) + " needs --chat";
  try {
    (void)templateVariables(o);
  } catch (const std::invalid_argument &e) {
    return e.what();
  }
  if (o.chat && !o.dumpLogits.empty()) return "--dump-logits cannot be used with --chat";
  for (const std::string &stop : o.stops)
    if (stop.empty()) return "--stop: the stop string is empty";
  return "";
}

nlohmann::ordered_json templateVariables(const Options &o) {
  nlohmann::ordered_json variables = nlohmann::ordered_json::object();
  if (o.noThinking) variables["enable_thinking"] = false;
  for (const std::string &assignment : o.templateVars) {
    size_t equals = assignment.find('=');
    std::string name = assignment.substr(0, equals);
    if (equals == std::string::npos || name.empty())
      throw std::invalid_argument("--template-var '" + assignment + "': expected NAME=VALUE");
    if (name == "messages" || name == "add_generation_prompt")
      throw std::invalid_argument("--template-var '" + assignment + "': '" + name +
                                  "' is set by the chat itself");
    nlohmann::ordered_json value =
        nlohmann::ordered_json::parse(assignment.substr(equals + 1), nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded())
      throw std::invalid_argument(
          "--template-var '" + assignment +
          "': the value is not JSON (true, false, 3, \"text in quotes\", [...], {...})");
    variables[name] = std::move(value);
  }
  return variables;
}

} // namespace gerbil::tool
