#include "runtime/chat/Parser.h"

#include "runtime/chat/Builtins.h"
#include "runtime/chat/TemplateError.h"

#include <algorithm>

namespace gerbil::chat {
namespace {

std::string describe(const Token &token) {
  switch (token.type) {
  case TokenType::Text:
    return "text";
  case TokenType::VariableBegin:
    return "'{{'";
  case TokenType::VariableEnd:
    return "'}}'";
  case TokenType::BlockBegin:
    return "'{%'";
  case TokenType::BlockEnd:
    return "'%}'";
  case TokenType::String:
    return "string literal";
  case TokenType::End:
    return "end of template";
  default:
    return "'" + token.text + "'";
  }
}

// Deeper nesting than any real template, and shallow enough that the recursive descent cannot overflow the
// stack on a hostile one.
constexpr int kMaxNesting = 200;

class Parser {
public:
  Parser(const std::vector<Token> &tokens, const std::string &name) : tokens_(tokens), name_(name) {}

  Body parseTemplate() {
    std::string end;
    Body body = parseBody({}, end);
    return body;
  }

private:
  // ---- the token stream ----
  const Token &current() const { return tokens_[pos_]; }
  const Token &peek(size_t ahead = 1) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  const Token &advance() {
    const Token &token = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return token;
  }
  bool isOperator(const char *op) const {
    return current().type == TokenType::Operator && current().text == op;
  }
  bool isName(const char *name) const { return current().type == TokenType::Name && current().text == name; }
  bool acceptOperator(const char *op) {
    if (!isOperator(op)) return false;
    advance();
    return true;
  }
  bool acceptName(const char *name) {
    if (!isName(name)) return false;
    advance();
    return true;
  }
  [[noreturn]] void fail(const std::string &message) const {
    throw ChatTemplateError(name_, current().line, message);
  }
  [[noreturn]] void unexpected(const std::string &expected) const {
    fail("expected " + expected + ", found " + describe(current()));
  }
  void expectOperator(const char *op) {
    if (!acceptOperator(op)) unexpected(std::string("'") + op + "'");
  }
  std::string expectName(const char *what) {
    if (current().type != TokenType::Name) unexpected(what);
    return advance().text;
  }
  void expectBlockEnd() {
    if (current().type != TokenType::BlockEnd) unexpected("'%}'");
    advance();
  }

  // ---- statements ----

  // Parses until a block tag named in `endTags`; leaves the stream just after that name and sets `found`.
  Body parseBody(const std::vector<std::string> &endTags, std::string &found) {
    Body body;
    for (;;) {
      const Token &token = current();
      switch (token.type) {
      case TokenType::Text:
        body.push_back(std::make_unique<TextStmt>(token.line, token.text));
        advance();
        break;
      case TokenType::VariableBegin: {
        advance();
        ExprPtr expr = parseTuple(true);
        if (current().type != TokenType::VariableEnd) unexpected("'}}'");
        advance();
        body.push_back(std::make_unique<OutputStmt>(token.line, std::move(expr)));
        break;
      }
      case TokenType::BlockBegin: {
        advance();
        if (current().type != TokenType::Name) unexpected("a tag name");
        const std::string &tag = current().text;
        if (std::find(endTags.begin(), endTags.end(), tag) != endTags.end()) {
          found = tag;
          advance();
          return body;
        }
        body.push_back(parseStatement());
        break;
      }
      case TokenType::End:
        if (!endTags.empty()) fail("unexpected end of template: missing '{% " + endTags.back() + " %}'");
        return body;
      default:
        unexpected("text or a tag");
      }
    }
  }

  // Counts the nesting of statements and expressions while it lives.
  struct NestingGuard {
    NestingGuard(Parser &parser) : parser(parser) {
      if (++parser.nesting_ > kMaxNesting)
        parser.fail("the template nests deeper than " + std::to_string(kMaxNesting) + " levels");
    }
    ~NestingGuard() { --parser.nesting_; }
    Parser &parser;
  };

