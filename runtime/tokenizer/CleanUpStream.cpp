// Streaming clean_up_tokenization. transformers applies ten str.replace calls in turn to the whole decoded
// text; each rewrite removes spaces from a short "span" that starts with a space and holds only the
// characters of the patterns (space ' . ? ! , n t m s v e r). So the text can be cut where no span can cross:
// after any other character, or where every recent space is followed by characters that start no pattern.
// Each part is then cleaned on its own, and the parts give exactly what cleaning all the text at once gives
// (test/unit/TokenizerTest.cpp checks every short string over the pattern characters, piece by piece).
#include "runtime/tokenizer/Tokenizer.h"

#include <string_view>

namespace gerbil::tokenizer {
namespace {

// The longest stretch of raw text one rewrite can span: "  ' ve" becomes "'ve" and " n ' t" becomes "n't"
// once " ' " has become "'" (six characters); one more for safety.
constexpr size_t kLongestSpan = 7;

bool isPatternCharacter(char c) {
  return std::string_view(" '.?!,ntmsver").find(c) != std::string_view::npos;
}

bool isPunctuation(char c) {
  return c == '.' || c == '?' || c == '!' || c == ',';
}

// Whether the space at `space` starts no span that reaches `cut` or beyond, knowing only text[0, cut).
bool spaceIsSettled(std::string_view text, size_t space, size_t cut) {
  if (space + kLongestSpan <= cut) return true;
  if (space + 1 >= cut) return false; // what follows is not known yet
  char next = text[space + 1];
  if (isPunctuation(next)) return true; // " ." is all of its span: it ends before the cut
  if (next == ' ') return false;        // "  ' s" becomes "'s"
  if (next != 'n' && next != '\'') return true;
  if (space + 2 >= cut) return false;
  char second = text[space + 2];
  if (second == ' ') return false;                            // " ' " and " n ' t"
  if (next == 'n') return second != '\'' || space + 3 < cut;  // " n't" ends at the 't'
  return (second != 'v' && second != 'r') || space + 3 < cut; // " 's", " 've", " 're"
}

bool isSafeCut(std::string_view text, size_t cut) {
  if (cut == 0) return true;
  if (cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
    return false; // inside a UTF-8 character
  if (!isPatternCharacter(text[cut - 1])) return true;
  for (size_t space = cut > kLongestSpan ? cut - kLongestSpan : 0; space < cut; ++space)
    if (text[space] == ' ' && !spaceIsSettled(text, space, cut)) return false;
  return true;
}

} // namespace

std::string CleanUpStream::push(std::string_view text) {
  pending_ += text;
  size_t cut = pending_.size();
  while (!isSafeCut(pending_, cut)) --cut;
  std::string ready = cleanUpTokenizationSpaces(pending_.substr(0, cut));
  pending_.erase(0, cut);
  return ready;
}

std::string CleanUpStream::finish() {
  std::string rest = cleanUpTokenizationSpaces(std::move(pending_));
  pending_.clear();
  return rest;
}

} // namespace gerbil::tokenizer
