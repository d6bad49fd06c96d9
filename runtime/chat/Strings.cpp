#include "runtime/chat/Strings.h"

#include "runtime/chat/Value.h"

#include <algorithm>
#include <utf8proc.h>

namespace gerbil::chat::strings {
namespace {

struct CodePoint {
  uint32_t value;    // U+FFFD for an invalid byte
  size_t begin, end; // its bytes
};

std::vector<CodePoint> decode(std::string_view text) {
  std::vector<CodePoint> out;
  for (size_t i = 0; i < text.size();) {
    utf8proc_int32_t cp = 0;
    utf8proc_ssize_t n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t *>(text.data() + i),
                                          static_cast<utf8proc_ssize_t>(text.size() - i), &cp);
    if (n <= 0) {
      out.push_back({0xFFFD, i, i + 1});
      ++i;
    } else {
      out.push_back({static_cast<uint32_t>(cp), i, i + static_cast<size_t>(n)});
      i += static_cast<size_t>(n);
    }
  }
  return out;
}

void append(std::string &out, uint32_t cp) {
  utf8proc_uint8_t buffer[4];
  utf8proc_ssize_t n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buffer);
  out.append(reinterpret_cast<const char *>(buffer), static_cast<size_t>(n));
}

// Maps each code point, keeping invalid bytes as they are.
template <typename Map> std::string mapCodePoints(std::string_view text, Map map) {
  std::string out;
  out.reserve(text.size());
  for (const CodePoint &c : decode(text)) {
    if (c.value == 0xFFFD && c.end - c.begin == 1 && static_cast<unsigned char>(text[c.begin]) >= 0x80)
      out += text[c.begin];
    else
      append(out, map(c.value));
  }
  return out;
}

bool isCased(uint32_t cp) {
  auto category = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return category == UTF8PROC_CATEGORY_LU || category == UTF8PROC_CATEGORY_LL ||
         category == UTF8PROC_CATEGORY_LT;
}

uint32_t toUpper(uint32_t cp) {
  return static_cast<uint32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(cp)));
}
uint32_t toLower(uint32_t cp) {
  return static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)));
}
uint32_t toTitle(uint32_t cp) {
  return static_cast<uint32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(cp)));
}

} // namespace

std::vector<std::string> characters(std::string_view text) {
  std::vector<std::string> out;
  for (const CodePoint &c : decode(text)) out.emplace_back(text.substr(c.begin, c.end - c.begin));
  return out;
}

int64_t codePointCount(std::string_view text) {
  return static_cast<int64_t>(decode(text).size());
}

std::string upper(std::string_view text) {
  return mapCodePoints(text, [](uint32_t cp) { return toUpper(cp); });
}
std::string lower(std::string_view text) {
  return mapCodePoints(text, [](uint32_t cp) { return toLower(cp); });
}

std::string title(std::string_view text) {
  bool previousCased = false;
  return mapCodePoints(text, [&](uint32_t cp) {
    bool cased = isCased(cp);
    uint32_t mapped = cased ? (previousCased ? toLower(cp) : toTitle(cp)) : cp;
    previousCased = cased;
    return mapped;
  });
}

std::string capitalize(std::string_view text) {
  bool first = true;
  return mapCodePoints(text, [&](uint32_t cp) {
    uint32_t mapped = first ? toTitle(cp) : toLower(cp);
    first = false;
    return mapped;
  });
}

bool isSpace(uint32_t cp) {
  if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F) || cp == 0x85) return true;
  auto category = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return category == UTF8PROC_CATEGORY_ZS || category == UTF8PROC_CATEGORY_ZL ||
         category == UTF8PROC_CATEGORY_ZP;
}

bool isDigit(uint32_t cp) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(cp)) == UTF8PROC_CATEGORY_ND;
}

bool isAlpha(uint32_t cp) {
  auto category = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return category >= UTF8PROC_CATEGORY_LU && category <= UTF8PROC_CATEGORY_LO;
}

bool isAlnum(uint32_t cp) {
  return isAlpha(cp) || isDigit(cp);
}

bool all(std::string_view text, bool (*predicate)(uint32_t)) {
  auto cps = decode(text);
  return !cps.empty() &&
         std::all_of(cps.begin(), cps.end(), [&](const CodePoint &c) { return predicate(c.value); });
}

bool isLower(std::string_view text) {
  bool anyCased = false;
  for (const CodePoint &c : decode(text)) {
    if (!isCased(c.value)) continue;
    if (toLower(c.value) != c.value) return false;
    anyCased = true;
  }
  return anyCased;
}

bool isUpper(std::string_view text) {
  bool anyCased = false;
  for (const CodePoint &c : decode(text)) {
    if (!isCased(c.value)) continue;
    if (toUpper(c.value) != c.value) return false;
    anyCased = true;
  }
  return anyCased;
}

