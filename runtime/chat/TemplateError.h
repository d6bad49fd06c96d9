// The one error a chat template reports, for syntax and rendering alike: "NAME:LINE: what went wrong", NAME
// saying which file and which template (e.g. "tokenizer_config.json chat_template").
#pragma once

#include <stdexcept>
#include <string>

namespace gerbil::chat {

class ChatTemplateError : public std::runtime_error {
public:
  ChatTemplateError(const std::string &templateName, int line, const std::string &message)
      : std::runtime_error(templateName + ":" + std::to_string(line) + ": " + message), line_(line) {}
  // An error outside the template text (the file, the JSON around it): the message names the file itself.
  explicit ChatTemplateError(const std::string &message) : std::runtime_error(message), line_(0) {}
  int line() const { return line_; } // 0: not inside the template text

private:
  int line_;
};

} // namespace gerbil::chat
