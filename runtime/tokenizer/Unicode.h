// UTF-8 and the few Unicode properties the tokenizer needs, with the meanings Rust gives them (the reference
// is the Rust `tokenizers` crate): char::is_whitespace, char::is_numeric, regex's \w,
// String::from_utf8_lossy.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace gerbil::tokenizer::detail {

bool isValidUtf8(std::string_view bytes);
// Offset of the first byte that does not start a valid UTF-8 sequence, or nullopt.
std::optional<size_t> firstInvalidUtf8(std::string_view bytes);
// Replaces each maximal invalid subsequence by U+FFFD, exactly as Rust's String::from_utf8_lossy.
std::string utf8Lossy(std::string_view bytes);

// Decodes the character at text[pos] of valid UTF-8 and moves pos past it.
char32_t decodeUtf8(std::string_view text, size_t &pos);
// The character ending just before `end` (valid UTF-8, end > 0), and where it starts.
char32_t decodeUtf8Before(std::string_view text, size_t end, size_t *start = nullptr);
void appendUtf8(std::string &out, char32_t c);
// Byte length of the UTF-8 sequence starting with `lead` (1 for a stray continuation byte).
size_t utf8SequenceLength(unsigned char lead);

bool isWhiteSpace(char32_t c); // Unicode White_Space (Rust char::is_whitespace, regex \s)
bool isNumeric(char32_t c);    // general category N* (Rust char::is_numeric)
bool isWordCharacter(
    char32_t c); // regex \w: alphabetic, marks, decimal digits, connector punctuation, joiners
bool isCombiningMark(char32_t c); // general category M*
bool isPunctuation(char32_t c);   // general category P*

enum class NormalForm { NFC, NFD, NFKC, NFKD };
std::string normalizeUnicode(std::string_view text, NormalForm form);
// Rust's str::to_lowercase per character (no final-sigma context, as the Lowercase normalizer does).
std::string lowercase(std::string_view text);

} // namespace gerbil::tokenizer::detail
