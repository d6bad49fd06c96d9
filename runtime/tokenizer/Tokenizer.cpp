#include "runtime/tokenizer/Tokenizer.h"

#include "runtime/tokenizer/AddedTokens.h"
#include "runtime/tokenizer/Bpe.h"
#include "runtime/tokenizer/Decoder.h"
#include "runtime/tokenizer/Json.h"
#include "runtime/tokenizer/Normalizer.h"
#include "runtime/tokenizer/PostProcessor.h"
#include "runtime/tokenizer/PreTokenizer.h"
#include "runtime/tokenizer/Unicode.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace gerbil::tokenizer {

using namespace detail;

struct Tokenizer::Impl {
  std::string name;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> preTokenizer;
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<AddedVocabulary> added;
  std::unique_ptr<PostProcessor> postProcessor;
  std::unique_ptr<Decoder> decoder;
  bool cleanUpTokenizationSpaces = false;
  std::map<std::string, int32_t, std::less<>> configTokens; // "eos_token" -> id

  // The text of a token, added tokens first (as HF's id_to_token).
  const std::string *tokenText(int32_t id) const {
    if (const AddedToken *token = added->token(id)) return &token->content;
    return model->token(id);
  }
};

namespace {

nlohmann::json parseJson(const std::string &text, const std::string &name) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception &e) {
    throw TokenizerError(name + ": not valid JSON (" + e.what() + ")");
  }
}

// Parses tokenizer.json, moving the entries of model.vocab into `vocab` instead of the document: a JSON
// object of 150k keys is an std::map in nlohmann::json, slower to build than the rest of the file together.
nlohmann::json parseTokenizerJson(const std::string &text, const std::string &name, VocabEntries &vocab) {
  using Event = nlohmann::json::parse_event_t;
  std::vector<std::string> keys;     // keys[d]: the last key read at depth d
  std::vector<bool> isObject;        // isObject[d]: the container opened at depth d is an object
  auto inVocab = [&](size_t depth) { // is depth the level of model.vocab's entries?
    return depth == 3 && keys.size() > 2 && isObject.size() > 2 && isObject[0] && isObject[1] &&
           isObject[2] && keys[1] == "model" && keys[2] == "vocab";
  };
  auto callback = [&](int depthInt, Event event, nlohmann::json &parsed) -> bool {
    auto depth = static_cast<size_t>(depthInt);
    switch (event) {
    case Event::object_start:
    case Event::array_start:
      if (isObject.size() <= depth) isObject.resize(depth + 1);
      isObject[depth] = event == Event::object_start;
      // A container as a vocabulary entry is an error that BpeModel reports; keep its kind, not its content.
      if (inVocab(depth))
        vocab.emplace_back(keys[3],
                           event == Event::object_start ? nlohmann::json::object() : nlohmann::json::array());
      return true;
    case Event::key:
      if (keys.size() <= depth) keys.resize(depth + 1);
      keys[depth] = std::move(parsed.get_ref<std::string &>());
      if ((depth == 1 && keys[1] == "model") || (depth == 2 && keys[1] == "model" && keys[2] == "vocab"))
        vocab.clear();        // a repeated key replaces the earlier value, as in the document
      return !inVocab(depth); // false: the document gets no slot for the entry
    case Event::value:
      if (!inVocab(depth)) return true;
      vocab.emplace_back(keys[3], std::move(parsed));
      return false;
    default:
      return true;
    }
  };
  try {
    return nlohmann::json::parse(text, callback);
  } catch (const nlohmann::json::exception &e) {
    throw TokenizerError(name + ": not valid JSON (" + e.what() + ")");
  }
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TokenizerError(path + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw TokenizerError(path + ": cannot be read");
  return text.str();
}

// tokenizer_config.json: transformers' settings on top of tokenizer.json.
void readConfig(Tokenizer::Impl &impl, const std::string &text, const std::string &name) {
  nlohmann::json json = parseJson(text, name);
  JsonRef root(json, name);
  root.requireObject();
  impl.cleanUpTokenizationSpaces = root.booleanOr("clean_up_tokenization_spaces", false);
  for (const char *key : {"bos_token", "eos_token", "pad_token", "unk_token"}) {
    auto entry = root.find(key);
    if (!entry) continue;
    // Either the token itself or an AddedToken object {"content": ...}.
    std::string content = entry->isObject() ? entry->at("content").string() : entry->string();
    std::optional<int32_t> id = impl.added->tokenId(content);
    if (!id) id = impl.model->tokenId(content);
    if (id) impl.configTokens[key] = *id; // a name outside the vocabulary is left unresolved
  }
}

// A piece of the input on its way through the pipeline: text, or an added token already recognized.
struct Piece {
  std::string text;
  int32_t id = -1;
  bool atInputStart = false;
};

void splitOnAddedTokens(const AddedVocabulary &added, const Piece &piece, bool normalizedTokens,
                        bool parseSpecial, std::vector<Piece> &out) {
  for (const auto &segment : added.split(piece.text, normalizedTokens, parseSpecial)) {
    if (segment.id >= 0)
      out.push_back({"", segment.id, false});
    else
      out.push_back({piece.text.substr(segment.start, segment.end - segment.start), -1,
                     piece.atInputStart && segment.start == 0});
  }
}

} // namespace

