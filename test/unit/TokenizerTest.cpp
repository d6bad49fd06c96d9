// The tokenizer against HuggingFace's own ids and decodes (test/fixtures/tokenizers, and the Llama-3 fixtures
// of ../shared when present), small tokenizers for the features no fixture uses, and garbled tokenizer.json.
#include "runtime/tokenizer/Tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>

namespace {

using gerbil::tokenizer::StreamDecoder;
using gerbil::tokenizer::Tokenizer;
using gerbil::tokenizer::TokenizerError;
namespace fs = std::filesystem;

std::string readFile(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool isValidUtf8(const std::string &s) {
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::type_error &) {
    return false;
  }
}

// ---------------------------------------------------------------------------------------------------------
// The fixtures: a tokenizer.json and the reference's answers for 68 strings.

struct FixtureSpec {
  std::string name;
  bool metaLicensed; // Llama-3's files stay in ../shared (Meta's licence): skipped in a plain clone
};

void PrintTo(const FixtureSpec &spec, std::ostream *out) {
  *out << spec.name;
}

struct LoadedFixture {
  Tokenizer tokenizer;
  nlohmann::json cases;
};

fs::path fixtureRoot(const FixtureSpec &spec) {
  return fs::path(spec.metaLicensed ? GERBIL_SHARED_DIR : GERBIL_TEST_DATA_DIR) / "fixtures" / "tokenizers";
}

const LoadedFixture *loadFixture(const FixtureSpec &spec) {
  static std::map<std::string, std::unique_ptr<LoadedFixture>> cache;
  auto it = cache.find(spec.name);
  if (it != cache.end()) return it->second.get();
  fs::path root = fixtureRoot(spec);
  fs::path tokenizerJson = root / spec.name / "tokenizer.json", casesJson = root / (spec.name + ".json");
  std::unique_ptr<LoadedFixture> loaded;
  if (fs::exists(tokenizerJson) && fs::exists(casesJson))
    loaded = std::make_unique<LoadedFixture>(LoadedFixture{
        Tokenizer::fromFile(tokenizerJson.string()), nlohmann::json::parse(readFile(casesJson))["cases"]});
  return (cache[spec.name] = std::move(loaded)).get();
}

std::vector<int32_t> idsOf(const nlohmann::json &j) {
  return j.get<std::vector<int32_t>>();
}

std::string describe(const nlohmann::json &c) {
  return "case [" + c["category"].get<std::string>() + "] " + c["text"].dump();
}

class TokenizerFixtureTest : public testing::TestWithParam<FixtureSpec> {
protected:
  void SetUp() override {
    fixture_ = loadFixture(GetParam());
    if (!fixture_)
      GTEST_SKIP() << "fixture " << GetParam().name << " not found under " << fixtureRoot(GetParam());
  }
  const Tokenizer &tokenizer() const { return fixture_->tokenizer; }
  const nlohmann::json &cases() const { return fixture_->cases; }
  // Runs `check` on every case that has `field`, and reports how many there were.
  template <typename Check> void forEachCase(const char *field, Check check) {
    int count = 0;
    for (const auto &c : cases()) {
      if (!c.contains(field)) continue;
      ++count;
      check(c);
    }
    RecordProperty(field, count);
    std::cout << "[ checked  ] " << GetParam().name << ": " << count << " cases with " << field << "\n";
  }
  const LoadedFixture *fixture_ = nullptr;
};

// One test per fixture and direction: under ctest each test is a process that loads its tokenizer again.
TEST_P(TokenizerFixtureTest, Encode) {
  forEachCase("ids", [&](const nlohmann::json &c) {
    EXPECT_EQ(tokenizer().encode(c["text"].get<std::string>(), false), idsOf(c["ids"])) << describe(c);
  });
  forEachCase("ids_with_special", [&](const nlohmann::json &c) {
    EXPECT_EQ(tokenizer().encode(c["text"].get<std::string>()), idsOf(c["ids_with_special"])) << describe(c);
  });
  forEachCase("ids_split_special", [&](const nlohmann::json &c) {
    EXPECT_EQ(tokenizer().encode(c["text"].get<std::string>(), false, false), idsOf(c["ids_split_special"]))
        << describe(c);
  });
  forEachCase("tokens", [&](const nlohmann::json &c) {
    std::vector<std::string> tokens;
    for (int32_t id : idsOf(c["ids"])) tokens.push_back(tokenizer().tokenString(id).value_or("<none>"));
    EXPECT_EQ(tokens, c["tokens"].get<std::vector<std::string>>()) << describe(c);
  });
}

TEST_P(TokenizerFixtureTest, Decode) {
  forEachCase("decoded", [&](const nlohmann::json &c) {
    EXPECT_EQ(tokenizer().decode(idsOf(c["ids"])), c["decoded"].get<std::string>()) << describe(c);
  });
  forEachCase("decoded_with_special", [&](const nlohmann::json &c) {
    EXPECT_EQ(tokenizer().decode(idsOf(c["ids_with_special"])), c["decoded_with_special"].get<std::string>())
        << describe(c);
  });
  forEachCase("decoded_cleanup", [&](const nlohmann::json &c) {
    // transformers' tokenizer.decode(ids), with the cleanup tokenizer_config.json asks for.
    EXPECT_TRUE(tokenizer().cleanUpTokenizationSpaces());
    EXPECT_EQ(tokenizer().decode(idsOf(c["ids"]), false, tokenizer().cleanUpTokenizationSpaces()),
              c["decoded_cleanup"].get<std::string>())
        << describe(c);
  });
}

// Fed id by id, the stream gives back decode()'s text, in pieces that are each valid UTF-8.
TEST_P(TokenizerFixtureTest, StreamDecoder) {
  auto streamed = [&](const std::vector<int32_t> &ids, const nlohmann::json &c) {
    StreamDecoder stream(tokenizer());
    std::string text;
    for (int32_t id : ids) {
      std::string piece = stream.push(id);
      EXPECT_TRUE(isValidUtf8(piece)) << describe(c);
      text += piece;
    }
    return text + stream.finish();
  };
  forEachCase("decoded", [&](const nlohmann::json &c) {
    EXPECT_EQ(streamed(idsOf(c["ids"]), c), c["decoded"].get<std::string>()) << describe(c);
  });
  forEachCase("decoded_with_special", [&](const nlohmann::json &c) {
    EXPECT_EQ(streamed(idsOf(c["ids_with_special"]), c), c["decoded_with_special"].get<std::string>())
        << describe(c);
  });
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TokenizerFixtureTest,
                         testing::Values(FixtureSpec{"gpt2", false}, FixtureSpec{"qwen3", false},
                                         FixtureSpec{"mistral", false}, FixtureSpec{"llama3", true},
                                         FixtureSpec{"llama3-bos", true}),
                         [](const testing::TestParamInfo<FixtureSpec> &info) {
                           std::string name = info.param.name;
                           for (char &ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

const Tokenizer &gpt2() {
  static const Tokenizer t =
      Tokenizer::fromFile(std::string(GERBIL_TEST_DATA_DIR) + "/fixtures/tokenizers/gpt2/tokenizer.json");
  return t;
}

const Tokenizer &qwen3() {
  static const Tokenizer t =
      Tokenizer::fromFile(std::string(GERBIL_TEST_DATA_DIR) + "/fixtures/tokenizers/qwen3/tokenizer.json");
  return t;
}

TEST(Tokenizer, StreamDecoderHoldsBackIncompleteCharacters) {
  // "🍕" is four bytes that GPT-2 spreads over several tokens: nothing may come out before the last one.
  auto ids = gpt2().encode(" 🍕!", false);
  ASSERT_GT(ids.size(), 2u);
  StreamDecoder stream(gpt2());
  std::vector<std::string> pieces;
  for (int32_t id : ids) pieces.push_back(stream.push(id));
  EXPECT_EQ(pieces.front(), ""); // " " and the pizza's first bytes
  std::string all;
  for (const auto &p : pieces) {
    EXPECT_TRUE(isValidUtf8(p));
    all += p;
  }
  EXPECT_EQ(all, " 🍕!");
  EXPECT_EQ(stream.finish(), "");
}

TEST(Tokenizer, StreamDecoderFlushesIncompleteBytesAtTheEnd) {
  auto ids = gpt2().encode("🍕", false);
  ids.pop_back(); // the character never completes
  StreamDecoder stream(gpt2());
  std::string shown;
  for (int32_t id : ids) shown += stream.push(id);
  EXPECT_EQ(shown, "");
  EXPECT_EQ(stream.finish(), gpt2().decode(ids));
}

TEST(Tokenizer, StreamDecoderRejectsUnknownIds) {
  StreamDecoder stream(gpt2());
  EXPECT_EQ(stream.push(15496), "Hello");
  EXPECT_THROW(stream.push(1 << 30), TokenizerError);
  EXPECT_EQ(stream.push(995), " world"); // a bad id leaves the stream as it was
}

TEST(Tokenizer, VocabularyQueries) {
  EXPECT_EQ(gpt2().vocabSize(), 50257);
  EXPECT_EQ(gpt2().tokenId("<|endoftext|>"), 50256);
  EXPECT_EQ(gpt2().tokenString(15496), "Hello");
  EXPECT_FALSE(gpt2().tokenString(50257).has_value());
  EXPECT_TRUE(gpt2().isSpecialToken(50256));
  EXPECT_FALSE(gpt2().isSpecialToken(15496));
  EXPECT_EQ(qwen3().vocabSize(), 151669);
  EXPECT_EQ(qwen3().configTokenId("eos_token"), 151645); // <|im_end|>, from tokenizer_config.json
  EXPECT_EQ(qwen3().configTokenId("pad_token"), 151643);
  EXPECT_FALSE(qwen3().configTokenId("bos_token").has_value());
  EXPECT_TRUE(qwen3().isSpecialToken(151644));
  EXPECT_FALSE(qwen3().isSpecialToken(151667)); // <think> is an added token, not a special one
}

TEST(Tokenizer, DecodeSkipsSpecialTokensOnRequest) {
  auto ids = qwen3().encode("<|im_start|>user\nHi<|im_end|><think>x</think>");
  EXPECT_EQ(qwen3().decode(ids, true), "user\nHi<think>x</think>");
  EXPECT_EQ(qwen3().decode(ids, false), "<|im_start|>user\nHi<|im_end|><think>x</think>");
}

TEST(Tokenizer, DecodeNamesAnOutOfRangeId) {
  try {
    gpt2().decode({15496, 50257});
    FAIL() << "no error";
  } catch (const TokenizerError &e) {
    EXPECT_NE(std::string(e.what()).find("50257"), std::string::npos) << e.what();
  }
  EXPECT_THROW(gpt2().decode({-1}), TokenizerError);
}

TEST(Tokenizer, EncodeRejectsInvalidUtf8) {
  EXPECT_THROW(gpt2().encode("ab\xC3("), TokenizerError);
  EXPECT_THROW(gpt2().encode("\xFF"), TokenizerError);
  EXPECT_THROW(gpt2().encode("\xED\xA0\x80"), TokenizerError); // a UTF-16 surrogate
}

TEST(Tokenizer, CleanUpTokenizationSpaces) {
  EXPECT_EQ(gerbil::tokenizer::cleanUpTokenizationSpaces("Hi , you . I 'm sure it 's ok ! do n't ?"),
            "Hi, you. I'm sure it's ok! don't?");
  EXPECT_EQ(gerbil::tokenizer::cleanUpTokenizationSpaces("a ' b do not"), "a'b do not");
}

// Streams `text` through CleanUpStream in pieces of the given lengths (the last piece takes the rest).
std::string cleanUpInPieces(const std::string &text, const std::vector<size_t> &lengths) {
  gerbil::tokenizer::CleanUpStream stream;
  std::string out;
  size_t at = 0;
  for (size_t length : lengths) {
    if (at >= text.size()) break;
    out += stream.push(std::string_view(text).substr(at, length));
    at += length;
  }
  if (at < text.size()) out += stream.push(std::string_view(text).substr(at));
  return out + stream.finish();
}

TEST(Tokenizer, CleanUpStreamEqualsCleaningTheWholeText) {
  using gerbil::tokenizer::cleanUpTokenizationSpaces;
  // Every string of up to 7 characters over the characters that matter, one character at a time: each
  // prefix is a moment at which the stream must decide what is final.
  const std::string alphabet = " '.ntsx";
  std::string text;
  std::vector<size_t> ones(8, 1);
  size_t checked = 0;
  auto visit = [&](auto &&self, size_t length) -> void {
    if (text.size() == length) {
      ASSERT_EQ(cleanUpInPieces(text, ones), cleanUpTokenizationSpaces(text)) << "'" << text << "'";
      ++checked;
      return;
    }
    for (char c : alphabet) {
      text.push_back(c);
      self(self, length);
      text.pop_back();
      if (HasFatalFailure()) return;
    }
  };
  for (size_t length = 0; length <= 7; ++length) visit(visit, length);
  EXPECT_GT(checked, 900000u);

  // Longer strings over every pattern character (and a two-byte character), in random pieces.
  const std::vector<std::string> pieces = {" ", "'", ".",  "?",  "!", ",",        "n",   "t",
                                           "m", "s", "ve", "re", "x", "\xC3\xA9", "n't", " '"};
  std::mt19937 random(5);
  for (int trial = 0; trial < 200000; ++trial) {
    std::string longer;
    for (int i = std::uniform_int_distribution<int>(1, 24)(random); i > 0; --i)
      longer += pieces[std::uniform_int_distribution<size_t>(0, pieces.size() - 1)(random)];
    std::vector<size_t> lengths;
    for (size_t at = 0; at < longer.size();) {
      size_t length = std::uniform_int_distribution<size_t>(1, 4)(random);
      // A stream hands over whole characters only.
      while (at + length < longer.size() && (static_cast<unsigned char>(longer[at + length]) & 0xC0) == 0x80)
        ++length;
      lengths.push_back(length);
      at += length;
    }
    ASSERT_EQ(cleanUpInPieces(longer, lengths), cleanUpTokenizationSpaces(longer)) << "'" << longer << "'";
  }
}

TEST(Tokenizer, CleanUpStreamHoldsBackOnlyWhatIsUndecided) {
  gerbil::tokenizer::CleanUpStream stream;
  EXPECT_EQ(stream.push("Hello"), "Hello");
  EXPECT_EQ(stream.push(" "), ""); // " ." or " ," would remove it
  EXPECT_EQ(stream.push(","), ",");
  EXPECT_EQ(stream.push(" world"), " world");
  EXPECT_EQ(stream.push(" do"), " do");
  EXPECT_EQ(stream.push(" n"), ""); // " n't" would take the space
  EXPECT_EQ(stream.push("'t"), "n't");
  EXPECT_EQ(stream.push(" stop"), " stop");
  EXPECT_EQ(stream.push(" \xC3\xA9"), " \xC3\xA9");
  EXPECT_EQ(stream.push(" "), "");
  EXPECT_EQ(stream.finish(), " ");
}

TEST(Tokenizer, LongInputs) {
  // Long runs (one pre-token of 20000 characters, deep regex backtracking on whitespace) stay fast and exact.
  std::string spaces(20000, ' ');
  auto ids = qwen3().encode(spaces + "x", false);
  EXPECT_EQ(qwen3().decode(ids), spaces + "x");
  std::string letters(20000, 'a');
  EXPECT_EQ(qwen3().decode(qwen3().encode(letters, false)), letters);
  std::string newlines(5000, '\n');
  EXPECT_EQ(gpt2().decode(gpt2().encode(newlines + " \t " + newlines, false)), newlines + " \t " + newlines);
}

// ---------------------------------------------------------------------------------------------------------
// Small tokenizers for what the fixtures do not use. The expected ids come from HF tokenizers 0.22.2.

// A character-level vocabulary over a-z, space/"▁", digits, with a few merges.
nlohmann::json miniModel() {
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0;
  for (const char *t : {"<unk>", "<s>", "</s>", "▁"}) vocab[t] = id++;
  for (char c = 'a'; c <= 'z'; ++c) vocab[std::string(1, c)] = id++;
  for (char c = '0'; c <= '9'; ++c) vocab[std::string(1, c)] = id++;
  for (const char *t : {"▁h", "he", "ll", "llo", "hello", "▁hello", "▁w", "or", "▁wor", "ld", "▁world", "12"})
    vocab[t] = id++;
  nlohmann::json merges = {"▁ h", "h e", "l l",   "ll o", "he llo",  "▁ hello",
                           "▁ w", "o r", "▁w or", "l d",  "▁wor ld", "1 2"};
  return {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"unk_token", "<unk>"}, {"fuse_unk", true}};
}

Tokenizer makeTokenizer(const nlohmann::json &json) {
  return Tokenizer::fromJson(json.dump(), "mini.json");
}

TEST(TokenizerFeatures, MetaspaceFirstAndUnknownFusing) {
  nlohmann::json j = {
      {"model", miniModel()},
      {"pre_tokenizer",
       {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", true}}},
      {"decoder",
       {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", true}}},
      {"added_tokens",
       {{{"id", 1},
         {"content", "<s>"},
         {"special", true},
         {"normalized", false},
         {"single_word", false},
         {"lstrip", false},
         {"rstrip", false}}}}};
  Tokenizer t = makeTokenizer(j);
  // "first": only the piece at the very start of the input gets a "▁"; "ÄÖ" fuses into one <unk>.
  // (The merge "▁ h" ranks before "h e", so "▁hello" comes out as ▁h e llo.)
  EXPECT_EQ(t.encode("hello world", false), (std::vector<int32_t>{40, 8, 43, 50}));
  EXPECT_EQ(t.encode("<s>hello world", false), (std::vector<int32_t>{1, 44, 50}));
  EXPECT_EQ(t.encode("hello ÄÖx", false), (std::vector<int32_t>{40, 8, 43, 3, 0, 27}));
  EXPECT_EQ(t.decode({40, 8, 43, 50}), "hello world");
  EXPECT_EQ(t.decode({45, 50}), "hello world");
  EXPECT_EQ(t.decode({1, 44, 50}), "<s>hello world");
}

TEST(TokenizerFeatures, AddedTokenStripAndSingleWord) {
  nlohmann::json added = nlohmann::json::array();
  auto token = [](int id, const char *content, bool lstrip, bool rstrip, bool singleWord, bool special) {
    return nlohmann::json{{"id", id},           {"content", content},        {"lstrip", lstrip},
                          {"rstrip", rstrip},   {"single_word", singleWord}, {"special", special},
                          {"normalized", false}};
  };
  added.push_back(token(60, "[L]", true, false, false, true));
  added.push_back(token(61, "[R]", false, true, false, true));
  added.push_back(token(62, "ab", false, false, true, false));
  nlohmann::json j = {{"model", miniModel()},
                      {"normalizer", {{"type", "Lowercase"}}},
                      {"pre_tokenizer", {{"type", "WhitespaceSplit"}}},
                      {"added_tokens", added}};
  Tokenizer t = makeTokenizer(j);
  // HF numbers the added tokens itself, after the 52 entries of the vocabulary, whatever the JSON says.
  EXPECT_EQ(t.tokenId("[L]"), 52);
  EXPECT_EQ(t.encode("x  [L]  y", false), (std::vector<int32_t>{27, 52, 28}));
  EXPECT_EQ(t.encode("x  [R]  y", false), (std::vector<int32_t>{27, 53, 28}));
  EXPECT_EQ(t.encode("ab cab ab", false), (std::vector<int32_t>{54, 6, 4, 5, 54}));
  // With special tokens read as text, "[L]" goes to the model (no "[" in the vocabulary: <unk>).
  EXPECT_EQ(t.encode("x [L]", false, false), (std::vector<int32_t>{27, 0, 15, 0}));
  EXPECT_EQ(t.vocabSize(), 55);
}

TEST(TokenizerFeatures, DigitsNfkcAndRobertaProcessing) {
  nlohmann::json j = {
      {"model", miniModel()},
      {"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "NFKC"}}, {{"type", "Lowercase"}}}}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "WhitespaceSplit"}}, {{"type", "Digits"}, {"individual_digits", false}}}}}},
      {"post_processor", {{"type", "RobertaProcessing"}, {"sep", {"</s>", 2}}, {"cls", {"<s>", 1}}}}};
  Tokenizer t = makeTokenizer(j);
  // "ＡＢ" is full-width (NFKC makes it "ab"); "１２3" has full-width digits, one Contiguous run.
  EXPECT_EQ(t.encode("ＡＢ １２3x"), (std::vector<int32_t>{1, 4, 5, 51, 33, 27, 2}));
  EXPECT_EQ(t.encode("ＡＢ １２3x", false), (std::vector<int32_t>{4, 5, 51, 33, 27}));
}

TEST(TokenizerFeatures, SubwordPrefixAndSuffix) {
  nlohmann::json vocab = {{"[UNK]", 0}, {"a", 1},       {"##b", 2},  {"##c</w>", 3},
                          {"ab", 4},    {"abc</w>", 5}, {"c</w>", 6}};
  nlohmann::json model = {{"type", "BPE"},
                          {"vocab", vocab},
                          {"merges", nlohmann::json::array({nlohmann::json::array({"a", "##b"}),
                                                            nlohmann::json::array({"ab", "##c</w>"})})},
                          {"unk_token", "[UNK]"},
                          {"continuing_subword_prefix", "##"},
                          {"end_of_word_suffix", "</w>"}};
  nlohmann::json j = {{"model", model},
                      {"pre_tokenizer", {{"type", "WhitespaceSplit"}}},
                      {"decoder", {{"type", "BPEDecoder"}, {"suffix", "</w>"}}}};
  Tokenizer t = makeTokenizer(j);
  EXPECT_EQ(t.encode("abc c abx", false), (std::vector<int32_t>{5, 6, 4, 0}));
  EXPECT_EQ(t.decode({5, 6}), "abc c");
}

TEST(TokenizerFeatures, ByteFallbackDecoding) {
  // Mistral's decoder on byte tokens that do not form UTF-8: one U+FFFD per byte, as HF.
  Tokenizer mistral =
      Tokenizer::fromFile(std::string(GERBIL_TEST_DATA_DIR) + "/fixtures/tokenizers/mistral/tokenizer.json");
  int32_t e2 = *mistral.tokenId("<0xE2>"), x80 = *mistral.tokenId("<0x80>");
  EXPECT_EQ(mistral.decode({e2, x80}), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(mistral.decode({e2, x80, *mistral.tokenId("<0x99>")}), "\xE2\x80\x99");
}

// ---------------------------------------------------------------------------------------------------------
// Garbled tokenizer.json: always a TokenizerError that names the file and the key.

void expectError(const std::string &json, const std::string &expected) {
  try {
    Tokenizer::fromJson(json, "tokenizer.json");
    ADD_FAILURE() << "no error for " << json;
  } catch (const TokenizerError &e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << "message: " << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("tokenizer.json: ", 0), 0u) << "message: " << e.what();
  }
}

std::string withModel(const std::string &model, const std::string &rest = "") {
  return R"({"model": )" + model + (rest.empty() ? "" : ", " + rest) + "}";
}

const std::string kGoodModel = R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]})";

TEST(TokenizerErrors, GarbledFiles) {
  expectError("", "not valid JSON");
  expectError("{\"model\": ", "not valid JSON");
  expectError("[1, 2]", "is not a JSON object");
  // Found by fuzz-tokenizer: a number too large for a double is nlohmann's out_of_range, not a parse_error,
  // and escaped as an uncaught exception (in the vocabulary, and anywhere else in the file).
  expectError(withModel(R"({"type": "BPE", "vocab": {"a": 11e3088}, "merges": []})"), "not valid JSON");
  expectError(R"({"added_tokens": [{"id": 11e3088}]})", "not valid JSON");
  expectError("{}", "model is missing");
  expectError(withModel(R"({"type": "WordPiece", "vocab": {}})"), "model.type 'WordPiece' is not supported");
  expectError(withModel(R"({"type": 3, "vocab": {}, "merges": []})"),
              "model.type is an integer, not a string");
  expectError(withModel(R"({"type": "BPE", "vocab": [], "merges": []})"),
              "model.vocab is an array, not an object");
  expectError(withModel(R"({"type": "BPE", "vocab": {"a": "x"}, "merges": []})"),
              "model.vocab[\"a\"] is a string, not an integer");
  expectError(withModel(R"({"type": "BPE", "vocab": {"a": -4}, "merges": []})"), "is -4, not a token id");
  expectError(withModel(R"({"type": "BPE", "vocab": {"a": 0}})"), "model.merges is missing");
  expectError(withModel(R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b", "ab"]})"),
              "model.merges[1] is not a pair");
  expectError(
      withModel(R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b", "c"]]})"),
      "model.merges[0] is not a pair");
  expectError(withModel(R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a zz"]})"),
              "model.merges[0] names 'zz', which is not in model.vocab");
  expectError(withModel(R"({"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": [["a", "b"]]})"),
              "model.merges[0] makes 'ab', which is not in model.vocab");
  expectError(withModel(kGoodModel, R"("added_tokens": [{"id": "x", "content": "a"}])"),
              "added_tokens[0].id is a string, not an integer");
  expectError(withModel(kGoodModel, R"("added_tokens": [{"id": 5}])"), "added_tokens[0].content is missing");
  expectError(withModel(kGoodModel, R"("added_tokens": {"id": 5})"),
              "added_tokens is an object, not an array");
  expectError(withModel(kGoodModel, R"("pre_tokenizer": {"type": "Frobnicate"})"),
              "pre_tokenizer.type 'Frobnicate' is not a supported pre-tokenizer");
  expectError(
      withModel(kGoodModel,
                R"("pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a"}, "behavior": "Isolated"})"),
      "pre_tokenizer.pattern.Regex is not a valid regex");
  expectError(
      withModel(kGoodModel,
                R"("pre_tokenizer": {"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Sideways"})"),
      "pre_tokenizer.behavior 'Sideways' is not a split behavior");
  expectError(
      withModel(kGoodModel, R"("normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}, {}]})"),
      "normalizer.normalizers[1].type is missing");
  expectError(withModel(kGoodModel, R"("normalizer": {"type": "Precompiled", "precompiled_charsmap": ""})"),
              "normalizer.type 'Precompiled' is not a supported normalizer");
  expectError(
      withModel(kGoodModel, R"("decoder": {"type": "Strip", "content": "ab", "start": 1, "stop": 0})"),
      "decoder.content is 'ab', not a single character");
  expectError(
      withModel(
          kGoodModel,
          R"("post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}], "special_tokens": {}})"),
      "post_processor.single[0].SpecialToken names '<s>', which is not in special_tokens");
}

