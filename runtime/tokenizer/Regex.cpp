#include "runtime/tokenizer/Regex.h"

#include "runtime/tokenizer/Json.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "runtime/tokenizer/Unicode.h"

#include <algorithm>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace gerbil::tokenizer::detail {

namespace {

// Oniguruma's Unicode \s, written for a PCRE2 character class.
constexpr std::string_view kOnigurumaSpace = "\\x{09}-\\x{0D}\\x{85}\\p{Z}";

std::string pcre2Message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof buffer) < 0) return "error " + std::to_string(code);
  return reinterpret_cast<const char *>(buffer);
}

// Match data and a JIT stack per call keep one compiled Regex usable from several threads at once.
struct MatchState {
  pcre2_match_data *data = nullptr;
  pcre2_match_context *context = nullptr;
  pcre2_jit_stack *stack = nullptr;
  explicit MatchState(const pcre2_code *code) {
    data = pcre2_match_data_create_from_pattern(code, nullptr);
    context = pcre2_match_context_create(nullptr);
  }
  // The default 32 KiB JIT stack can be too small for deep backtracking over a very long input; a larger one
  // is only made when that happens.
  bool growJitStack() {
    if (stack || !context) return false;
    stack = pcre2_jit_stack_create(256 * 1024, 16 * 1024 * 1024, nullptr);
    if (stack) pcre2_jit_stack_assign(context, nullptr, stack);
    return stack != nullptr;
  }
  ~MatchState() {
    if (stack) pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
  MatchState(const MatchState &) = delete;
  MatchState &operator=(const MatchState &) = delete;
};

} // namespace

std::string adaptOnigurumaPattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 32);
  bool inClass = false;
  size_t i = 0;
  while (i < p.size()) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char d = p[i + 1];
      if (d == 's') {
        out += inClass ? std::string(kOnigurumaSpace) : "[" + std::string(kOnigurumaSpace) + "]";
      } else if (d == 'S' && !inClass) {
        out += "[^" + std::string(kOnigurumaSpace) + "]";
      } else {
        out += c;
        out += d;
      }
      i += 2;
      continue;
    }
    if (!inClass && c == '[') {
      inClass = true;
      out += c;
      ++i;
      if (i < p.size() && p[i] == '^') out += p[i++];
      if (i < p.size() && p[i] == ']') out += p[i++]; // a leading ']' is a literal
      continue;
    }
    if (inClass && c == '[' && i + 1 < p.size() && p[i + 1] == ':') { // [:alpha:]
      size_t close = p.find(":]", i + 2);
      if (close != std::string_view::npos) {
        out.append(p.substr(i, close + 2 - i));
        i = close + 2;
        continue;
      }
    }
    if (inClass && c == ']') inClass = false;
    out += c;
    ++i;
  }
  return out;
}

Regex::Regex(std::string_view pattern, const std::string &where) : where_(where) {
  std::string adapted = adaptOnigurumaPattern(pattern);
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code *code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(adapted.data()), adapted.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (!code)
    throw TokenizerError(where + " is not a valid regex: " + pcre2Message(error) + " at offset " +
                         std::to_string(offset));
  code_ = std::shared_ptr<pcre2_real_code_8>(code, [](pcre2_code *c) { pcre2_code_free(c); });
  uint32_t haveJit = 0;
  pcre2_config(PCRE2_CONFIG_JIT, &haveJit);
  jit_ = haveJit && pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

std::vector<Match> Regex::findAll(std::string_view text) const {
  std::vector<Match> matches;
  MatchState state(code_.get());
  if (!state.data || !state.context) throw TokenizerError(where_ + ": out of memory for the regex");
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t offset = 0;
  while (offset <= text.size()) {
    int rc =
        pcre2_match(code_.get(), subject, text.size(), offset, PCRE2_NO_UTF_CHECK, state.data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && jit_ && state.growJitStack()) continue;
    if (rc < 0) throw TokenizerError(where_ + ": regex matching failed: " + pcre2Message(rc));
    const PCRE2_SIZE *ovector = pcre2_get_ovector_pointer(state.data);
    size_t start = ovector[0], end = ovector[1];
    if (end <= start) { // empty (or \K-reversed) match: step over one character, as Oniguruma does
      if (start >= text.size()) break;
      size_t at = std::max(offset, start);
      offset = at + utf8SequenceLength(static_cast<unsigned char>(text[at]));
      continue;
    }
    matches.push_back({start, end});
    offset = end;
  }
  return matches;
}

Pattern Pattern::literal(std::string text) {
  Pattern p;
  p.literal_ = std::move(text);
  return p;
}

Pattern Pattern::regex(std::string_view pattern, const std::string &where) {
  Pattern p;
  p.regex_ = std::make_shared<const Regex>(pattern, where);
  return p;
}

std::vector<Match> Pattern::findAll(std::string_view text) const {
  if (regex_) return regex_->findAll(text);
  std::vector<Match> matches;
  if (literal_.empty()) return matches;
  size_t pos = 0;
  while ((pos = text.find(literal_, pos)) != std::string_view::npos) {
    matches.push_back({pos, pos + literal_.size()});
    pos += literal_.size();
  }
  return matches;
}

Pattern parsePattern(const JsonRef &json) {
  json.requireObject();
  if (auto literal = json.find("String")) return Pattern::literal(literal->string());
  if (auto regex = json.find("Regex"))
    return Pattern::regex(regex->string(), regex->file() + ": " + regex->path());
  json.fail("has neither \"String\" nor \"Regex\"");
}

} // namespace gerbil::tokenizer::detail
