#include "runtime/tokenizer/PreTokenizer.h"

#include "runtime/tokenizer/ByteLevel.h"
#include "runtime/tokenizer/Json.h"
#include "runtime/tokenizer/Regex.h"
#include "runtime/tokenizer/Unicode.h"

#include <algorithm>
#include <cctype>
#include <functional>

namespace gerbil::tokenizer::detail {

namespace {

// GPT-2's word pattern, which ByteLevel(use_regex=true) splits with.
constexpr const char *kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Regex \w and \s of the Rust regex crate, which the Whitespace pre-tokenizer uses.
constexpr const char *kWhitespacePattern =
    R"([\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}]+|[^\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}\s]+)";

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

struct Span {
  size_t start, end;
  bool isMatch;
};

// The matches and the gaps between them, covering the whole text (HF's Pattern::find_matches).
std::vector<Span> spansOf(size_t size, const std::vector<Match> &matches, bool invert) {
  std::vector<Span> spans;
  size_t previous = 0;
  for (const Match &m : matches) {
    if (m.start > previous) spans.push_back({previous, m.start, invert});
    spans.push_back({m.start, m.end, !invert});
    previous = m.end;
  }
  if (previous < size) spans.push_back({previous, size, invert});
  return spans;
}

// Every character for which `predicate` holds is a match of its own.
std::vector<Match> characterMatches(const std::string &text, const std::function<bool(char32_t)> &predicate) {
  std::vector<Match> matches;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = pos;
    if (predicate(decodeUtf8(text, pos))) matches.push_back({start, pos});
  }
  return matches;
}

// HF's NormalizedString::split: which [start, end) ranges the spans become under `behavior`.
std::vector<Match> applyBehavior(const std::vector<Span> &spans, Behavior behavior) {
  std::vector<Match> out;
  bool previousMatch = false;
  switch (behavior) {
  case Behavior::Isolated:
    for (const Span &s : spans) out.push_back({s.start, s.end});
    break;
  case Behavior::Removed:
    for (const Span &s : spans)
      if (!s.isMatch) out.push_back({s.start, s.end});
    break;
  case Behavior::Contiguous:
    for (const Span &s : spans) {
      if (s.isMatch == previousMatch && !out.empty())
        out.back().end = s.end;
      else
        out.push_back({s.start, s.end});
      previousMatch = s.isMatch;
    }
    break;
  case Behavior::MergedWithPrevious:
    for (const Span &s : spans) {
      if (s.isMatch && !previousMatch && !out.empty())
        out.back().end = s.end;
      else
        out.push_back({s.start, s.end});
      previousMatch = s.isMatch;
    }
    break;
  case Behavior::MergedWithNext:
    for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
      if (it->isMatch && !previousMatch && !out.empty())
        out.back().start = it->start;
      else
        out.push_back({it->start, it->end});
      previousMatch = it->isMatch;
    }
    std::reverse(out.begin(), out.end());
    break;
  }
  return out;
}

void appendPieces(const PreToken &piece, const std::vector<Match> &ranges, std::vector<PreToken> &out) {
  for (const Match &r : ranges) {
    if (r.end <= r.start) continue;
    out.push_back({piece.text.substr(r.start, r.end - r.start), piece.atInputStart && r.start == 0});
  }
}

// A pre-tokenizer that splits each piece on its own.
class PieceSplitter : public PreTokenizer {
public:
  void split(std::vector<PreToken> &pieces) const override {
    std::vector<PreToken> out;
    out.reserve(pieces.size());
    for (PreToken &piece : pieces) splitPiece(piece, out);
    pieces = std::move(out);
  }

protected:
  virtual void splitPiece(PreToken &piece, std::vector<PreToken> &out) const = 0;
};

class ByteLevelPreTokenizer : public PieceSplitter {
public:
  ByteLevelPreTokenizer(bool addPrefixSpace, bool useRegex, const std::string &where)
      : addPrefixSpace_(addPrefixSpace) {
    if (useRegex) regex_ = std::make_unique<Regex>(kGpt2Pattern, where + " (the GPT-2 pattern)");
  }

protected:
  void splitPiece(PreToken &piece, std::vector<PreToken> &out) const override {
    if (addPrefixSpace_ && piece.text.rfind(' ', 0) != 0) piece.text = " " + piece.text;
    size_t first = out.size();
    if (regex_)
      appendPieces(
          piece,
          applyBehavior(spansOf(piece.text.size(), regex_->findAll(piece.text), false), Behavior::Isolated),
          out);
    else if (!piece.text.empty())
      out.push_back(piece);
    for (size_t i = first; i < out.size(); ++i) out[i].text = toByteLevel(out[i].text);
  }

private:
  bool addPrefixSpace_;
  std::unique_ptr<Regex> regex_;
};

class PatternSplitter : public PieceSplitter {
public:
  PatternSplitter(Pattern pattern, Behavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}

protected:
  void splitPiece(PreToken &piece, std::vector<PreToken> &out) const override {
    auto spans = spansOf(piece.text.size(), pattern_.findAll(piece.text), invert_);
    appendPieces(piece, applyBehavior(spans, behavior_), out);
  }

private:
  Pattern pattern_;
  Behavior behavior_;
  bool invert_;
};

