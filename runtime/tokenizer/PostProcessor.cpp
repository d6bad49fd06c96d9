#include "runtime/tokenizer/PostProcessor.h"

#include "runtime/tokenizer/Json.h"

#include <map>

namespace gerbil::tokenizer::detail {

namespace {

// The single-sequence template: the ids of special tokens and, where "$A" stands, the encoding itself.
class TemplateProcessor : public PostProcessor {
public:
  struct Piece {
    bool isSequence = false;
    std::vector<int32_t> ids;
  };
  explicit TemplateProcessor(std::vector<Piece> pieces) : pieces_(std::move(pieces)) {}
  void process(std::vector<int32_t> &ids, bool addSpecialTokens) const override {
    if (!addSpecialTokens) return;
    std::vector<int32_t> out;
    for (const Piece &piece : pieces_) {
      if (piece.isSequence)
        out.insert(out.end(), ids.begin(), ids.end());
      else
        out.insert(out.end(), piece.ids.begin(), piece.ids.end());
    }
    ids = std::move(out);
  }

private:
  std::vector<Piece> pieces_;
};

class NoOpProcessor : public PostProcessor {
public:
  void process(std::vector<int32_t> &, bool) const override {}
};

class SequenceProcessor : public PostProcessor {
public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> steps) : steps_(std::move(steps)) {}
  void process(std::vector<int32_t> &ids, bool addSpecialTokens) const override {
    for (const auto &step : steps_) step->process(ids, addSpecialTokens);
  }

private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

std::unique_ptr<PostProcessor> makeTemplate(const JsonRef &json) {
  std::map<std::string, std::vector<int32_t>> specialIds;
  if (auto specials = json.find("special_tokens")) {
    specials->requireObject();
    for (auto it = specials->value().begin(); it != specials->value().end(); ++it) {
      JsonRef entry = specials->at(it.key().c_str());
      JsonRef ids = entry.at("ids");
      std::vector<int32_t> list;
      for (size_t i = 0; i < ids.arraySize(); ++i) list.push_back(ids.item(i).tokenId());
      if (auto tokens = entry.find("tokens"); tokens && tokens->arraySize() != list.size())
        entry.fail("has " + std::to_string(tokens->arraySize()) + " tokens but " +
                   std::to_string(list.size()) + " ids");
      specialIds[entry.stringOr("id", it.key())] = std::move(list);
    }
  }
  JsonRef single = json.at("single");
  auto specialPiece = [&](const std::string &name, const JsonRef &where) {
    auto found = specialIds.find(name);
    if (found == specialIds.end()) where.fail("names '" + name + "', which is not in special_tokens");
    return TemplateProcessor::Piece{false, found->second};
  };
  std::vector<TemplateProcessor::Piece> pieces;
  for (size_t i = 0; i < single.arraySize(); ++i) {
    JsonRef item = single.item(i);
    if (item.isString()) { // the "$A" / "[CLS]:0" shorthand
      std::string text = item.string();
      std::string name = text.substr(0, text.find(':'));
      if (name == "$A" || name == "$" || name == "$0")
        pieces.push_back({true, {}});
      else if (!name.empty() && name[0] == '$')
        item.fail("uses sequence '" + name + "' in a single template");
      else
        pieces.push_back(specialPiece(name, item));
    } else if (auto sequence = item.find("Sequence")) {
      std::string id = sequence->stringOr("id", "A");
      if (id != "A") sequence->fail("uses sequence '" + id + "' in a single template");
      pieces.push_back({true, {}});
    } else if (auto special = item.find("SpecialToken")) {
      pieces.push_back(specialPiece(special->at("id").string(), *special));
    } else {
      item.fail("is neither a Sequence nor a SpecialToken");
    }
  }
  return std::make_unique<TemplateProcessor>(std::move(pieces));
}

// RobertaProcessing and BertProcessing: [cls] A [sep], each given as ["token", id].
std::unique_ptr<PostProcessor> makeClsSep(const JsonRef &json) {
  auto idOf = [&](const char *key) {
    JsonRef pair = json.at(key);
    if (pair.arraySize() != 2) pair.fail("is not a [token, id] pair");
    pair.item(0).string();
    return pair.item(1).tokenId();
  };
  int32_t cls = idOf("cls"), sep = idOf("sep");
  std::vector<TemplateProcessor::Piece> pieces{{false, {cls}}, {true, {}}, {false, {sep}}};
  return std::make_unique<TemplateProcessor>(std::move(pieces));
}

} // namespace

std::unique_ptr<PostProcessor> makePostProcessor(const JsonRef &json) {
  if (json.isNull()) return nullptr;
  std::string type = json.type();
  if (type == "TemplateProcessing") return makeTemplate(json);
  // ByteLevel only trims offsets, which ids do not have.
  if (type == "ByteLevel") return std::make_unique<NoOpProcessor>();
  if (type == "RobertaProcessing" || type == "BertProcessing") return makeClsSep(json);
  if (type == "Sequence") {
    JsonRef list = json.at("processors");
    std::vector<std::unique_ptr<PostProcessor>> steps;
    for (size_t i = 0; i < list.arraySize(); ++i) {
      JsonRef item = list.item(i);
      if (item.isNull()) item.fail("is null");
      steps.push_back(makePostProcessor(item));
    }
    return std::make_unique<SequenceProcessor>(std::move(steps));
  }
  json.at("type").fail("'" + type + "' is not a supported post-processor");
}

} // namespace gerbil::tokenizer::detail
