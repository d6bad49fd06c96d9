// tokenizer.json "post_processor": what add_special_tokens=True adds around the ids (BOS/EOS).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace gerbil::tokenizer::detail {

class JsonRef;

class PostProcessor {
public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int32_t> &ids, bool addSpecialTokens) const = 0;
};

// Null JSON gives nullptr (nothing added).
std::unique_ptr<PostProcessor> makePostProcessor(const JsonRef &json);

} // namespace gerbil::tokenizer::detail
