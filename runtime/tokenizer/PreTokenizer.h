// tokenizer.json "pre_tokenizer": cuts normalized text into the pieces the model tokenizes one by one
// (words, digits, whitespace runs), and for byte-level models maps each piece's bytes to GPT-2 characters.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace gerbil::tokenizer::detail {

class JsonRef;

struct PreToken {
  std::string text;
  // The piece starts where the whole input starts (Metaspace's prepend_scheme "first" needs it).
  bool atInputStart = false;
};

class PreTokenizer {
public:
  virtual ~PreTokenizer() = default;
  // Replaces every piece by its sub-pieces; empty pieces are dropped.
  virtual void split(std::vector<PreToken> &pieces) const = 0;
};

// Null JSON gives nullptr (the whole text is one piece).
std::unique_ptr<PreTokenizer> makePreTokenizer(const JsonRef &json);

} // namespace gerbil::tokenizer::detail
