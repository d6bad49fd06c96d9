#include "runtime/tokenizer/Tokenizer.h"

namespace gerbil::tokenizer {

namespace {

bool endsWithReplacementCharacter(const std::string &text) {
  return text.size() >= 3 && text.compare(text.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

} // namespace

StreamDecoder::StreamDecoder(const Tokenizer &tokenizer, bool skipSpecialTokens)
    : tokenizer_(tokenizer), skipSpecialTokens_(skipSpecialTokens) {}

// HF's DecodeStream::step: decode the ids since the last emitted piece began, and emit what lies past the
// text already shown, unless it ends in U+FFFD (the bytes of a character still incomplete). Keeping the
// earlier piece as context is what keeps decoders that look at the first token (Strip, Metaspace) right.
std::string StreamDecoder::push(int32_t id) {
  ids_.push_back(id);
  std::string text;
  try {
    text = tokenizer_.decode(ids_, skipSpecialTokens_);
  } catch (...) {
    ids_.pop_back();
    throw;
  }
  if (text.size() <= prefix_.size() || endsWithReplacementCharacter(text)) return {};
  if (text.compare(0, prefix_.size(), prefix_) != 0) {
    // The context decodes differently now (no decoder of the supported kinds does this); start afresh from
    // the new id rather than repeat or lose text.
    std::string fresh = tokenizer_.decode({id}, skipSpecialTokens_);
    ids_.assign(1, id);
    prefix_ = fresh;
    prefixIndex_ = 1;
    return fresh;
  }
  std::string piece = text.substr(prefix_.size());
  size_t newPrefixIndex = ids_.size() - prefixIndex_;
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefixIndex_));
  prefix_ = tokenizer_.decode(ids_, skipSpecialTokens_);
  prefixIndex_ = newPrefixIndex;
  return piece;
}

std::string StreamDecoder::finish() {
  std::string text = tokenizer_.decode(ids_, skipSpecialTokens_);
  std::string rest;
  if (text.size() > prefix_.size() && text.compare(0, prefix_.size(), prefix_) == 0)
    rest = text.substr(prefix_.size());
  reset();
  return rest;
}

void StreamDecoder::reset() {
  ids_.clear();
  prefix_.clear();
  prefixIndex_ = 0;
}

} // namespace gerbil::tokenizer