class CharacterSplitter : public PieceSplitter {
public:
  CharacterSplitter(std::function<bool(char32_t)> predicate, Behavior behavior)
      : predicate_(std::move(predicate)), behavior_(behavior) {}

protected:
  void splitPiece(PreToken &piece, std::vector<PreToken> &out) const override {
    auto spans = spansOf(piece.text.size(), characterMatches(piece.text, predicate_), false);
    appendPieces(piece, applyBehavior(spans, behavior_), out);
  }

private:
  std::function<bool(char32_t)> predicate_;
  Behavior behavior_;
};

enum class PrependScheme { Always, First, Never };

class MetaspacePreTokenizer : public PieceSplitter {
public:
  MetaspacePreTokenizer(char32_t replacement, PrependScheme scheme, bool split)
      : replacement_(replacement), scheme_(scheme), split_(split) {
    appendUtf8(replacementUtf8_, replacement);
  }

protected:
  void splitPiece(PreToken &piece, std::vector<PreToken> &out) const override {
    std::string text;
    for (char c : piece.text) {
      if (c == ' ')
        text += replacementUtf8_;
      else
        text += c;
    }
    bool startsWithReplacement = text.rfind(replacementUtf8_, 0) == 0;
    if (!startsWithReplacement &&
        (scheme_ == PrependScheme::Always || (scheme_ == PrependScheme::First && piece.atInputStart)))
      text = replacementUtf8_ + text;
    piece.text = std::move(text);
    if (!split_) {
      if (!piece.text.empty()) out.push_back(piece);
      return;
    }
    char32_t replacement = replacement_;
    auto matches = characterMatches(piece.text, [replacement](char32_t c) { return c == replacement; });
    appendPieces(piece, applyBehavior(spansOf(piece.text.size(), matches, false), Behavior::MergedWithNext),
                 out);
  }

private:
  char32_t replacement_;
  std::string replacementUtf8_;
  PrependScheme scheme_;
  bool split_;
};

class SequencePreTokenizer : public PreTokenizer {
public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  void split(std::vector<PreToken> &pieces) const override {
    for (const auto &step : steps_) step->split(pieces);
  }

private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

Behavior parseBehavior(const JsonRef &json) {
  std::string name = json.string();
  if (name == "Removed") return Behavior::Removed;
  if (name == "Isolated") return Behavior::Isolated;
  if (name == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::MergedWithNext;
  if (name == "Contiguous") return Behavior::Contiguous;
  json.fail("'" + name + "' is not a split behavior");
}

PrependScheme parsePrependScheme(const JsonRef &json) {
  if (auto scheme = json.find("prepend_scheme")) {
    std::string name = scheme->string();
    if (name == "always") return PrependScheme::Always;
    if (name == "first") return PrependScheme::First;
    if (name == "never") return PrependScheme::Never;
    scheme->fail("'" + name + "' is not a prepend scheme");
  }
  // Files written before prepend_scheme existed say add_prefix_space.
  return json.booleanOr("add_prefix_space", true) ? PrependScheme::Always : PrependScheme::Never;
}

bool isBertPunctuation(char32_t c) {
  return (c < 0x80 && std::ispunct(static_cast<int>(c))) || isPunctuation(c);
}

} // namespace

std::unique_ptr<PreTokenizer> makePreTokenizer(const JsonRef &json) {
  if (json.isNull()) return nullptr;
  std::string type = json.type();
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelPreTokenizer>(json.booleanOr("add_prefix_space", true),
                                                   json.booleanOr("use_regex", true),
                                                   json.file() + ": " + json.path());
  if (type == "Split") {
    auto behavior = parseBehavior(json.at("behavior"));
    return std::make_unique<PatternSplitter>(parsePattern(json.at("pattern")), behavior,
                                             json.booleanOr("invert", false));
  }
  if (type == "Digits")
    return std::make_unique<CharacterSplitter>(
        isNumeric, json.booleanOr("individual_digits", false) ? Behavior::Isolated : Behavior::Contiguous);
  if (type == "Metaspace") {
    char32_t replacement = 0x2581;
    if (auto r = json.find("replacement")) replacement = r->character();
    return std::make_unique<MetaspacePreTokenizer>(replacement, parsePrependScheme(json),
                                                   json.booleanOr("split", true));
  }
  if (type == "WhitespaceSplit") return std::make_unique<CharacterSplitter>(isWhiteSpace, Behavior::Removed);
  if (type == "Whitespace")
    return std::make_unique<PatternSplitter>(
        Pattern::regex(kWhitespacePattern, json.file() + ": " + json.path()), Behavior::Removed, true);
  if (type == "Punctuation") {
    Behavior behavior = Behavior::Isolated;
    if (auto b = json.find("behavior")) behavior = parseBehavior(*b);
    return std::make_unique<CharacterSplitter>(isBertPunctuation, behavior);
  }
  if (type == "BertPreTokenizer") {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    steps.push_back(std::make_unique<CharacterSplitter>(isWhiteSpace, Behavior::Removed));
    steps.push_back(std::make_unique<CharacterSplitter>(isBertPunctuation, Behavior::Isolated));
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  if (type == "CharDelimiterSplit") {
    char32_t delimiter = json.at("delimiter").character();
    return std::make_unique<CharacterSplitter>([delimiter](char32_t c) { return c == delimiter; },
                                               Behavior::Removed);
  }
  if (type == "Sequence") {
    JsonRef list = json.at("pretokenizers");
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (size_t i = 0; i < list.arraySize(); ++i) {
      JsonRef item = list.item(i);
      if (item.isNull()) item.fail("is null");
      steps.push_back(makePreTokenizer(item));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  json.at("type").fail("'" + type + "' is not a supported pre-tokenizer");
}

} // namespace gerbil::tokenizer::detail
