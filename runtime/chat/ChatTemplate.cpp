#include "runtime/chat/ChatTemplate.h"

#include "runtime/chat/Interpreter.h"
#include "runtime/chat/Parser.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace gerbil::chat {
namespace {

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ChatTemplateError(path + ": cannot open the file");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// transformers' special_tokens_map: the tokens that are set, as strings (an AddedToken dict gives its
// content).
nlohmann::ordered_json specialTokensOf(const nlohmann::ordered_json &config) {
  nlohmann::ordered_json tokens = nlohmann::ordered_json::object();
  for (const char *key :
       {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    auto it = config.find(key);
    if (it == config.end()) continue;
    if (it->is_string())
      tokens[key] = *it;
    else if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
      tokens[key] = (*it)["content"];
  }
  if (auto it = config.find("additional_special_tokens"); it != config.end() && it->is_array())
    tokens["additional_special_tokens"] = *it;
  return tokens;
}

} // namespace

ChatTemplate::ChatTemplate(const std::string &source, std::string name) : name_(std::move(name)) {
  std::vector<Token> tokens = tokenize(source, name_);
  std::set<std::string> names;
  for (const Token &token : tokens)
    if (token.type == TokenType::Name) names.insert(token.text);
  names_ = std::make_shared<const std::set<std::string>>(std::move(names));
  body_ = std::make_shared<const Body>(parseTemplate(tokens, name_));
}

ChatTemplate ChatTemplate::fromTokenizerConfig(const std::string &path, const std::string &which) {
  std::string text = readFile(path);
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(text, nullptr, false);
  // transformers ≥ 4.43 may save the template beside the config instead of inside it.
  if (!config.is_discarded() && config.is_object() &&
      (!config.contains("chat_template") || config["chat_template"].is_null())) {
    std::filesystem::path jinja = std::filesystem::path(path).parent_path() / "chat_template.jinja";
    if (std::filesystem::exists(jinja)) {
      ChatTemplate result(readFile(jinja.string()), jinja.string());
      result.specialTokens_ = specialTokensOf(config);
      return result;
    }
  }
  return fromTokenizerConfigJson(text, path, which);
}

ChatTemplate ChatTemplate::fromTokenizerConfigJson(const std::string &text, const std::string &fileName,
                                                   const std::string &which) {
  nlohmann::ordered_json config;
  try {
    config = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception &e) {
    throw ChatTemplateError(fileName + ": not valid JSON: " + e.what());
  }
  if (!config.is_object()) throw ChatTemplateError(fileName + ": expected a JSON object");
  auto found = config.find("chat_template");
  if (found == config.end() || found->is_null())
    throw ChatTemplateError(fileName + ": there is no \"chat_template\" (this tokenizer has no chat format)");
  std::string source, name = fileName + " chat_template";
  if (found->is_string()) {
    if (!which.empty() && which != "default")
      throw ChatTemplateError(fileName + ": \"chat_template\" is a single template, there is no '" + which +
                              "'");
    source = found->get<std::string>();
  } else if (found->is_array()) {
    std::string wanted = which.empty() ? "default" : which, names;
    bool matched = false;
    for (size_t i = 0; i < found->size(); ++i) {
      const auto &entry = (*found)[i];
      std::string where = fileName + ": \"chat_template\"[" + std::to_string(i) + "]";
      if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
          !entry.contains("template") || !entry["template"].is_string())
        throw ChatTemplateError(where + " must be an object with a string \"name\" and \"template\"");
      std::string entryName = entry["name"].get<std::string>();
      names += (names.empty() ? "" : ", ") + entryName;
      if (entryName == wanted && !matched) {
        source = entry["template"].get<std::string>();
        name = fileName + " chat_template '" + entryName + "'";
        matched = true;
      }
    }
    if (!matched)
      throw ChatTemplateError(fileName + ": \"chat_template\" has no template named '" + wanted +
                              "' (it has: " + names + ")");
  } else {
    throw ChatTemplateError(fileName + ": \"chat_template\" must be a string or a list of {name, template}");
  }
  ChatTemplate result(source, name);
  result.specialTokens_ = specialTokensOf(config);
  return result;
}

std::string ChatTemplate::render(const nlohmann::ordered_json &variables) const {
  if (!variables.is_object()) throw ChatTemplateError(name_ + ": the variables must be a JSON object");
  Value context;
  try {
    context = Value::fromJson(variables);
  } catch (const EvalError &e) {
    throw ChatTemplateError(name_ + ": " + e.what());
  }
  return chat::render(*body_, context, name_);
}

std::string ChatTemplate::apply(const std::vector<ChatMessage> &messages, const ChatOptions &options) const {
  nlohmann::ordered_json variables = nlohmann::ordered_json::object();
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const ChatMessage &message : messages)
    list.push_back({{"role", message.role}, {"content", message.content}});
  variables["messages"] = std::move(list);
  variables["tools"] = nullptr;
  variables["documents"] = nullptr;
  variables["add_generation_prompt"] = options.addGenerationPrompt;
  for (const auto &[key, value] : specialTokens_.items()) variables[key] = value;
  if (options.extraVariables.is_object())
    for (const auto &[key, value] : options.extraVariables.items()) variables[key] = value;
  return render(variables);
}

} // namespace gerbil::chat
