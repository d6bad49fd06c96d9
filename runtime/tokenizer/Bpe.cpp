#include "runtime/tokenizer/Bpe.h"

#include "runtime/tokenizer/Json.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "runtime/tokenizer/Unicode.h"

#include <cstdint>
#include <cstdio>
#include <queue>

namespace gerbil::tokenizer::detail {

namespace {

uint64_t pairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

std::optional<std::string> optionalString(const JsonRef &json, const char *key) {
  if (auto v = json.find(key)) return v->string();
  return std::nullopt;
}

} // namespace

BpeModel::BpeModel(const JsonRef &model, const VocabEntries *capturedVocab) : file_(model.file()) {
  model.requireObject();
  // HF's own gpt2 tokenizer.json has no "type"; the Rust core then recognizes a BPE model by its fields.
  std::string type = model.type(model.find("merges") ? std::optional<std::string>("BPE") : std::nullopt);
  if (type != "BPE") model.at("type").fail("'" + type + "' is not supported (only BPE models are)");

  if (auto dropout = model.find("dropout")) {
    double p = dropout->number();
    // Dropout only matters while training; encoding for inference is deterministic (HF treats 0 the same).
    if (!(p >= 0.0 && p <= 1.0)) dropout->fail("is not a probability");
  }
  fuseUnk_ = model.booleanOr("fuse_unk", false);
  byteFallback_ = model.booleanOr("byte_fallback", false);
  ignoreMerges_ = model.booleanOr("ignore_merges", false);
  prefix_ = optionalString(model, "continuing_subword_prefix").value_or("");
  suffix_ = optionalString(model, "end_of_word_suffix").value_or("");

  JsonRef vocab = model.at("vocab");
  vocab.requireObject();
  size_t entries = vocab.value().size() + (capturedVocab ? capturedVocab->size() : 0);
  vocab_.reserve(entries);
  tokens_.reserve(entries);
  // Entries the parser took out of the document (Tokenizer.cpp), then any left in it.
  if (capturedVocab)
    for (const auto &[token, id] : *capturedVocab) addToken(token, id, vocab);
  for (auto it = vocab.value().begin(); it != vocab.value().end(); ++it)
    addToken(it.key(), it.value(), vocab);

  if (auto unk = optionalString(model, "unk_token")) {
    unkToken_ = *unk;
    unkId_ = tokenId(*unk);
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    byteTokens_[b] = tokenId(name).value_or(-1);
  }
  readMerges(model.at("merges"));
}

void BpeModel::addToken(const std::string &token, const nlohmann::json &id, const JsonRef &vocab) {
  // Checked without building a JsonRef per entry: 150k of them would cost more than the rest of loading.
  if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX ||
      (id.is_number_unsigned() && id.get<uint64_t>() > uint64_t(INT32_MAX)))
    JsonRef(id, vocab.file(), vocab.path() + "[\"" + token + "\"]").tokenId(); // fails with the reason
  auto value = static_cast<int32_t>(id.get<int64_t>());
  // A key given twice keeps its last id, as in a JSON object; an id given twice keeps its first token.
  auto [slot, inserted] = vocab_.insert_or_assign(token, value);
  tokens_.emplace(value, &slot->first);
  maxId_ = std::max(maxId_, value);
}

void BpeModel::readMerges(const JsonRef &merges) {
  size_t count = merges.arraySize();
  merges_.reserve(count);
  int32_t rank = 0;
  for (size_t i = 0; i < count; ++i) {
    const nlohmann::json &item = merges.value()[i];
    if (item.is_string()) {
      const std::string &line = item.get_ref<const std::string &>();
      if (line.rfind("#version", 0) == 0) continue; // a merges.txt header that slipped into the JSON
      size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
        merges.item(i).fail("is not a pair (\"left right\", one space)");
      addMerge(std::string_view(line).substr(0, space), std::string_view(line).substr(space + 1), rank++,
               merges, i);
    } else if (item.is_array() && item.size() == 2 && item[0].is_string() && item[1].is_string()) {
      addMerge(item[0].get_ref<const std::string &>(), item[1].get_ref<const std::string &>(), rank++, merges,
               i);
    } else {
      merges.item(i).fail("is not a pair");
    }
  }
}

void BpeModel::addMerge(std::string_view left, std::string_view right, int32_t rank, const JsonRef &merges,
                        size_t index) {
  auto leftId = tokenId(left);
  if (!leftId) merges.item(index).fail("names '" + std::string(left) + "', which is not in model.vocab");
  auto rightId = tokenId(right);
  if (!rightId) merges.item(index).fail("names '" + std::string(right) + "', which is not in model.vocab");
  // The right part's continuing_subword_prefix disappears in the merged token ("a" + "##b" = "ab").
  if (right.size() < prefix_.size())
    merges.item(index).fail("has a right part shorter than continuing_subword_prefix");
  std::string merged;
  merged.reserve(left.size() + right.size());
  merged.append(left).append(right.substr(prefix_.size()));
  auto mergedId = tokenId(merged);
  if (!mergedId) merges.item(index).fail("makes '" + merged + "', which is not in model.vocab");
  // As in HF, a pair listed twice keeps its last rank.
  merges_[pairKey(*leftId, *rightId)] = MergeRule{rank, *mergedId};
}