  StmtPtr parseStatement() {
    NestingGuard guard(*this);
    int line = current().line;
    std::string tag = advance().text;
    if (tag == "if") return parseIf(line);
    if (tag == "for") return parseFor(line);
    if (tag == "set") return parseSet(line);
    if (tag == "macro") return parseMacro(line);
    if (tag == "filter") return parseFilterBlock(line);
    if (tag == "break" || tag == "continue") {
      if (loopDepth_ == 0) throw ChatTemplateError(name_, line, "'" + tag + "' outside of a loop");
      expectBlockEnd();
      return std::make_unique<LoopControlStmt>(tag == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue,
                                               line);
    }
    if (tag == "generation") { // transformers' AssistantTracker: marks assistant text, renders its body
      expectBlockEnd();
      auto group = std::make_unique<GroupStmt>(line);
      std::string end;
      group->body = parseBody({"endgeneration"}, end);
      expectBlockEnd();
      return group;
    }
    if (tag.rfind("end", 0) == 0 || tag == "elif" || tag == "else")
      throw ChatTemplateError(name_, line, "unexpected '{% " + tag + " %}'");
    throw ChatTemplateError(name_, line, "unknown tag '" + tag + "'");
  }

  StmtPtr parseIf(int line) {
    auto stmt = std::make_unique<IfStmt>(line);
    std::string end = "elif";
    while (end == "elif") {
      ExprPtr condition = parseTuple(false);
      expectBlockEnd();
      Body body = parseBody({"elif", "else", "endif"}, end);
      stmt->branches.emplace_back(std::move(condition), std::move(body));
    }
    if (end == "else") {
      expectBlockEnd();
      stmt->otherwise = parseBody({"endif"}, end);
    }
    expectBlockEnd();
    return stmt;
  }

  std::vector<std::string> parseTargets() {
    std::vector<std::string> targets;
    bool parenthesised = acceptOperator("(");
    do {
      targets.push_back(expectName("a variable name"));
    } while (acceptOperator(","));
    if (parenthesised) expectOperator(")");
    return targets;
  }

  StmtPtr parseFor(int line) {
    auto stmt = std::make_unique<ForStmt>(line);
    stmt->targets = parseTargets();
    if (!acceptName("in")) unexpected("'in'");
    stmt->iterable = parseTuple(false);
    if (acceptName("if")) stmt->filter = parseExpression(true);
    if (isName("recursive")) fail("recursive loops are not supported");
    expectBlockEnd();
    ++loopDepth_;
    std::string end;
    stmt->body = parseBody({"else", "endfor"}, end);
    --loopDepth_;
    if (end == "else") {
      expectBlockEnd();
      stmt->otherwise = parseBody({"endfor"}, end);
    }
    expectBlockEnd();
    return stmt;
  }

  StmtPtr parseSet(int line) {
    auto stmt = std::make_unique<SetStmt>(line);
    stmt->targets.push_back(expectName("a variable name"));
    if (acceptOperator(".")) {
      stmt->attribute = expectName("an attribute name");
    } else {
      while (acceptOperator(",")) stmt->targets.push_back(expectName("a variable name"));
    }
    if (acceptOperator("=")) {
      stmt->value = parseTuple(true);
      expectBlockEnd();
      return stmt;
    }
    if (stmt->targets.size() > 1 || !stmt->attribute.empty()) unexpected("'='");
    expectBlockEnd();
    std::string end;
    stmt->body = parseBody({"endset"}, end);
    expectBlockEnd();
    return stmt;
  }

  StmtPtr parseMacro(int line) {
    auto stmt = std::make_unique<MacroStmt>(line);
    stmt->name = expectName("a macro name");
    expectOperator("(");
    while (!isOperator(")")) {
      std::string parameter = expectName("a parameter name");
      ExprPtr fallback;
      if (acceptOperator("=")) fallback = parseExpression(true);
      stmt->parameters.emplace_back(std::move(parameter), std::move(fallback));
      if (!acceptOperator(",")) break;
    }
    expectOperator(")");
    expectBlockEnd();
    int savedLoopDepth = loopDepth_;
    loopDepth_ = 0;
    std::string end;
    stmt->body = parseBody({"endmacro"}, end);
    loopDepth_ = savedLoopDepth;
    if (current().type == TokenType::Name) advance(); // {% endmacro name %}
    expectBlockEnd();
    return stmt;
  }

