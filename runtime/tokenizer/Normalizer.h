// tokenizer.json "normalizer": rewrites the text before pre-tokenization (NFC, Prepend("▁"), ...).
#pragma once

#include <memory>
#include <string>

namespace gerbil::tokenizer::detail {

class JsonRef;

class Normalizer {
public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string &text) const = 0;
};

// Null JSON gives nullptr (no normalizer).
std::unique_ptr<Normalizer> makeNormalizer(const JsonRef &json);

} // namespace gerbil::tokenizer::detail
