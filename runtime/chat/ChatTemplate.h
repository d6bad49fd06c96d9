// HuggingFace chat templates: the Jinja2 program in tokenizer_config.json's "chat_template" that turns a
// conversation into the model's prompt text. Rendering follows transformers' apply_chat_template(...,
// tokenize=False): the same Jinja2 whitespace settings (trim_blocks, lstrip_blocks), the same globals
// (raise_exception, strftime_now) and variables (messages, add_generation_prompt, tools, the special tokens).
// Every error is a ChatTemplateError that names the template and the line.
#pragma once

#include "runtime/chat/TemplateError.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace gerbil::chat {

struct ChatMessage {
  std::string role; // system | user | assistant | tool
  std::string content;
};

struct ChatOptions {
  bool addGenerationPrompt = true; // end with the header of an assistant turn
  // More variables for the template, e.g. {"enable_thinking": false} or {"tools": [...]}; they win over the
  // defaults (tools = none, the special tokens of the tokenizer config).
  nlohmann::ordered_json extraVariables = nlohmann::ordered_json::object();
};

struct Stmt; // runtime/chat/Ast.h

class ChatTemplate {
public:
  // Parses `source` now: syntax errors, unknown tags, filters and tests throw here. `name` is what errors
  // call the template.
  ChatTemplate(const std::string &source, std::string name);

  // The template of a model folder's tokenizer_config.json: "chat_template" as a string, or a list of
  // {"name", "template"} from which `which` is taken ("default" when empty). Without one, a
  // chat_template.jinja beside the file is used (newer transformers saves it there). The config's special
  // tokens (bos_token, eos_token, ...) become variables of apply(). Throws ChatTemplateError naming the file.
  static ChatTemplate fromTokenizerConfig(const std::string &path, const std::string &which = "");
  // The same from the text of the file; `fileName` is what errors call it.
  static ChatTemplate fromTokenizerConfigJson(const std::string &text, const std::string &fileName,
                                              const std::string &which = "");

  // Renders with exactly these variables (a JSON object).
  std::string render(const nlohmann::ordered_json &variables) const;
  // What apply_chat_template(messages, tokenize=False, add_generation_prompt=...) returns.
  std::string apply(const std::vector<ChatMessage> &messages, const ChatOptions &options = {}) const;

  const std::string &name() const { return name_; }
  // Whether `identifier` appears in the template as a name (a variable, attribute, filter, ...): a variable
  // it never mentions cannot change what it renders.
  bool mentions(const std::string &identifier) const { return names_->count(identifier) > 0; }
  // Special tokens of the tokenizer config ("bos_token" → "<s>"); empty for a template made from a string.
  const nlohmann::ordered_json &specialTokens() const { return specialTokens_; }

private:
  std::string name_;
  std::shared_ptr<const std::vector<std::unique_ptr<Stmt>>> body_; // the parsed template, shared by copies
  std::shared_ptr<const std::set<std::string>> names_;             // every Name token of the source
  nlohmann::ordered_json specialTokens_ = nlohmann::ordered_json::object();
};

} // namespace gerbil::chat
