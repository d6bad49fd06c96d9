// Splits a template into text and the tokens of its tags, applying whitespace control the way transformers
// configures Jinja2 for chat templates: trim_blocks (the newline after a block or comment tag goes),
// lstrip_blocks (indentation before a block or comment tag goes), and the explicit `-` / `+` markers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gerbil::chat {

enum class TokenType {
  Text,          // literal template text, already whitespace-controlled
  VariableBegin, // {{
  VariableEnd,   // }}
  BlockBegin,    // {%
  BlockEnd,      // %}
  Name,
  String, // text holds the decoded value
  Integer,
  Float,
  Operator, // text holds the operator: + - * / // % ** ~ == != < <= > >= = . , : | ( ) [ ] { }
  End,      // end of the template
};

struct Token {
  TokenType type;
  std::string text;
  int line;
  int64_t integer = 0;
  double number = 0;
};

// Throws ChatTemplateError naming `templateName` and the line for an unclosed tag, comment or string.
std::vector<Token> tokenize(std::string_view source, const std::string &templateName);

} // namespace gerbil::chat
