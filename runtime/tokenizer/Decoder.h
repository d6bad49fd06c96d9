// tokenizer.json "decoder": turns token strings back into text (byte-level characters to bytes, "▁" to
// spaces, "<0xAB>" byte tokens to bytes, ...). Each step maps the list of strings to a new list, as in HF.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace gerbil::tokenizer::detail {

class JsonRef;

class Decoder {
public:
  virtual ~Decoder() = default;
  virtual void decodeChain(std::vector<std::string> &tokens) const = 0;
};

// Null JSON gives nullptr (tokens are then joined with spaces, as HF does).
std::unique_ptr<Decoder> makeDecoder(const JsonRef &json);

// The replacements of HF's WordPiece decoder cleanup; `transformers` leaves out " do not" -> " don't".
std::string cleanUpSpaces(std::string text, bool wordPieceVariant);

} // namespace gerbil::tokenizer::detail
