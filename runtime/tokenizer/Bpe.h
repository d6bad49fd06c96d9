// tokenizer.json "model" of type BPE: the vocabulary, the merge ranks, and HF's merge loop (lowest rank
// first, leftmost on ties), with byte fallback ("<0xAB>" tokens), unk_token/fuse_unk, ignore_merges and the
// continuing_subword_prefix / end_of_word_suffix of the model.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gerbil::tokenizer::detail {

class JsonRef;

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIdMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;
using VocabEntries = std::vector<std::pair<std::string, nlohmann::json>>;

class BpeModel {
public:
  // The vocabulary entries in `capturedVocab` (taken out of the document while parsing, see Tokenizer.cpp)
  // count as entries of model.vocab. Throws TokenizerError naming the key at fault.
  explicit BpeModel(const JsonRef &model, const VocabEntries *capturedVocab = nullptr);

  // Appends the ids of one pre-tokenized piece.
  void tokenize(std::string_view word, std::vector<int32_t> &ids) const;

  std::optional<int32_t> tokenId(std::string_view token) const;
  const std::string *token(int32_t id) const;
  size_t size() const { return vocab_.size(); }
  int32_t maxId() const { return maxId_; }

private:
  struct MergeRule {
    int32_t rank;
    int32_t merged;
  };
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    bool removed;
  };
  void readMerges(const JsonRef &merges);
  void addToken(const std::string &token, const nlohmann::json &id, const JsonRef &vocab);
  void addMerge(std::string_view left, std::string_view right, int32_t rank, const JsonRef &merges,
                size_t index);
  const MergeRule *findMerge(int32_t left, int32_t right) const;
  void initialSymbols(std::string_view word, std::vector<Symbol> &symbols) const;
  void mergeAll(std::vector<Symbol> &symbols) const;

  TokenIdMap vocab_;
  std::unordered_map<int32_t, const std::string *> tokens_; // points at vocab_'s keys, which never move
  std::unordered_map<uint64_t, MergeRule> merges_;
  int32_t maxId_ = -1;
  std::string file_; // for messages
  std::optional<std::string> unkToken_;
  std::optional<int32_t> unkId_;
  bool fuseUnk_ = false;
  bool byteFallback_ = false;
  bool ignoreMerges_ = false;
  std::string prefix_;      // continuing_subword_prefix
  std::string suffix_;      // end_of_word_suffix
  int32_t byteTokens_[256]; // the id of "<0xAB>" for each byte, -1 where the vocabulary lacks it
};

} // namespace gerbil::tokenizer::detail
