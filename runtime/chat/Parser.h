// Tokens → syntax tree, following Jinja2's grammar and operator precedence (jinja2/parser.py).
#pragma once

#include "runtime/chat/Ast.h"
#include "runtime/chat/Lexer.h"

#include <string>
#include <vector>

namespace gerbil::chat {

// Throws ChatTemplateError naming `templateName` and the line: syntax errors, unknown tags, filters and
// tests.
Body parseTemplate(const std::vector<Token> &tokens, const std::string &templateName);

} // namespace gerbil::chat
