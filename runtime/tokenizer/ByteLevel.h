// GPT-2's byte-to-character table: every byte gets a printable character (printable Latin-1 bytes keep their
// own, the rest map to U+0100 onwards), so that byte-level BPE works on strings.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gerbil::tokenizer::detail {

// The UTF-8 of the character that stands for `byte`.
const std::string &byteLevelCharacter(unsigned char byte);
// Every byte of `text` replaced by its character.
std::string toByteLevel(std::string_view text);
// The byte a character stands for, or nullopt for a character outside the table.
std::optional<unsigned char> byteLevelByte(char32_t c);

} // namespace gerbil::tokenizer::detail
