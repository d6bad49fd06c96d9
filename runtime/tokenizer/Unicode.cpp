#include "runtime/tokenizer/Unicode.h"

#include "runtime/tokenizer/Tokenizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

namespace gerbil::tokenizer::detail {

namespace {

unsigned char byteAt(std::string_view s, size_t i) {
  return i < s.size() ? static_cast<unsigned char>(s[i]) : 0;
}
bool isContinuation(unsigned char b) {
  return (b & 0xC0) == 0x80;
}

// Length of the valid sequence at `i`, or 0 with `*bad` = how many bytes form the maximal invalid subpart
// (the rule of Rust's Utf8Chunks, which is also the WHATWG one).
size_t validSequenceAt(std::string_view s, size_t i, size_t *bad) {
  unsigned char b = byteAt(s, i);
  if (b < 0x80) return 1;
  size_t width = b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
  *bad = 1;
  if (width == 0) return 0;
  unsigned char second = byteAt(s, i + 1);
  bool secondOk = false;
  if (width == 2)
    secondOk = isContinuation(second);
  else if (b == 0xE0)
    secondOk = second >= 0xA0 && second <= 0xBF;
  else if (b == 0xED)
    secondOk = second >= 0x80 && second <= 0x9F;
  else if (width == 3)
    secondOk = isContinuation(second);
  else if (b == 0xF0)
    secondOk = second >= 0x90 && second <= 0xBF;
  else if (b == 0xF4)
    secondOk = second >= 0x80 && second <= 0x8F;
  else
    secondOk = isContinuation(second);
  if (!secondOk || i + 1 >= s.size()) return 0;
  for (size_t k = 2; k < width; ++k) {
    *bad = k;
    if (i + k >= s.size() || !isContinuation(byteAt(s, i + k))) return 0;
  }
  return width;
}

} // namespace

std::optional<size_t> firstInvalidUtf8(std::string_view bytes) {
  size_t i = 0, bad = 0;
  while (i < bytes.size()) {
    size_t n = validSequenceAt(bytes, i, &bad);
    if (n == 0) return i;
    i += n;
  }
  return std::nullopt;
}

bool isValidUtf8(std::string_view bytes) {
  return !firstInvalidUtf8(bytes).has_value();
}

std::string utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0, bad = 0;
  while (i < bytes.size()) {
    size_t n = validSequenceAt(bytes, i, &bad);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      i += bad;
    } else {
      out.append(bytes.substr(i, n));
      i += n;
    }
  }
  return out;
}

size_t utf8SequenceLength(unsigned char lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

char32_t decodeUtf8(std::string_view text, size_t &pos) {
  unsigned char b = byteAt(text, pos);
  size_t n = utf8SequenceLength(b);
  if (pos + n > text.size()) n = text.size() - pos;
  char32_t c = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
  for (size_t k = 1; k < n; ++k) c = (c << 6) | (byteAt(text, pos + k) & 0x3F);
  pos += n;
  return c;
}

char32_t decodeUtf8Before(std::string_view text, size_t end, size_t *start) {
  size_t s = end - 1;
  while (s > 0 && end - s < 4 && isContinuation(byteAt(text, s))) --s;
  if (start) *start = s;
  size_t pos = s;
  return decodeUtf8(text, pos);
}

void appendUtf8(std::string &out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

bool isWhiteSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

bool isNumeric(char32_t c) {
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

bool isCombiningMark(char32_t c) {
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC || cat == UTF8PROC_CATEGORY_ME;
}

bool isPunctuation(char32_t c) {
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

bool isWordCharacter(char32_t c) {
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
  case UTF8PROC_CATEGORY_LU:
  case UTF8PROC_CATEGORY_LL:
  case UTF8PROC_CATEGORY_LT:
  case UTF8PROC_CATEGORY_LM:
  case UTF8PROC_CATEGORY_LO:
  case UTF8PROC_CATEGORY_NL:
  case UTF8PROC_CATEGORY_MN:
  case UTF8PROC_CATEGORY_MC:
  case UTF8PROC_CATEGORY_ME:
  case UTF8PROC_CATEGORY_ND:
  case UTF8PROC_CATEGORY_PC:
    return true;
  default:
    // Join_Control and the Other_Alphabetic symbols (circled and squared letters).
    return c == 0x200C || c == 0x200D || (c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) ||
           (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189);
  }
}

std::string normalizeUnicode(std::string_view text, NormalForm form) {
  if (text.empty()) return {};
  int options = UTF8PROC_STABLE;
  switch (form) {
  case NormalForm::NFC:
    options |= UTF8PROC_COMPOSE;
    break;
  case NormalForm::NFD:
    options |= UTF8PROC_DECOMPOSE;
    break;
  case NormalForm::NFKC:
    options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    break;
  case NormalForm::NFKD:
    options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
    break;
  }
  utf8proc_uint8_t *out = nullptr;
  // Without UTF8PROC_NULLTERM the length bounds the input, so U+0000 is an ordinary character.
  utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t *>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &out, static_cast<utf8proc_option_t>(options));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
  if (n < 0) throw TokenizerError(std::string("Unicode normalization failed: ") + utf8proc_errmsg(n));
  return std::string(reinterpret_cast<const char *>(out), static_cast<size_t>(n));
}

std::string lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t c = decodeUtf8(text, pos);
    if (c == 0x130) { // the one unconditional multi-character lowercase mapping (SpecialCasing.txt)
      out += "i\xCC\x87";
      continue;
    }
    appendUtf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
  }
  return out;
}

} // namespace gerbil::tokenizer::detail
