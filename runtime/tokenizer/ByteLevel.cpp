#include "runtime/tokenizer/ByteLevel.h"

#include "runtime/tokenizer/Unicode.h"

#include <array>

namespace gerbil::tokenizer::detail {

namespace {

struct ByteLevelTable {
  std::array<std::string, 256> utf8;
  std::array<int, 0x144> byteOf; // characters of the table are all below U+0144
  ByteLevelTable() {
    byteOf.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      bool keepsItself = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      char32_t c = keepsItself ? static_cast<char32_t>(b) : next++;
      appendUtf8(utf8[b], c);
      byteOf[c] = b;
    }
  }
};

const ByteLevelTable &table() {
  static const ByteLevelTable t;
  return t;
}

} // namespace

const std::string &byteLevelCharacter(unsigned char byte) {
  return table().utf8[byte];
}

std::string toByteLevel(std::string_view text) {
  const auto &t = table();
  std::string out;
  out.reserve(text.size() * 2);
  for (char c : text) out += t.utf8[static_cast<unsigned char>(c)];
  return out;
}

std::optional<unsigned char> byteLevelByte(char32_t c) {
  const auto &t = table();
  if (c >= t.byteOf.size() || t.byteOf[c] < 0) return std::nullopt;
  return static_cast<unsigned char>(t.byteOf[c]);
}

} // namespace gerbil::tokenizer::detail
