// --chat: reads user turns from stdin, renders the whole conversation with the model's chat template and
// answers it. The KV cache is kept across turns: only the tokens after the longest prefix the cache already
// holds are fed again (the last reply token, which generation leaves out of the cache, and the new turn; or
// more, when the template renders earlier turns differently once there is a new one).
#include "tools/gerbil-exec/LoadedModel.h"
#include "tools/gerbil-exec/Modes.h"
#include "tools/gerbil-exec/TextGeneration.h"

#include "runtime/chat/ChatTemplate.h"

#include <filesystem>
#include <iostream>
#include <unistd.h>

namespace gerbil::tool {
namespace {

// The chat template of the tokenizer_config.json beside the tokenizer.
chat::ChatTemplate loadChatTemplate(const TextModel &model) {
  std::filesystem::path config =
      std::filesystem::path(model.tokenizerPath).parent_path() / "tokenizer_config.json";
  if (!std::filesystem::exists(config))
    throw exec::RuntimeError(
        "--chat needs the chat template of a tokenizer_config.json beside the tokenizer: '" +
        config.string() + "' does not exist");
  return chat::ChatTemplate::fromTokenizerConfig(config.string());
}

size_t commonPrefix(const std::vector<int32_t> &a, const std::vector<int32_t> &b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

} // namespace

int runChat(const Options &options, Clock::time_point started) {
  TextModel model = loadTextModel(options);
  chat::ChatTemplate chatTemplate = loadChatTemplate(model);
  const bool terminal = isatty(fileno(stdin)) && isatty(fileno(stderr));
  LoadedModel loaded(model.plan, model.weightsDir, options.device, options.validation,
                     !options.json && terminal);
  exec::Executor &executor = loaded.executor();
  const uint64_t maxSequence = model.plan.limits.maxSequence;

  std::vector<chat::ChatMessage> messages;
  if (!options.system.empty()) messages.push_back({"system", options.system});
  // The tokens whose keys and values the cache holds: executor.position() of them.
  std::vector<int32_t> cached;
  for (int turn = 0;;) {
    if (terminal) std::fprintf(stderr, "> ");
    std::string line;
    if (!std::getline(std::cin, line)) {
      if (terminal) std::fprintf(stderr, "\n");
      break;
    }
    if (line == "/exit") break;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line == "/reset") {
      messages.resize(options.system.empty() ? 0 : 1);
      cached.clear();
      executor.reset();
      continue;
    }
    messages.push_back({"user", line});
    // The template writes the special tokens itself: the tokenizer adds none (as apply_chat_template does).
    std::vector<int32_t> ids =
        model.tokenizer.encode(chatTemplate.apply(messages), /*addSpecialTokens=*/false);
    if (ids.empty()) throw exec::RuntimeError(chatTemplate.name() + " renders the conversation as no tokens");
    size_t reused = std::min(commonPrefix(cached, ids), ids.size() - 1); // at least one token to feed
    executor.setPosition(static_cast<uint32_t>(reused));
    std::vector<int32_t> feed(ids.begin() + static_cast<long>(reused), ids.end());
    // Generation leaves the last token out of the cache, hence the + 1.
    int64_t room = static_cast<int64_t>(maxSequence + 1) - static_cast<int64_t>(ids.size());
    if (room < 1)
      throw exec::RuntimeError("the conversation of " + std::to_string(ids.size()) +
                               " tokens has reached the plan's --max-seq " + std::to_string(maxSequence) +
                               " (/reset starts a new one)");

    TextRequest request;
    request.maxNewTokens = std::min<int64_t>(options.maxNewTokens, room);
    request.sampling = options.sampling;
    request.sampling.seed = options.sampling.seed + static_cast<uint64_t>(turn); // a new draw each turn
    request.sampling.context = ids;
    request.stopTokenIds = model.stopTokenIds;
    request.stopStrings = options.stops;
    TextReply reply = generateText(executor, model.tokenizer, feed, request, options.json ? nullptr : stdout);
    messages.push_back({"assistant", reply.text});
    cached = ids;
    cached.insert(cached.end(), reply.generation.output.begin(), reply.generation.output.end());
    cached.resize(executor.position());

    if (options.json) {
      nlohmann::json result = {
          {"turn", turn},
          {"prompt_ids", ids},
          {"reused_tokens", reused},
          {"output_ids", reply.generation.output},
          {"text", reply.text},
          {"device", loaded.device().name},
          {"stop_reason", reply.stopReason},
          {"timings", timingsJson(feed.size(), reply.generation, msSince(started), loaded.loadMs())}};
      std::cout << result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    } else {
      std::printf("\n");
      std::fflush(stdout);
      printStats(feed.size(), reply.generation, loaded.device().name);
    }
    ++turn;
  }
  return kOk;
}

} // namespace gerbil::tool
