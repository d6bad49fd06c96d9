// --chat: reads user turns from stdin, renders the whole conversation with the model's chat template and
// answers it. The KV cache is kept across turns: only the tokens after the longest prefix the cache already
// holds are fed again (the last reply token, which generation leaves out of the cache, and the new turn; or
// more, when the template renders earlier turns differently once there is a new one). When the conversation
// outgrows the plan's --max-seq, its oldest exchanges are dropped (the system message stays).
#include "tools/gerbil-exec/Interrupt.h"
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

// The conversation as the model reads it, and whether it leaves room for a reply in the plan's --max-seq.
class Conversation {
public:
  Conversation(const chat::ChatTemplate &chatTemplate, const tokenizer::Tokenizer &tokenizer,
               chat::ChatOptions chatOptions, uint64_t maxSequence, int64_t maxNewTokens)
      : template_(chatTemplate), tokenizer_(tokenizer), chatOptions_(std::move(chatOptions)),
        maxSequence_(maxSequence),
        // A reply may be cut at --max-seq, but gets at least half of it (or all it asks for).
        replyRoom_(
            std::max<int64_t>(1, std::min<int64_t>(maxNewTokens, static_cast<int64_t>(maxSequence / 2)))) {}

  // The template writes the special tokens itself: the tokenizer adds none (as apply_chat_template does).
  std::vector<int32_t> encode(const std::vector<chat::ChatMessage> &messages) const {
    std::vector<int32_t> ids =
        tokenizer_.encode(template_.apply(messages, chatOptions_), /*addSpecialTokens=*/false);
    if (ids.empty()) throw exec::RuntimeError(template_.name() + " renders the conversation as no tokens");
    return ids;
  }
  // Generation leaves the last token out of the cache, hence the + 1.
  int64_t room(const std::vector<int32_t> &ids) const {
    return static_cast<int64_t>(maxSequence_ + 1) - static_cast<int64_t>(ids.size());
  }
  bool fits(const std::vector<int32_t> &ids) const { return room(ids) >= replyRoom_; }
  int64_t replyRoom() const { return replyRoom_; }

private:
  const chat::ChatTemplate &template_;
  const tokenizer::Tokenizer &tokenizer_;
  chat::ChatOptions chatOptions_;
  uint64_t maxSequence_;
  int64_t replyRoom_;
};

// Drops the oldest exchange after the first `keep` messages: a user message and the replies up to the next
// one, so that roles still alternate as templates demand. Returns how many messages went.
size_t dropOldestExchange(std::vector<chat::ChatMessage> &messages, size_t keep) {
  auto first = messages.begin() + static_cast<long>(keep);
  auto end = first + 1;
  while (end + 1 < messages.end() && end->role != "user") ++end;
  size_t dropped = static_cast<size_t>(end - first);
  messages.erase(first, end);
  return dropped;
}

} // namespace

int runChat(const Options &options, Clock::time_point started) {
  TextModel model = loadTextModel(options);
  chat::ChatTemplate chatTemplate = loadChatTemplate(model);
  chat::ChatOptions chatOptions;
  chatOptions.extraVariables = templateVariables(options);
  for (const auto &[name, value] : chatOptions.extraVariables.items())
    if (!chatTemplate.mentions(name))
      std::fprintf(stderr, "gerbil-exec: warning: %s never reads '%s': --template-var %s changes nothing\n",
                   chatTemplate.name().c_str(), name.c_str(), name.c_str());
  const bool terminal = isatty(fileno(stdin)) && isatty(fileno(stderr));
  LoadedModel loaded(model.plan, model.weightsDir, options, !options.json && terminal);
  exec::Executor &executor = loaded.executor();
  const uint64_t maxSequence = model.plan.limits.maxSequence;
  Conversation conversation(chatTemplate, model.tokenizer, chatOptions, maxSequence, options.maxNewTokens);

  std::vector<chat::ChatMessage> messages;
  if (!options.system.empty()) messages.push_back({"system", options.system});
  const size_t kept = messages.size(); // the system message is never dropped
  catchInterrupts();
  bool toldAboutDropping = false;
  // The tokens whose keys and values the cache holds: executor.position() of them.
  std::vector<int32_t> cached;
  for (int turn = 0;;) {
    if (terminal) std::fprintf(stderr, "> ");
    std::string line;
    waitingForInput(true);
    bool gotLine = static_cast<bool>(std::getline(std::cin, line));
    waitingForInput(false);
    if (!gotLine) {
      if (terminal) std::fprintf(stderr, "\n");
      break;
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == "/exit") break;
    if (line.find_first_not_of(" \t\v\f") == std::string::npos) continue; // a blank line says nothing
    if (auto bad = tokenizer::firstInvalidUtf8(line)) {
      std::fprintf(stderr, "gerbil-exec: this message is not UTF-8 text (byte %zu is not): it is ignored\n",
                   *bad + 1);
      continue;
    }
    if (line == "/reset") {
      messages.resize(kept);
      cached.clear();
      executor.reset();
      continue;
    }
    std::vector<chat::ChatMessage> withTurn = messages;
    withTurn.push_back({"user", line});
    std::vector<int32_t> ids = conversation.encode(withTurn);
    size_t dropped = 0;
    while (!conversation.fits(ids) && withTurn.size() > kept + 1) {
      dropped += dropOldestExchange(withTurn, kept);
      ids = conversation.encode(withTurn);
    }
    if (!conversation.fits(ids)) {
      std::string problem = "this message makes a prompt of " + std::to_string(ids.size()) +
                            " tokens: with a reply of " + std::to_string(conversation.replyRoom()) +
                            " it does not fit the plan's --max-seq " + std::to_string(maxSequence) +
                            "; send a shorter one (or compile a plan with a larger --max-seq)";
      std::fprintf(stderr, "gerbil-exec: %s\n", problem.c_str());
      if (options.json)
        std::cout << nlohmann::json{{"turn", turn}, {"error", problem}}.dump(
                         -1, ' ', false, nlohmann::json::error_handler_t::replace)
                  << std::endl;
      ++turn;
      continue; // the conversation stays as it was
    }
    if (dropped > 0 && !toldAboutDropping) {
      std::fprintf(stderr,
                   "gerbil-exec: the conversation outgrew the plan's --max-seq %llu: from now on its oldest "
                   "turns are dropped%s\n",
                   static_cast<unsigned long long>(maxSequence),
                   kept > 0 ? " (the system message stays)" : "");
      toldAboutDropping = true;
    }
    messages = std::move(withTurn);

    size_t reused = std::min(commonPrefix(cached, ids), ids.size() - 1); // at least one token to feed
    executor.setPosition(static_cast<uint32_t>(reused));
    std::vector<int32_t> feed(ids.begin() + static_cast<long>(reused), ids.end());

    TextRequest request;
    request.maxNewTokens = std::min<int64_t>(options.maxNewTokens, conversation.room(ids));
    request.sampling = options.sampling;
    request.sampling.seed = options.sampling.seed + static_cast<uint64_t>(turn); // a new draw each turn
    request.sampling.context = ids;
    request.stopTokenIds = model.stopTokenIds;
    request.stopStrings = options.stops;
    request.interruptible = true;
    clearInterrupt(); // a Ctrl-C after the last reply had ended is no part of this one
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
          {"dropped_messages", dropped},
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
