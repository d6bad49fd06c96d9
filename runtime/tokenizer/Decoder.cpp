#include "runtime/tokenizer/Decoder.h"

#include "runtime/tokenizer/ByteLevel.h"
#include "runtime/tokenizer/Json.h"
#include "runtime/tokenizer/Regex.h"
#include "runtime/tokenizer/Unicode.h"

#include <algorithm>
#include <optional>

namespace gerbil::tokenizer::detail {

namespace {

void replaceAll(std::string &text, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::string out;
  size_t last = 0, pos = 0;
  while ((pos = text.find(from, last)) != std::string::npos) {
    out.append(text, last, pos - last);
    out += to;
    last = pos + from.size();
  }
  if (last == 0) return;
  out.append(text, last, std::string::npos);
  text = std::move(out);
}

std::string joined(const std::vector<std::string> &tokens) {
  std::string out;
  for (const auto &t : tokens) out += t;
  return out;
}

class ByteLevelDecoder : public Decoder {
public:
  void decodeChain(std::vector<std::string> &tokens) const override {
    std::string bytes;
    for (const std::string &token : tokens) {
      size_t start = bytes.size(), pos = 0;
      bool mapped = true;
      while (pos < token.size() && mapped) {
        auto byte = byteLevelByte(decodeUtf8(token, pos));
        if (byte)
          bytes += static_cast<char>(*byte);
        else
          mapped = false;
      }
      // A token with a character outside the table (an added token like "<|im_start|>" is fine, "你好" is
      // not) is taken as it is.
      if (!mapped) bytes.replace(start, std::string::npos, token);
    }
    tokens.assign(1, utf8Lossy(bytes));
  }
};

class MetaspaceDecoder : public Decoder {
public:
  MetaspaceDecoder(char32_t replacement, bool stripFirst) : stripFirst_(stripFirst) {
    appendUtf8(replacement_, replacement);
  }
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i)
      // The first token loses every replacement character when a prefix was prepended while encoding.
      replaceAll(tokens[i], replacement_, i == 0 && stripFirst_ ? "" : " ");
  }

private:
  std::string replacement_;
  bool stripFirst_;
};

class ReplaceDecoder : public Decoder {
public:
  ReplaceDecoder(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (std::string &token : tokens) {
      auto matches = pattern_.findAll(token);
      if (matches.empty()) continue;
      std::string out;
      size_t last = 0;
      for (const Match &m : matches) {
        out.append(token, last, m.start - last);
        out += content_;
        last = m.end;
      }
      out.append(token, last, std::string::npos);
      token = std::move(out);
    }
  }

private:
  Pattern pattern_;
  std::string content_;
};

// "<0xAB>" the way HF reads it: six bytes, and Rust's u8::from_str_radix on the two in the middle (which
// takes an optional leading '+').
std::optional<unsigned char> byteToken(const std::string &token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return std::nullopt;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  int high = token[3] == '+' ? 0 : hex(token[3]), low = hex(token[4]);
  if (high < 0 || low < 0) return std::nullopt;
  return static_cast<unsigned char>(high * 16 + low);
}

class ByteFallbackDecoder : public Decoder {
public:
  void decodeChain(std::vector<std::string> &tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      // Bytes that do not form valid UTF-8 give one U+FFFD each.
      if (isValidUtf8(pending))
        out.push_back(pending);
      else
        out.insert(out.end(), pending.size(), "\xEF\xBF\xBD");
      pending.clear();
    };
    for (std::string &token : tokens) {
      if (auto byte = byteToken(token)) {
        pending += static_cast<char>(*byte);
        continue;
      }
      flush();
      out.push_back(std::move(token));
    }
    flush();
    tokens = std::move(out);
  }
};

class FuseDecoder : public Decoder {
public:
  void decodeChain(std::vector<std::string> &tokens) const override { tokens.assign(1, joined(tokens)); }
};