  StmtPtr parseFilterBlock(int line) {
    std::string name = expectName("a filter name");
    if (!isKnownFilter(name)) throw ChatTemplateError(name_, line, "no filter named '" + name + "'");
    auto stmt = std::make_unique<FilterBlockStmt>(line, name);
    if (isOperator("(")) stmt->arguments = parseCallArguments();
    expectBlockEnd();
    std::string end;
    stmt->body = parseBody({"endfilter"}, end);
    expectBlockEnd();
    return stmt;
  }

  // ---- expressions, loosest binding first ----

  // `a, b` is a tuple where a statement or {{ }} takes one expression.
  ExprPtr parseTuple(bool withConditional) {
    int line = current().line;
    ExprPtr first = parseExpression(withConditional);
    if (!isOperator(",")) return first;
    auto tuple = std::make_unique<ListExpr>(line, true);
    tuple->items.push_back(std::move(first));
    while (acceptOperator(",")) {
      if (current().type == TokenType::BlockEnd || current().type == TokenType::VariableEnd ||
          isOperator(")"))
        break;
      tuple->items.push_back(parseExpression(withConditional));
    }
    return tuple;
  }

  ExprPtr parseExpression(bool withConditional) { return withConditional ? parseConditional() : parseOr(); }

  ExprPtr parseConditional() {
    ExprPtr then = parseOr();
    while (isName("if")) {
      int line = advance().line;
      ExprPtr condition = parseOr();
      ExprPtr otherwise = acceptName("else") ? parseConditional() : nullptr;
      then = std::make_unique<ConditionalExpr>(line, std::move(condition), std::move(then),
                                               std::move(otherwise));
    }
    return then;
  }

  ExprPtr parseOr() {
    ExprPtr left = parseAnd();
    while (isName("or")) {
      int line = advance().line;
      left = std::make_unique<BinaryExpr>(line, "or", std::move(left), parseAnd());
    }
    return left;
  }

  ExprPtr parseAnd() {
    ExprPtr left = parseNot();
    while (isName("and")) {
      int line = advance().line;
      left = std::make_unique<BinaryExpr>(line, "and", std::move(left), parseNot());
    }
    return left;
  }

  ExprPtr parseNot() {
    NestingGuard guard(*this); // `not not not ...` recurses without parseExpression
    if (isName("not")) {
      int line = advance().line;
      return std::make_unique<UnaryExpr>(line, "not", parseNot());
    }
    return parseCompare();
  }

  ExprPtr parseCompare() {
    int line = current().line;
    ExprPtr first = parseMath1();
    std::unique_ptr<CompareExpr> compare;
    for (;;) {
      std::string op;
      if (current().type == TokenType::Operator &&
          (current().text == "==" || current().text == "!=" || current().text == "<" ||
           current().text == "<=" || current().text == ">" || current().text == ">=")) {
        op = advance().text;
      } else if (isName("in")) {
        advance();
        op = "in";
      } else if (isName("not") && peek().type == TokenType::Name && peek().text == "in") {
        advance();
        advance();
        op = "not in";
      } else {
        break;
      }
      if (!compare) compare = std::make_unique<CompareExpr>(line, std::move(first));
      compare->rest.emplace_back(op, parseMath1());
    }
    if (compare) return compare;
    return first;
  }

  ExprPtr parseMath1() {
    ExprPtr left = parseConcat();
    while (isOperator("+") || isOperator("-")) {
      const Token &op = advance();
      left = std::make_unique<BinaryExpr>(op.line, op.text, std::move(left), parseConcat());
    }
    return left;
  }