TEST(TokenizerErrors, MissingAndTruncatedFiles) {
  EXPECT_THROW(Tokenizer::fromFile("/nonexistent/tokenizer.json"), TokenizerError);
  std::string text = readFile(fs::path(GERBIL_TEST_DATA_DIR) / "fixtures/tokenizers/gpt2/tokenizer.json");
  EXPECT_THROW(Tokenizer::fromJson(text.substr(0, text.size() / 2), "gpt2"), TokenizerError);
}

TEST(TokenizerErrors, RandomlyGarbledFilesNeverCrash) {
  // Byte mutations of a small but complete tokenizer.json: each one loads (and then encodes and decodes) or
  // fails with a TokenizerError, never anything else.
  nlohmann::json j = {
      {"model", miniModel()},
      {"normalizer",
       {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Prepend"}, {"prepend", "▁"}}}}}},
      {"pre_tokenizer",
       {{"type", "Split"}, {"pattern", {{"Regex", "\\s+|\\p{L}+"}}}, {"behavior", "Isolated"}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "<s>"}}}}, {{"Sequence", {{"id", "A"}}}}}},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
          {{"type", "ByteFallback"}},
          {{"type", "Fuse"}},
          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
      {"added_tokens", {{{"id", 1}, {"content", "<s>"}, {"special", true}, {"normalized", false}}}}};
  const std::string original = j.dump();
  std::mt19937 rng(1234);
  const std::string alphabet = "{}[]\":,0123456789-. abtrue\\";
  int loaded = 0;
  for (int round = 0; round < 1500; ++round) {
    std::string text = original;
    int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % text.size();
      switch (rng() % 3) {
      case 0:
        text[pos] = alphabet[rng() % alphabet.size()];
        break;
      case 1:
        text.erase(pos, 1 + rng() % 8);
        break;
      default:
        text.insert(pos, 1, alphabet[rng() % alphabet.size()]);
        break;
      }
    }
    try {
      Tokenizer t = Tokenizer::fromJson(text, "garbled.json");
      ++loaded;
      auto ids = t.encode("hello world 12 ÄÖ <s>x");
      t.decode(ids);
    } catch (const TokenizerError &) {
    } catch (const std::exception &e) {
      ADD_FAILURE() << "not a TokenizerError: " << e.what() << " for " << text;
    }
  }
  EXPECT_GT(loaded, 0);
}

} // namespace
