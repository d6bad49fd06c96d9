#include "runtime/tokenizer/Normalizer.h"

#include "runtime/tokenizer/ByteLevel.h"
#include "runtime/tokenizer/Json.h"
#include "runtime/tokenizer/Regex.h"
#include "runtime/tokenizer/Unicode.h"

#include <vector>

namespace gerbil::tokenizer::detail {

namespace {

class UnicodeNormalizer : public Normalizer {
public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  void normalize(std::string &text) const override { text = normalizeUnicode(text, form_); }

private:
  NormalForm form_;
};

class LowercaseNormalizer : public Normalizer {
public:
  void normalize(std::string &text) const override { text = lowercase(text); }
};

// Prepend and Append leave an empty text empty: an added token at the very start does not get a "▁" of its
// own.
class AffixNormalizer : public Normalizer {
public:
  AffixNormalizer(std::string affix, bool atEnd) : affix_(std::move(affix)), atEnd_(atEnd) {}
  void normalize(std::string &text) const override {
    if (text.empty()) return;
    text = atEnd_ ? text + affix_ : affix_ + text;
  }

private:
  std::string affix_;
  bool atEnd_;
};

class ReplaceNormalizer : public Normalizer {
public:
  ReplaceNormalizer(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string &text) const override {
    std::vector<Match> matches = pattern_.findAll(text);
    if (matches.empty()) return;
    std::string out;
    size_t last = 0;
    for (const Match &m : matches) {
      out.append(text, last, m.start - last);
      out += content_;
      last = m.end;
    }
    out.append(text, last, std::string::npos);
    text = std::move(out);
  }

private:
  Pattern pattern_;
  std::string content_;
};

class StripNormalizer : public Normalizer {
public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string &text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        size_t pos = begin;
        if (!isWhiteSpace(decodeUtf8(text, pos))) break;
        begin = pos;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = 0;
        if (!isWhiteSpace(decodeUtf8Before(text, end, &start))) break;
        end = start;
      }
    }
    text = text.substr(begin, end - begin);
  }

private:
  bool left_, right_;
};

class StripAccentsNormalizer : public Normalizer {
public:
  void normalize(std::string &text) const override {
    std::string out;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t start = pos;
      if (!isCombiningMark(decodeUtf8(text, pos))) out.append(text, start, pos - start);
    }
    text = std::move(out);
  }
};

class ByteLevelNormalizer : public Normalizer {
public:
  void normalize(std::string &text) const override { text = toByteLevel(text); }
};

class SequenceNormalizer : public Normalizer {
public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void normalize(std::string &text) const override {
    for (const auto &step : steps_) step->normalize(text);
  }

private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

} // namespace

std::unique_ptr<Normalizer> makeNormalizer(const JsonRef &json) {
  if (json.isNull()) return nullptr;
  std::string type = json.type();
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalForm::NFC);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalForm::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalForm::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalForm::NFKD);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Prepend") return std::make_unique<AffixNormalizer>(json.at("prepend").string(), false);
  if (type == "Append") return std::make_unique<AffixNormalizer>(json.at("append").string(), true);
  if (type == "Replace")
    return std::make_unique<ReplaceNormalizer>(parsePattern(json.at("pattern")), json.at("content").string());
  if (type == "Strip")
    return std::make_unique<StripNormalizer>(json.booleanOr("strip_left", true),
                                             json.booleanOr("strip_right", true));
  if (type == "StripAccents") return std::make_unique<StripAccentsNormalizer>();
  if (type == "ByteLevel") return std::make_unique<ByteLevelNormalizer>();
  if (type == "Sequence") {
    JsonRef list = json.at("normalizers");
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (size_t i = 0; i < list.arraySize(); ++i) {
      JsonRef item = list.item(i);
      if (item.isNull()) item.fail("is null");
      steps.push_back(makeNormalizer(item));
    }
    return std::make_unique<SequenceNormalizer>(std::move(steps));
  }
  json.at("type").fail("'" + type + "' is not a supported normalizer");
}

} // namespace gerbil::tokenizer::detail
