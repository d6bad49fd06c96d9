// A JSON value quoted in an error message: what dump() gives, cut after `limit` characters and marked "...".
// dump() recurses once per level of nesting, so a hostile file of deeply nested arrays would overflow the
// stack while its message is written; this recurses only while the text grows, at most about `limit` levels.
// Header-only (nlohmann-json is), for the parsers of the compiler and the runtime alike.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>

namespace gerbil::support {

namespace detail {
inline void appendJsonExcerpt(std::string &out, const nlohmann::json &value, size_t limit) {
  if (!value.is_array() && !value.is_object()) {
    out += value.dump();
    return;
  }
  bool isArray = value.is_array();
  out += isArray ? '[' : '{';
  bool first = true;
  for (auto it = value.begin(); it != value.end() && out.size() <= limit; ++it) {
    if (!first) out += ',';
    first = false;
    if (!isArray) {
      out += nlohmann::json(it.key()).dump();
      out += ':';
    }
    appendJsonExcerpt(out, it.value(), limit);
  }
  out += isArray ? ']' : '}';
}
} // namespace detail

inline std::string jsonExcerpt(const nlohmann::json &value, size_t limit) {
  std::string text;
  detail::appendJsonExcerpt(text, value, limit);
  if (text.size() > limit) {
    text.resize(limit);
    text += "...";
  }
  return text;
}

} // namespace gerbil::support
