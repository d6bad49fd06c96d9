// tokenizer.json "added_tokens": special tokens (<|im_start|>, <s>) and other added tokens (Qwen's <think>),
// found in the text before the model runs, with HF's rules: leftmost-longest matching, single_word, lstrip,
// rstrip, tokens with normalized=false matched on the raw text and the others on the normalized text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "runtime/tokenizer/Bpe.h"

namespace gerbil::tokenizer::detail {

class JsonRef;
class Normalizer;

struct AddedToken {
  std::string content;
  bool singleWord = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
  bool operator==(const AddedToken &) const = default;
};

class AddedVocabulary {
public:
  // `addedTokens` may be null. Ids are HF's: the model's id when the model has the content, else the next
  // free one (the JSON ids only agree with that in well-formed files, and HF ignores them as well).
  AddedVocabulary(const JsonRef &addedTokens, const BpeModel &model, const Normalizer *normalizer);

  struct Segment {
    size_t start = 0;
    size_t end = 0;
    int32_t id = -1; // -1: plain text
  };
  // Cuts `text` into added tokens and the text between them (HF's AddedVocabulary::find_matches), using the
  // tokens matched on raw text or those matched on normalized text. With parseSpecial false, special tokens
  // are not recognized (transformers' split_special_tokens=True).
  std::vector<Segment> split(std::string_view text, bool normalizedTokens, bool parseSpecial) const;

  std::optional<int32_t> tokenId(std::string_view content) const;
  const AddedToken *token(int32_t id) const;
  bool isSpecial(std::string_view content) const { return special_.count(std::string(content)) != 0; }
  int32_t maxId() const { return maxId_; }

private:
  // Byte trie of the patterns; longestAt gives the longest one starting at a position.
  class Trie {
  public:
    void insert(std::string_view pattern, int32_t id);
    bool empty() const { return nodes_.size() <= 1; }
    // (length, id) of the longest pattern starting at text[pos], or length 0.
    std::pair<size_t, int32_t> longestAt(std::string_view text, size_t pos) const;

  private:
    struct Node {
      std::vector<std::pair<unsigned char, int32_t>> children; // sorted by byte
      int32_t id = -1;
    };
    std::vector<Node> nodes_{Node{}};
  };

  void add(const AddedToken &token, const BpeModel &model);

  TokenIdMap ids_;                                 // content -> id
  std::unordered_map<int32_t, AddedToken> tokens_; // id -> token
  std::unordered_set<std::string> special_;        // contents of special tokens
  std::vector<AddedToken> specialOrder_, otherOrder_;
  Trie raw_, normalized_;
  int32_t maxId_ = -1;
};

} // namespace gerbil::tokenizer::detail
