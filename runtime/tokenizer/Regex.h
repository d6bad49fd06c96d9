// The patterns of Split pre-tokenizers and Replace normalizers/decoders: a regex (Oniguruma syntax in HF,
// run here by PCRE2 in UTF + UCP mode, JIT-compiled when available) or a literal string.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct pcre2_real_code_8;

namespace gerbil::tokenizer::detail {

struct Match {
  size_t start = 0;
  size_t end = 0;
};

class Regex {
public:
  // `where` names the pattern in errors ("tokenizer.json: pre_tokenizer.pattern.Regex").
  Regex(std::string_view pattern, const std::string &where);
  // Leftmost-first, non-overlapping, non-empty matches, as Oniguruma's find_iter (empty matches are
  // dropped: the pipelines that use them discard empty pieces anyway). `text` must be valid UTF-8.
  std::vector<Match> findAll(std::string_view text) const;

private:
  std::shared_ptr<pcre2_real_code_8> code_;
  bool jit_ = false;
  std::string where_;
};

// A Split/Replace "pattern": {"String": "..."} or {"Regex": "..."}.
class Pattern {
public:
  static Pattern literal(std::string text);
  static Pattern regex(std::string_view pattern, const std::string &where);
  std::vector<Match> findAll(std::string_view text) const;

private:
  std::string literal_;
  std::shared_ptr<const Regex> regex_;
};

class JsonRef;
// Reads {"String": "..."} or {"Regex": "..."}.
Pattern parsePattern(const JsonRef &json);

// Rewrites Oniguruma's \s and \S to the exact set Oniguruma means (U+0009-000D, U+0085 and the Z categories);
// PCRE2's UCP \s also takes U+180E.
std::string adaptOnigurumaPattern(std::string_view pattern);

} // namespace gerbil::tokenizer::detail