  ExprPtr parseConcat() {
    ExprPtr left = parseMath2();
    while (isOperator("~")) {
      int line = advance().line;
      left = std::make_unique<BinaryExpr>(line, "~", std::move(left), parseMath2());
    }
    return left;
  }

  ExprPtr parseMath2() {
    ExprPtr left = parsePow();
    while (isOperator("*") || isOperator("/") || isOperator("//") || isOperator("%")) {
      const Token &op = advance();
      left = std::make_unique<BinaryExpr>(op.line, op.text, std::move(left), parsePow());
    }
    return left;
  }

  ExprPtr parsePow() {
    ExprPtr left = parseUnary(true);
    while (isOperator("**")) {
      int line = advance().line;
      left = std::make_unique<BinaryExpr>(line, "**", std::move(left), parseUnary(true));
    }
    return left;
  }

  // As in Jinja, `-x | f` is `(-x) | f` and filters bind tighter than every binary operator.
  ExprPtr parseUnary(bool withFilters) {
    NestingGuard guard(*this); // `- - - x` recurses without parseExpression
    ExprPtr node;
    if (isOperator("-") || isOperator("+")) {
      const Token &op = advance();
      node = std::make_unique<UnaryExpr>(op.line, op.text, parseUnary(false));
    } else {
      node = parsePrimary();
    }
    node = parsePostfix(std::move(node));
    if (withFilters) node = parseFiltersAndTests(std::move(node));
    return node;
  }

  ExprPtr parsePrimary() {
    const Token &token = current();
    switch (token.type) {
    case TokenType::Name: {
      advance();
      if (token.text == "true" || token.text == "True")
        return std::make_unique<LiteralExpr>(token.line, Value(true));
      if (token.text == "false" || token.text == "False")
        return std::make_unique<LiteralExpr>(token.line, Value(false));
      if (token.text == "none" || token.text == "None")
        return std::make_unique<LiteralExpr>(token.line, Value::none());
      return std::make_unique<NameExpr>(token.line, token.text);
    }
    case TokenType::String: {
      std::string text;
      while (current().type == TokenType::String) text += advance().text; // 'a' 'b' is 'ab'
      return std::make_unique<LiteralExpr>(token.line, Value(std::move(text)));
    }
    case TokenType::Integer:
      advance();
      return std::make_unique<LiteralExpr>(token.line, Value(token.integer));
    case TokenType::Float:
      advance();
      return std::make_unique<LiteralExpr>(token.line, Value(token.number));
    case TokenType::Operator:
      if (token.text == "(") return parseParenthesised();
      if (token.text == "[") return parseList();
      if (token.text == "{") return parseDict();
      [[fallthrough]];
    default:
      unexpected("an expression");
    }
  }

  ExprPtr parseParenthesised() {
    int line = advance().line;
    if (acceptOperator(")")) return std::make_unique<ListExpr>(line, true);
    ExprPtr first = parseExpression(true);
    if (acceptOperator(")")) return first;
    auto tuple = std::make_unique<ListExpr>(line, true);
    tuple->items.push_back(std::move(first));
    while (acceptOperator(",")) {
      if (isOperator(")")) break;
      tuple->items.push_back(parseExpression(true));
    }
    expectOperator(")");
    return tuple;
  }

  ExprPtr parseList() {
    auto list = std::make_unique<ListExpr>(advance().line, false);
    while (!isOperator("]")) {
      list->items.push_back(parseExpression(true));
      if (!acceptOperator(",")) break;
    }
    expectOperator("]");
    return list;
  }

  ExprPtr parseDict() {
    auto dict = std::make_unique<DictExpr>(advance().line);
    while (!isOperator("}")) {
      ExprPtr key = parseExpression(true);
      expectOperator(":");
      dict->entries.emplace_back(std::move(key), parseExpression(true));
      if (!acceptOperator(",")) break;
    }
    expectOperator("}");
    return dict;
  }