Tokenizer Tokenizer::fromFile(const std::string &path) {
  std::string text = readFile(path);
  std::filesystem::path config = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  std::error_code ec;
  if (std::filesystem::is_regular_file(config, ec))
    return fromJson(text, path, readFile(config.string()), config.string());
  return fromJson(text, path);
}

Tokenizer Tokenizer::fromJson(const std::string &text, const std::string &name, const std::string &configText,
                              const std::string &configName) {
  VocabEntries vocab;
  nlohmann::json json = parseTokenizerJson(text, name, vocab);
  JsonRef root(json, name);
  if (!root.isObject()) root.fail("is not a JSON object");
  auto impl = std::make_shared<Impl>();
  impl->name = name;
  static const nlohmann::json kNull;
  impl->normalizer = makeNormalizer(root.find("normalizer").value_or(JsonRef(kNull, name)));
  impl->preTokenizer = makePreTokenizer(root.find("pre_tokenizer").value_or(JsonRef(kNull, name)));
  impl->model = std::make_unique<BpeModel>(root.at("model"), &vocab);
  impl->added = std::make_unique<AddedVocabulary>(root.find("added_tokens").value_or(JsonRef(kNull, name)),
                                                  *impl->model, impl->normalizer.get());
  impl->postProcessor = makePostProcessor(root.find("post_processor").value_or(JsonRef(kNull, name)));
  impl->decoder = makeDecoder(root.find("decoder").value_or(JsonRef(kNull, name)));
  if (!configText.empty()) readConfig(*impl, configText, configName);
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool addSpecialTokens,
                                       bool parseSpecialTokens) const {
  const Impl &impl = *impl_;
  if (auto bad = detail::firstInvalidUtf8(text))
    throw TokenizerError(impl.name + ": the text to encode is not valid UTF-8 (at byte " +
                         std::to_string(*bad) + ")");
  // 1. Added tokens that match the raw text (normalized=false: all special tokens of the usual models).
  std::vector<Piece> raw;
  splitOnAddedTokens(*impl.added, Piece{std::string(text), -1, true}, false, parseSpecialTokens, raw);
  // 2. The normalizer runs on each piece between them; then the added tokens that match normalized text.
  std::vector<Piece> pieces;
  for (Piece &piece : raw) {
    if (piece.id >= 0) {
      pieces.push_back(std::move(piece));
      continue;
    }
    if (impl.normalizer) impl.normalizer->normalize(piece.text);
    splitOnAddedTokens(*impl.added, piece, true, parseSpecialTokens, pieces);
  }
  // 3. Pre-tokenizer and model on the text pieces.
  std::vector<int32_t> ids;
  std::vector<PreToken> words;
  for (Piece &piece : pieces) {
    if (piece.id >= 0) {
      ids.push_back(piece.id);
      continue;
    }
    words.assign(1, PreToken{std::move(piece.text), piece.atInputStart});
    if (impl.preTokenizer) impl.preTokenizer->split(words);
    for (const PreToken &word : words) impl.model->tokenize(word.text, ids);
  }
  // 4. BOS/EOS.
  if (impl.postProcessor) impl.postProcessor->process(ids, addSpecialTokens);
  return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t> &ids, bool skipSpecialTokens,
                              bool cleanUpSpaces) const {
  const Impl &impl = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    const std::string *text = impl.tokenText(id);
    if (!text)
      throw TokenizerError(impl.name + ": token id " + std::to_string(id) +
                           " is not in the vocabulary (ids are 0.." + std::to_string(vocabSize() - 1) + ")");
    if (skipSpecialTokens && impl.added->isSpecial(*text)) continue;
    tokens.push_back(*text);
  }
  std::string out;
  if (impl.decoder) {
    impl.decoder->decodeChain(tokens);
    for (const auto &t : tokens) out += t;
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
  }
  return cleanUpSpaces ? detail::cleanUpSpaces(std::move(out), false) : out;
}

std::optional<int32_t> Tokenizer::tokenId(std::string_view token) const {
  if (auto id = impl_->added->tokenId(token)) return id;
  return impl_->model->tokenId(token);
}

std::optional<std::string> Tokenizer::tokenString(int32_t id) const {
  if (const std::string *text = impl_->tokenText(id)) return *text;
  return std::nullopt;
}

bool Tokenizer::isSpecialToken(int32_t id) const {
  const std::string *text = impl_->tokenText(id);
  return text && impl_->added->isSpecial(*text);
}

int32_t Tokenizer::vocabSize() const {
  return std::max(impl_->model->maxId(), impl_->added->maxId()) + 1;
}

bool Tokenizer::cleanUpTokenizationSpaces() const {
  return impl_->cleanUpTokenizationSpaces;
}

std::optional<int32_t> Tokenizer::configTokenId(std::string_view key) const {
  auto it = impl_->configTokens.find(key);
  if (it == impl_->configTokens.end()) return std::nullopt;
  return it->second;
}

const std::string &Tokenizer::name() const {
  return impl_->name;
}

std::optional<size_t> firstInvalidUtf8(std::string_view text) {
  return detail::firstInvalidUtf8(text);
}

std::string cleanUpTokenizationSpaces(std::string text) {
  return cleanUpSpaces(std::move(text), false);
}

} // namespace gerbil::tokenizer