class StripDecoder : public Decoder {
public:
  StripDecoder(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (std::string &token : tokens) {
      std::vector<std::pair<size_t, char32_t>> chars; // (byte offset, character)
      size_t pos = 0;
      while (pos < token.size()) {
        size_t at = pos;
        chars.push_back({at, decodeUtf8(token, pos)});
      }
      size_t startCut = 0;
      while (startCut < std::min(start_, chars.size()) && chars[startCut].second == content_) ++startCut;
      size_t stopCut = chars.size();
      for (size_t i = 0; i < stop_ && stopCut > startCut; ++i) {
        if (chars[stopCut - 1].second != content_) break;
        --stopCut;
      }
      size_t begin = startCut < chars.size() ? chars[startCut].first : token.size();
      size_t end = stopCut < chars.size() ? chars[stopCut].first : token.size();
      token = token.substr(begin, end - begin);
    }
  }

private:
  char32_t content_;
  size_t start_, stop_;
};

class BpeSuffixDecoder : public Decoder {
public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i)
      replaceAll(tokens[i], suffix_, i + 1 == tokens.size() ? "" : " ");
  }

private:
  std::string suffix_;
};

class WordPieceDecoder : public Decoder {
public:
  WordPieceDecoder(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string &token = tokens[i];
      if (i != 0) {
        if (token.rfind(prefix_, 0) == 0)
          token.erase(0, prefix_.size());
        else
          token = " " + token;
      }
      if (cleanup_) token = cleanUpSpaces(std::move(token), true);
    }
  }

private:
  std::string prefix_;
  bool cleanup_;
};

class SequenceDecoder : public Decoder {
public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (const auto &step : steps_) step->decodeChain(tokens);
  }

private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

size_t count(const JsonRef &json, const char *key) {
  auto v = json.find(key);
  if (!v) return 0;
  int64_t n = v->integer();
  if (n < 0) v->fail("is negative");
  return static_cast<size_t>(n);
}

} // namespace

std::string cleanUpSpaces(std::string text, bool wordPieceVariant) {
  replaceAll(text, " .", ".");
  replaceAll(text, " ?", "?");
  replaceAll(text, " !", "!");
  replaceAll(text, " ,", ",");
  replaceAll(text, " ' ", "'");
  replaceAll(text, " n't", "n't");
  replaceAll(text, " 'm", "'m");
  if (wordPieceVariant) replaceAll(text, " do not", " don't");
  replaceAll(text, " 's", "'s");
  replaceAll(text, " 've", "'ve");
  replaceAll(text, " 're", "'re");
  return text;
}

std::unique_ptr<Decoder> makeDecoder(const JsonRef &json) {
  if (json.isNull()) return nullptr;
  std::string type = json.type();
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") {
    char32_t replacement = 0x2581;
    if (auto r = json.find("replacement")) replacement = r->character();
    bool stripFirst = json.booleanOr("add_prefix_space", true);
    if (auto scheme = json.find("prepend_scheme")) {
      std::string name = scheme->string();
      if (name != "always" && name != "first" && name != "never")
        scheme->fail("'" + name + "' is not a prepend scheme");
      stripFirst = name != "never";
    }
    return std::make_unique<MetaspaceDecoder>(replacement, stripFirst);
  }
  if (type == "Replace")
    return std::make_unique<ReplaceDecoder>(parsePattern(json.at("pattern")), json.at("content").string());
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip")
    return std::make_unique<StripDecoder>(json.at("content").character(), count(json, "start"),
                                          count(json, "stop"));
  if (type == "BPEDecoder") return std::make_unique<BpeSuffixDecoder>(json.stringOr("suffix", "</w>"));
  if (type == "WordPiece")
    return std::make_unique<WordPieceDecoder>(json.stringOr("prefix", "##"), json.booleanOr("cleanup", true));
  if (type == "Sequence") {
    JsonRef list = json.at("decoders");
    std::vector<std::unique_ptr<Decoder>> steps;
    for (size_t i = 0; i < list.arraySize(); ++i) {
      JsonRef item = list.item(i);
      if (item.isNull()) item.fail("is null");
      steps.push_back(makeDecoder(item));
    }
    return std::make_unique<SequenceDecoder>(std::move(steps));
  }
  json.at("type").fail("'" + type + "' is not a supported decoder");
}

} // namespace gerbil::tokenizer::detail