  ExprPtr parsePostfix(ExprPtr node) {
    for (;;) {
      if (isOperator(".")) {
        int line = advance().line;
        if (current().type == TokenType::Integer)
          node = std::make_unique<SubscriptExpr>(
              line, std::move(node), std::make_unique<LiteralExpr>(line, Value(advance().integer)));
        else
          node = std::make_unique<AttributeExpr>(line, std::move(node), expectName("an attribute name"));
      } else if (isOperator("[")) {
        node = parseSubscript(std::move(node));
      } else if (isOperator("(")) {
        int line = current().line;
        auto call = std::make_unique<CallExpr>(line, std::move(node));
        call->arguments = parseCallArguments();
        node = std::move(call);
      } else {
        return node;
      }
    }
  }

  ExprPtr parseSubscript(ExprPtr object) {
    int line = advance().line;
    auto sliceEnd = [&] { return isOperator(":") || isOperator("]"); };
    ExprPtr start = isOperator(":") ? nullptr : parseExpression(true);
    if (acceptOperator("]"))
      return std::make_unique<SubscriptExpr>(line, std::move(object), std::move(start));
    auto slice = std::make_unique<SliceExpr>(line, std::move(object));
    slice->start = std::move(start);
    expectOperator(":");
    if (!sliceEnd()) slice->stop = parseExpression(true);
    if (acceptOperator(":") && !isOperator("]")) slice->step = parseExpression(true);
    expectOperator("]");
    return slice;
  }

  CallArguments parseCallArguments() {
    CallArguments arguments;
    expectOperator("(");
    while (!isOperator(")")) {
      if (current().type == TokenType::Name && peek().type == TokenType::Operator && peek().text == "=") {
        std::string name = advance().text;
        advance();
        arguments.keyword.emplace_back(std::move(name), parseExpression(true));
      } else {
        if (!arguments.keyword.empty()) fail("a positional argument follows a keyword argument");
        arguments.positional.push_back(parseExpression(true));
      }
      if (!acceptOperator(",")) break;
    }
    expectOperator(")");
    return arguments;
  }

  ExprPtr parseFiltersAndTests(ExprPtr node) {
    for (;;) {
      if (isOperator("|")) {
        int line = advance().line;
        std::string name = expectName("a filter name");
        if (!isKnownFilter(name)) throw ChatTemplateError(name_, line, "no filter named '" + name + "'");
        auto filter = std::make_unique<FilterExpr>(line, std::move(node), name);
        if (isOperator("(")) filter->arguments = parseCallArguments();
        node = std::move(filter);
      } else if (isName("is")) {
        int line = advance().line;
        bool negated = acceptName("not");
        std::string name = expectName("a test name");
        if (!isKnownTest(name)) throw ChatTemplateError(name_, line, "no test named '" + name + "'");
        auto test = std::make_unique<TestExpr>(line, std::move(node), name, negated);
        if (isOperator("(")) {
          test->arguments = parseCallArguments();
        } else if (startsBareTestArgument()) {
          test->arguments.positional.push_back(parsePostfix(parsePrimary()));
        }
        node = std::move(test);
      } else if (isOperator("(")) {
        int line = current().line;
        auto call = std::make_unique<CallExpr>(line, std::move(node));
        call->arguments = parseCallArguments();
        node = std::move(call);
      } else {
        return node;
      }
    }
  }

  // `x is divisibleby 3`, `x is sameas none`: one argument without parentheses.
  bool startsBareTestArgument() const {
    const Token &token = current();
    if (token.type == TokenType::Name)
      return token.text != "else" && token.text != "or" && token.text != "and" && token.text != "if" &&
             token.text != "is" && token.text != "in" && token.text != "not";
    if (token.type == TokenType::String || token.type == TokenType::Integer || token.type == TokenType::Float)
      return true;
    return token.type == TokenType::Operator && (token.text == "[" || token.text == "{");
  }

  const std::vector<Token> &tokens_;
  const std::string &name_;
  size_t pos_ = 0;
  int loopDepth_ = 0;
  int nesting_ = 0;
};

} // namespace

Body parseTemplate(const std::vector<Token> &tokens, const std::string &templateName) {
  return Parser(tokens, templateName).parseTemplate();
}

} // namespace gerbil::chat
