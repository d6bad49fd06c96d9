#include "runtime/tokenizer/AddedTokens.h"

#include "runtime/tokenizer/Json.h"
#include "runtime/tokenizer/Normalizer.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "runtime/tokenizer/Unicode.h"

#include <algorithm>
#include <limits>

namespace gerbil::tokenizer::detail {

void AddedVocabulary::Trie::insert(std::string_view pattern, int32_t id) {
  int32_t node = 0;
  for (char ch : pattern) {
    auto byte = static_cast<unsigned char>(ch);
    auto &children = nodes_[node].children;
    auto it = std::lower_bound(
        children.begin(), children.end(), byte,
        [](const std::pair<unsigned char, int32_t> &c, unsigned char b) { return c.first < b; });
    if (it != children.end() && it->first == byte) {
      node = it->second;
      continue;
    }
    int32_t child = static_cast<int32_t>(nodes_.size());
    children.insert(it, {byte, child});
    nodes_.emplace_back();
    node = child;
  }
  if (nodes_[node].id < 0) nodes_[node].id = id; // of two equal patterns the first one wins
}

std::pair<size_t, int32_t> AddedVocabulary::Trie::longestAt(std::string_view text, size_t pos) const {
  std::pair<size_t, int32_t> best{0, -1};
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    auto byte = static_cast<unsigned char>(text[i]);
    const auto &children = nodes_[node].children;
    auto it = std::lower_bound(
        children.begin(), children.end(), byte,
        [](const std::pair<unsigned char, int32_t> &c, unsigned char b) { return c.first < b; });
    if (it == children.end() || it->first != byte) break;
    node = it->second;
    if (nodes_[node].id >= 0) best = {i - pos + 1, nodes_[node].id};
  }
  return best;
}

AddedVocabulary::AddedVocabulary(const JsonRef &list, const BpeModel &model, const Normalizer *normalizer) {
  std::vector<AddedToken> parsed;
  if (!list.isNull()) {
    for (size_t i = 0; i < list.arraySize(); ++i) {
      JsonRef item = list.item(i);
      item.requireObject();
      AddedToken token;
      token.content = item.at("content").string();
      item.at("id").tokenId(); // checked, but HF's own numbering decides (see the header)
      token.special = item.booleanOr("special", false);
      token.singleWord = item.booleanOr("single_word", false);
      token.lstrip = item.booleanOr("lstrip", false);
      token.rstrip = item.booleanOr("rstrip", false);
      token.normalized = item.booleanOr("normalized", !token.special);
      parsed.push_back(std::move(token));
    }
  }
  // HF's AddedVocabulary::add_tokens: special contents first, then every token in order.
  for (const AddedToken &token : parsed)
    if (token.special && !token.content.empty() && special_.insert(token.content).second)
      specialOrder_.push_back(token);
  for (const AddedToken &token : parsed) add(token, model);

  for (const auto *order : {&specialOrder_, &otherOrder_}) {
    for (const AddedToken &token : *order) {
      int32_t id = ids_.find(token.content)->second;
      if (!token.normalized) {
        raw_.insert(token.content, id);
        continue;
      }
      // Normalized tokens are looked for in normalized text, so their pattern is normalized as well.
      std::string pattern = token.content;
      if (normalizer) normalizer->normalize(pattern);
      if (!pattern.empty()) normalized_.insert(pattern, id);
    }
  }
}

void AddedVocabulary::add(const AddedToken &token, const BpeModel &model) {
  if (token.content.empty()) return;
  auto known = ids_.find(token.content);
  if (known != ids_.end() && tokens_[known->second] == token) return;
  int32_t id = 0;
  if (known != ids_.end()) {
    id = known->second;
  } else if (auto modelId = model.tokenId(token.content)) {
    id = *modelId;
  } else {
    // HF numbers new tokens from the model's vocabulary *size* (its entry count), or after the largest added
    // id.
    auto vocabSize = static_cast<int64_t>(model.size());
    int64_t next = vocabSize;
    if (!ids_.empty()) {
      int64_t maxAdded = 0;
      for (const auto &entry : ids_) maxAdded = std::max<int64_t>(maxAdded, entry.second);
      if (maxAdded >= vocabSize || vocabSize == 0) next = maxAdded + 1;
    }
    if (next > std::numeric_limits<int32_t>::max()) throw TokenizerError("added_tokens: too many tokens");
    id = static_cast<int32_t>(next);
  }
  ids_[token.content] = id;
  tokens_[id] = token;
  maxId_ = std::max(maxId_, id);
  if (!special_.count(token.content)) otherOrder_.push_back(token);
}

std::optional<int32_t> AddedVocabulary::tokenId(std::string_view content) const {
  auto it = ids_.find(content);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

const AddedToken *AddedVocabulary::token(int32_t id) const {
  auto it = tokens_.find(id);
  return it == tokens_.end() ? nullptr : &it->second;
}

std::vector<AddedVocabulary::Segment> AddedVocabulary::split(std::string_view text, bool normalizedTokens,
                                                             bool parseSpecial) const {
  std::vector<Segment> out;
  if (text.empty()) return out;
  const Trie &trie = normalizedTokens ? normalized_ : raw_;
  size_t cursor = 0; // end of what the segments cover so far
  size_t pos = 0;    // where the search goes on: past every match, used or not (as aho-corasick's find_iter)
  while (!trie.empty() && pos < text.size()) {
    auto [length, id] = trie.longestAt(text, pos);
    if (length == 0) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + length;
    pos = stop;
    const AddedToken &token = tokens_.at(id);
    if (!parseSpecial && special_.count(token.content)) continue;
    if (token.singleWord) {
      size_t after = stop;
      bool startsWord = start == 0 || !isWordCharacter(decodeUtf8Before(text, start));
      bool endsWord = stop == text.size() || !isWordCharacter(decodeUtf8(text, after));
      if (!startsWord || !endsWord) continue;
    }
    if (token.lstrip) {
      size_t begin = start;
      while (begin > 0) {
        size_t previous = 0;
        if (!isWhiteSpace(decodeUtf8Before(text, begin, &previous))) break;
        begin = previous;
      }
      start = std::max(begin, cursor); // whitespace an earlier token took stays with it
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        size_t next = stop;
        if (!isWhiteSpace(decodeUtf8(text, next))) break;
        stop = next;
      }
    }
    if (cursor < start) out.push_back({cursor, start, -1});
    out.push_back({start, stop, id});
    cursor = std::max(cursor, stop);
  }
  if (cursor < text.size()) out.push_back({cursor, text.size(), -1});
  return out;
}

} // namespace gerbil::tokenizer::detail
