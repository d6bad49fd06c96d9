// HuggingFace tokenizers (tokenizer.json) for byte-level BPE (GPT-2, Llama-3, Qwen2/3) and
// SentencePiece-style BPE with byte fallback (Mistral, Llama-2): the same ids and the same decoded text as
// the `tokenizers` Rust core that transformers uses. Errors are TokenizerError and name the file and the JSON
// key at fault.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gerbil::tokenizer {

class TokenizerError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

class Tokenizer {
public:
  // Loads tokenizer.json; a tokenizer_config.json beside it, when there is one, supplies what transformers
  // adds on top (clean_up_tokenization_spaces, the bos/eos/pad/unk token names).
  static Tokenizer fromFile(const std::string &path);
  // `name` is what error messages call the file. `configText` is the tokenizer_config.json text, or empty.
  static Tokenizer fromJson(const std::string &text, const std::string &name,
                            const std::string &configText = "",
                            const std::string &configName = "tokenizer_config.json");

  // encode(text, add_special_tokens). parseSpecialTokens=false is transformers' split_special_tokens=True:
  // special added tokens are then read as plain text (non-special added tokens still match).
  // Throws TokenizerError when the text is not valid UTF-8.
  std::vector<int32_t> encode(std::string_view text, bool addSpecialTokens = true,
                              bool parseSpecialTokens = true) const;
  // The tokenizer.json decoder's text; cleanUpSpaces applies transformers' clean_up_tokenization (pass
  // cleanUpTokenizationSpaces() to get exactly what transformers' tokenizer.decode returns).
  // Throws TokenizerError naming the first id that is not in the vocabulary.
  std::string decode(const std::vector<int32_t> &ids, bool skipSpecialTokens = false,
                     bool cleanUpSpaces = false) const;

  std::optional<int32_t> tokenId(std::string_view token) const;
  std::optional<std::string> tokenString(int32_t id) const;
  bool isSpecialToken(int32_t id) const;
  // One past the largest id of the vocabulary and the added tokens: every valid id is below it.
  int32_t vocabSize() const;

  // From tokenizer_config.json (false and nullopt without one).
  bool cleanUpTokenizationSpaces() const;
  // The id of tokenizer_config.json's "bos_token", "eos_token", "pad_token" or "unk_token".
  std::optional<int32_t> configTokenId(std::string_view key) const;

  const std::string &name() const;

  struct Impl;

private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_; // immutable once loaded: copies are cheap and share it across threads
  friend class StreamDecoder;
};

// The offset of the first byte of `text` that starts no valid UTF-8 character, or nullopt when it is all
// valid (encode() refuses text that is not).
std::optional<size_t> firstInvalidUtf8(std::string_view text);

// transformers' clean_up_tokenization: " ." -> "." and the like, " n't" -> "n't", ...
std::string cleanUpTokenizationSpaces(std::string text);

// cleanUpTokenizationSpaces() of text that arrives in pieces (a streamed reply): push() returns the cleaned
// text that no later piece can change and holds back the rest: a space while the next characters could still
// make it part of " .", " ' ", " n't", ... The pieces concatenated, plus finish(), equal
// cleanUpTokenizationSpaces() of all the text, and are cut only between whole UTF-8 characters.
class CleanUpStream {
public:
  std::string push(std::string_view text);
  std::string finish(); // what is still held back, cleaned
  void reset() { pending_.clear(); }

private:
  std::string pending_; // the text since the last cut that no rewrite can cross
};

// Turns ids into text as they are generated: push() returns only text that is final, holding back a
// character whose bytes are still incomplete, so a terminal never shows a broken character. The pieces
// concatenated, plus finish(), equal decode() of all the ids (HF's DecodeStream, with a final flush).
class StreamDecoder {
public:
  explicit StreamDecoder(const Tokenizer &tokenizer, bool skipSpecialTokens = false);
  std::string push(int32_t id); // throws TokenizerError for an id outside the vocabulary
  std::string finish();         // whatever is still held back (incomplete bytes become U+FFFD)
  void reset();

private:
  Tokenizer tokenizer_;
  bool skipSpecialTokens_;
  std::vector<int32_t> ids_; // the ids since the start of the last emitted piece
  std::string prefix_;       // decode() of ids_[0, prefixIndex_)
  size_t prefixIndex_ = 0;
};

} // namespace gerbil::tokenizer
