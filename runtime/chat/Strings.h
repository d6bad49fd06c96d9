// Python's str operations on UTF-8 text: templates count, index and case-map code points, not bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gerbil::chat::strings {

// The code points of `text`, each as its UTF-8 bytes (an invalid byte stands alone).
std::vector<std::string> characters(std::string_view text);
int64_t codePointCount(std::string_view text);

std::string upper(std::string_view text);
std::string lower(std::string_view text);
std::string title(std::string_view text);      // str.title(): the first letter of each word upper
std::string capitalize(std::string_view text); // str.capitalize(): first upper, rest lower

// str.strip(chars) / lstrip / rstrip; no chars: Python's whitespace.
std::string strip(std::string_view text, const std::optional<std::string> &chars, bool left, bool right);
// str.split(sep, maxsplit) and str.rsplit: no separator splits on runs of whitespace and drops empty parts.
std::vector<std::string> split(std::string_view text, const std::optional<std::string> &separator,
                               int64_t maxSplit, bool fromRight);
std::vector<std::string> splitLines(std::string_view text, bool keepEnds);
std::string replace(std::string_view text, std::string_view old, std::string_view replacement, int64_t count);
int64_t count(std::string_view text, std::string_view needle);

// Character classes as Python's str.isdigit() etc. see them for ASCII and Unicode letters.
bool all(std::string_view text, bool (*predicate)(uint32_t));
bool isSpace(uint32_t cp);
bool isDigit(uint32_t cp);
bool isAlpha(uint32_t cp);
bool isAlnum(uint32_t cp);
bool isLower(std::string_view text);
bool isUpper(std::string_view text);

} // namespace gerbil::chat::strings
