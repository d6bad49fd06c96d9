// Runs a parsed template with Jinja2's semantics: a for loop's body and a macro are scopes (an if is not),
// `loop` variables, namespace(), macros, break / continue, and transformers' globals (raise_exception,
// strftime_now) next to Jinja's (range, namespace, dict).
#pragma once

#include "runtime/chat/Ast.h"

#include <string>

namespace gerbil::chat {

// `variables` is a dict of the names the template sees. Throws ChatTemplateError naming `templateName` and
// the line of the failing expression or statement.
std::string render(const Body &body, const Value &variables, const std::string &templateName);

} // namespace gerbil::chat
