#include "tools/gerbil-exec/TextGeneration.h"

#include "tools/gerbil-exec/Common.h"
#include "tools/gerbil-exec/Interrupt.h"
#include "tools/gerbil-exec/LoadedModel.h"
#include "tools/gerbil-exec/StopStrings.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace gerbil::tool {
namespace fs = std::filesystem;

std::vector<int64_t> generationConfigEosIds(const std::string &folder) {
  fs::path path = fs::path(folder) / "generation_config.json";
  if (!fs::exists(path)) return {};
  std::ifstream in(path);
  nlohmann::json config = nlohmann::json::parse(in, nullptr, false);
  if (config.is_discarded() || !config.is_object())
    throw exec::RuntimeError(path.string() + ": not a valid JSON object");
  auto found = config.find("eos_token_id");
  if (found == config.end() || found->is_null()) return {};
  std::vector<int64_t> ids;
  for (const nlohmann::json &id : found->is_array() ? *found : nlohmann::json::array({*found})) {
    if (!id.is_number_integer())
      throw exec::RuntimeError(path.string() +
                               ": \"eos_token_id\" must be a token id or a list of token ids");
    ids.push_back(id.get<int64_t>());
  }
  return ids;
}

TextModel loadTextModel(const Options &options) {
  plan::Plan plan = plan::readFile(options.plan);
  std::string weightsDir = weightsFolder(plan, options.weights);
  std::string tokenizerPath =
      options.tokenizer.empty() ? (fs::path(weightsDir) / "tokenizer.json").string() : options.tokenizer;
  if (!fs::is_regular_file(tokenizerPath))
    throw exec::RuntimeError("no tokenizer: '" + tokenizerPath + "' does not exist" +
                             (options.tokenizer.empty() ? " (give one with --tokenizer FILE)" : ""));
  tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::fromFile(tokenizerPath);
  if (tokenizer.vocabSize() > plan.model.vocabSize)
    throw exec::RuntimeError("the tokenizer '" + tokenizerPath + "' has " +
                             std::to_string(tokenizer.vocabSize()) +
                             " tokens, more than the model's vocabulary of " +
                             std::to_string(plan.model.vocabSize) + ": it is not this model's tokenizer");
  std::vector<int64_t> stops;
  if (!options.ignoreEos) {
    stops = plan.model.eosTokenIds;
    for (int64_t id : generationConfigEosIds(weightsDir)) stops.push_back(id);
    fs::path configDir = fs::path(plan.model.configPath).parent_path();
    if (!configDir.empty() && fs::path(weightsDir) != configDir)
      for (int64_t id : generationConfigEosIds(configDir.string())) stops.push_back(id);
    if (auto eos = tokenizer.configTokenId("eos_token")) stops.push_back(*eos);
    std::sort(stops.begin(), stops.end());
    stops.erase(std::unique(stops.begin(), stops.end()), stops.end());
  }
  return TextModel{std::move(plan), std::move(weightsDir), std::move(tokenizerPath), std::move(tokenizer),
                   std::move(stops)};
}

TextReply generateText(exec::Executor &executor, const tokenizer::Tokenizer &tokenizer,
                       const std::vector<int32_t> &prompt, const TextRequest &request, std::FILE *stream) {
  tokenizer::StreamDecoder decoder(tokenizer, /*skipSpecialTokens=*/true);
  // What transformers' decode does with tokenizer_config.json's clean_up_tokenization_spaces.
  const bool cleanUp = tokenizer.cleanUpTokenizationSpaces();
  tokenizer::CleanUpStream cleaner;
  auto clean = [&](const std::string &text) { return cleanUp ? cleaner.push(text) : text; };
  StopStrings stops(request.stopStrings);
  TextReply reply;
  auto show = [&](const std::string &text) {
    reply.text += text;
    if (stream && !text.empty()) {
      std::fwrite(text.data(), 1, text.size(), stream);
      std::fflush(stream);
    }
  };
  auto isStopToken = [&](int32_t token) {
    return std::find(request.stopTokenIds.begin(), request.stopTokenIds.end(), token) !=
           request.stopTokenIds.end();
  };

  exec::GenerationOptions generation;
  generation.maxNewTokens = request.maxNewTokens;
  generation.sampling = request.sampling;
  generation.stopTokenIds = request.stopTokenIds;
  generation.keepLogits = request.keepLogits;
  generation.onToken = [&](int32_t token) {
    if (isStopToken(token)) return true; // generation ends with it; it is no part of the text
    if (token < 0 || token >= tokenizer.vocabSize())
      throw exec::RuntimeError("the model generated token id " + std::to_string(token) +
                               ", which the tokenizer '" + tokenizer.name() + "' does not have");
    show(stops.push(clean(decoder.push(token))));
    if (request.interruptible && interrupted()) {
      reply.stopReason = "interrupted";
      return false;
    }
    return !stops.stopped();
  };
  reply.generation = exec::generate(executor, prompt, generation);
  if (!stops.stopped()) {
    std::string rest = clean(decoder.finish());
    if (cleanUp) rest += cleaner.finish();
    show(stops.push(rest));
  }
  show(stops.finish());
  if (reply.stopReason.empty())
    reply.stopReason = stops.stopped() ? "stop_string" : reply.generation.stopReason;
  return reply;
}

void printStats(size_t promptTokens, const exec::GenerationResult &generation, const std::string &device) {
  size_t steps = generation.output.size() > 1 ? generation.output.size() - 1 : 0;
  std::fprintf(
      stderr,
      "prompt %zu tokens in %.1f ms (%.1f tokens/s), %zu new tokens in %.1f ms (%.1f tokens/s) on %s\n",
      promptTokens, generation.prefillMs, perSecond(static_cast<double>(promptTokens), generation.prefillMs),
      generation.output.size(), generation.decodeMs,
      perSecond(static_cast<double>(steps), generation.decodeMs), device.c_str());
}

nlohmann::json timingsJson(size_t promptTokens, const exec::GenerationResult &generation, double totalMs,
                           double loadMs) {
  size_t steps = generation.output.size() > 1 ? generation.output.size() - 1 : 0;
  return {{"total_ms", totalMs},
          {"load_ms", loadMs},
          {"prefill_ms", generation.prefillMs},
          {"decode_ms", generation.decodeMs},
          {"prefill_tokens_per_s", perSecond(static_cast<double>(promptTokens), generation.prefillMs)},
          {"decode_tokens_per_s", perSecond(static_cast<double>(steps), generation.decodeMs)}};
}

} // namespace gerbil::tool