std::optional<int32_t> BpeModel::tokenId(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string *BpeModel::token(int32_t id) const {
  auto it = tokens_.find(id);
  return it == tokens_.end() ? nullptr : it->second;
}

const BpeModel::MergeRule *BpeModel::findMerge(int32_t left, int32_t right) const {
  auto it = merges_.find(pairKey(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

// One symbol per character (HF's BPE::merge_word before merging).
void BpeModel::initialSymbols(std::string_view word, std::vector<Symbol> &symbols) const {
  auto add = [&symbols](int32_t id) {
    int32_t index = static_cast<int32_t>(symbols.size());
    if (!symbols.empty()) symbols.back().next = index;
    symbols.push_back({id, index - 1, -1, false});
  };
  int32_t pendingUnk = -1; // an unk not yet added (it may still grow over more unknown characters)
  std::string scratch;
  size_t pos = 0;
  while (pos < word.size()) {
    size_t start = pos;
    pos += utf8SequenceLength(static_cast<unsigned char>(word[pos]));
    if (pos > word.size()) pos = word.size();
    bool isFirst = start == 0, isLast = pos == word.size();
    std::string_view character = word.substr(start, pos - start);
    if ((!isFirst && !prefix_.empty()) || (isLast && !suffix_.empty())) {
      scratch.assign(isFirst ? "" : prefix_);
      scratch.append(character);
      if (isLast) scratch += suffix_;
      character = scratch;
    }
    if (auto id = tokenId(character)) {
      if (pendingUnk >= 0) add(pendingUnk);
      pendingUnk = -1;
      add(*id);
      continue;
    }
    if (byteFallback_) {
      bool all = true;
      for (char c : character) all = all && byteTokens_[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        // As in HF, a pending unk is not flushed here: it lands after these byte tokens.
        for (char c : character) add(byteTokens_[static_cast<unsigned char>(c)]);
        continue;
      }
    }
    if (unkToken_) {
      if (!unkId_)
        throw TokenizerError(file_ + ": model.unk_token '" + *unkToken_ + "' is not in model.vocab");
      if (pendingUnk >= 0 && fuseUnk_) continue; // one unk covers the whole run of unknown characters
      if (pendingUnk >= 0) add(pendingUnk);
      pendingUnk = *unkId_;
    }
    // Without an unk token an unknown character is dropped, as in HF.
  }
  if (pendingUnk >= 0) add(pendingUnk);
}

// HF's Word::merge_all: repeatedly merges the pair of lowest rank, the leftmost one on ties.
void BpeModel::mergeAll(std::vector<Symbol> &symbols) const {
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t merged;
  };
  auto later = [](const Candidate &a, const Candidate &b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(later)> queue(later);
  for (size_t i = 0; i + 1 < symbols.size(); ++i)
    if (const MergeRule *rule = findMerge(symbols[i].id, symbols[i + 1].id))
      queue.push({rule->rank, static_cast<int32_t>(i), rule->merged});

  while (!queue.empty()) {
    Candidate top = queue.top();
    queue.pop();
    Symbol &current = symbols[top.pos];
    if (current.removed || current.next < 0) continue;
    Symbol &right = symbols[current.next];
    // Entries go stale when a neighbour merged first.
    const MergeRule *rule = findMerge(current.id, right.id);
    if (!rule || rule->merged != top.merged) continue;
    current.id = top.merged;
    current.next = right.next;
    right.removed = true;
    if (current.next >= 0) symbols[current.next].prev = top.pos;
    if (current.prev >= 0)
      if (const MergeRule *r = findMerge(symbols[current.prev].id, current.id))
        queue.push({r->rank, current.prev, r->merged});
    if (current.next >= 0)
      if (const MergeRule *r = findMerge(current.id, symbols[current.next].id))
        queue.push({r->rank, top.pos, r->merged});
  }
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t> &ids) const {
  if (word.empty()) return;
  if (ignoreMerges_)
    if (auto id = tokenId(word)) {
      ids.push_back(*id);
      return;
    }
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  initialSymbols(word, symbols);
  mergeAll(symbols);
  for (const Symbol &s : symbols)
    if (!s.removed) ids.push_back(s.id);
}

} // namespace gerbil::tokenizer::detail