std::string strip(std::string_view text, const std::optional<std::string> &chars, bool left, bool right) {
  auto cps = decode(text);
  std::vector<uint32_t> set;
  if (chars)
    for (const CodePoint &c : decode(*chars)) set.push_back(c.value);
  auto strippable = [&](const CodePoint &c) {
    return chars ? std::find(set.begin(), set.end(), c.value) != set.end() : isSpace(c.value);
  };
  size_t begin = 0, end = cps.size();
  if (left)
    while (begin < end && strippable(cps[begin])) ++begin;
  if (right)
    while (end > begin && strippable(cps[end - 1])) --end;
  if (begin == end) return "";
  return std::string(text.substr(cps[begin].begin, cps[end - 1].end - cps[begin].begin));
}

std::vector<std::string> split(std::string_view text, const std::optional<std::string> &separator,
                               int64_t maxSplit, bool fromRight) {
  std::vector<std::string> parts;
  if (separator) {
    if (separator->empty()) throw EvalError("split(): empty separator");
    if (!fromRight) {
      size_t start = 0;
      for (size_t found; (maxSplit < 0 || static_cast<int64_t>(parts.size()) < maxSplit) &&
                         (found = text.find(*separator, start)) != std::string_view::npos;
           start = found + separator->size())
        parts.emplace_back(text.substr(start, found - start));
      parts.emplace_back(text.substr(start));
      return parts;
    }
    size_t end = text.size();
    for (size_t found;
         (maxSplit < 0 || static_cast<int64_t>(parts.size()) < maxSplit) && end >= separator->size() &&
         (found = text.rfind(*separator, end - separator->size())) != std::string_view::npos;
         end = found)
      parts.emplace_back(text.substr(found + separator->size(), end - found - separator->size()));
    parts.emplace_back(text.substr(0, end));
    std::reverse(parts.begin(), parts.end());
    return parts;
  }
  // Runs of whitespace; the part left after maxSplit splits keeps its inner whitespace.
  auto cps = decode(text);
  std::vector<std::pair<size_t, size_t>> words; // code point ranges
  for (size_t i = 0; i < cps.size();) {
    while (i < cps.size() && isSpace(cps[i].value)) ++i;
    if (i == cps.size()) break;
    size_t j = i;
    while (j < cps.size() && !isSpace(cps[j].value)) ++j;
    words.emplace_back(i, j);
    i = j;
  }
  auto bytes = [&](size_t from, size_t to) {
    return std::string(text.substr(cps[from].begin, cps[to - 1].end - cps[from].begin));
  };
  if (maxSplit < 0 || static_cast<int64_t>(words.size()) <= maxSplit + 1) {
    for (auto [b, e] : words) parts.push_back(bytes(b, e));
    return parts;
  }
  if (!fromRight) {
    for (int64_t i = 0; i < maxSplit; ++i) parts.push_back(bytes(words[i].first, words[i].second));
    parts.push_back(bytes(words[maxSplit].first, words.back().second));
    return parts;
  }
  size_t firstKept = words.size() - static_cast<size_t>(maxSplit);
  parts.push_back(bytes(words[0].first, words[firstKept - 1].second));
  for (size_t i = firstKept; i < words.size(); ++i) parts.push_back(bytes(words[i].first, words[i].second));
  return parts;
}

std::vector<std::string> splitLines(std::string_view text, bool keepEnds) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\n' && text[i] != '\r') continue;
    size_t end = i;
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
    lines.emplace_back(text.substr(start, (keepEnds ? i + 1 : end) - start));
    start = i + 1;
  }
  if (start < text.size()) lines.emplace_back(text.substr(start));
  return lines;
}

std::string replace(std::string_view text, std::string_view old, std::string_view replacement,
                    int64_t count) {
  std::string out;
  if (old.empty()) { // Python inserts the replacement between every character
    auto chars = characters(text);
    int64_t done = 0;
    for (const std::string &c : chars) {
      if (count < 0 || done < count) out += replacement, ++done;
      out += c;
    }
    if (count < 0 || done < count) out += replacement;
    return out;
  }
  size_t start = 0;
  for (int64_t done = 0; count < 0 || done < count; ++done) {
    size_t found = text.find(old, start);
    if (found == std::string_view::npos) break;
    out.append(text.substr(start, found - start));
    out.append(replacement);
    start = found + old.size();
  }
  out.append(text.substr(start));
  return out;
}

int64_t count(std::string_view text, std::string_view needle) {
  if (needle.empty()) return codePointCount(text) + 1;
  int64_t n = 0;
  for (size_t found = text.find(needle); found != std::string_view::npos;
       found = text.find(needle, found + needle.size()))
    ++n;
  return n;
}

} // namespace gerbil::chat::strings
