#include "compiler/frontend/SizeExpression.h"

#include <algorithm>
#include <cctype>

namespace gerbil {

struct SizeExpression::Node {
  enum class Kind { Literal, Name, Add, Subtract, Multiply, Divide } kind;
  int64_t value = 0;
  std::string name;
  std::string text; // the source text of this subexpression, for messages
  std::shared_ptr<const Node> lhs, rhs;
};

namespace {

using Node = SizeExpression::Node;

// Recursive descent over: expr := term (('+' | '-') term)*, term := factor (('*' | '/') factor)*,
// factor := integer | name | '(' expr ')'.
class Parser {
public:
  explicit Parser(const std::string &text) : text_(text) {}

  std::shared_ptr<const Node> parseAll(std::vector<std::string> &names) {
    names_ = &names;
    auto root = parseSum();
    skipSpace();
    if (pos_ != text_.size()) fail("unexpected '" + std::string(1, text_[pos_]) + "'");
    return root;
  }

private:
  [[noreturn]] void fail(const std::string &what) const {
    throw SizeExpressionSyntaxError("bad formula '" + text_ + "': " + what + " at column " +
                                    std::to_string(pos_ + 1));
  }

  void skipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  std::shared_ptr<const Node> binary(Node::Kind kind, std::shared_ptr<const Node> lhs,
                                     std::shared_ptr<const Node> rhs, size_t start) {
    auto node = std::make_shared<Node>();
    node->kind = kind;
    node->lhs = std::move(lhs);
    node->rhs = std::move(rhs);
    node->text = trimmed(start, pos_);
    return node;
  }

  std::string trimmed(size_t begin, size_t end) const {
    while (begin < end && std::isspace(static_cast<unsigned char>(text_[begin]))) ++begin;
    while (end > begin && std::isspace(static_cast<unsigned char>(text_[end - 1]))) --end;
    return text_.substr(begin, end - begin);
  }

  std::shared_ptr<const Node> parseSum() {
    size_t start = pos_;
    auto lhs = parseProduct();
    for (;;) {
      skipSpace();
      if (pos_ >= text_.size() || (text_[pos_] != '+' && text_[pos_] != '-')) return lhs;
      Node::Kind kind = text_[pos_] == '+' ? Node::Kind::Add : Node::Kind::Subtract;
      ++pos_;
      auto rhs = parseProduct();
      lhs = binary(kind, lhs, rhs, start);
    }
  }

  std::shared_ptr<const Node> parseProduct() {
    size_t start = pos_;
    auto lhs = parseFactor();
    for (;;) {
      skipSpace();
      if (pos_ >= text_.size() || (text_[pos_] != '*' && text_[pos_] != '/')) return lhs;
      Node::Kind kind = text_[pos_] == '*' ? Node::Kind::Multiply : Node::Kind::Divide;
      ++pos_;
      auto rhs = parseFactor();
      lhs = binary(kind, lhs, rhs, start);
    }
  }

  std::shared_ptr<const Node> parseFactor() {
    skipSpace();
    if (pos_ >= text_.size()) fail("expected a number, a name or '('");
    size_t start = pos_;
    char c = text_[pos_];
    if (c == '(') {
      ++pos_;
      auto inner = parseSum();
      skipSpace();
      if (pos_ >= text_.size() || text_[pos_] != ')') fail("expected ')'");
      ++pos_;
      return inner;
    }
    auto node = std::make_shared<Node>();
    if (std::isdigit(static_cast<unsigned char>(c))) {
      int64_t value = 0;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        if (__builtin_mul_overflow(value, 10, &value) ||
            __builtin_add_overflow(value, text_[pos_] - '0', &value))
          fail("number too large");
        ++pos_;
      }
      if (pos_ < text_.size() &&
          (std::isalpha(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '.'))
        fail("only whole numbers and names are allowed");
      node->kind = Node::Kind::Literal;
      node->value = value;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      while (pos_ < text_.size() &&
             (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
        ++pos_;
      node->kind = Node::Kind::Name;
      node->name = text_.substr(start, pos_ - start);
      if (std::find(names_->begin(), names_->end(), node->name) == names_->end())
        names_->push_back(node->name);
    } else {
      fail("unexpected '" + std::string(1, c) + "'");
    }
    node->text = text_.substr(start, pos_ - start);
    return node;
  }

  const std::string &text_;
  size_t pos_ = 0;
  std::vector<std::string> *names_ = nullptr;
};

int64_t evaluateNode(const Node &node, const std::function<int64_t(const std::string &)> &lookup,
                     const std::string &expressionText) {
  switch (node.kind) {
  case Node::Kind::Literal:
    return node.value;
  case Node::Kind::Name:
    return lookup(node.name);
  default:
    break;
  }
  int64_t lhs = evaluateNode(*node.lhs, lookup, expressionText);
  int64_t rhs = evaluateNode(*node.rhs, lookup, expressionText);
  SizeExpressionEvaluationError error{SizeExpressionEvaluationError::Kind::Overflow,
                                      node.lhs->text,
                                      node.rhs->text,
                                      lhs,
                                      rhs,
                                      node.lhs->kind == Node::Kind::Name,
                                      node.rhs->kind == Node::Kind::Name,
                                      expressionText};
  int64_t result = 0;
  switch (node.kind) {
  case Node::Kind::Add:
    if (__builtin_add_overflow(lhs, rhs, &result)) throw error;
    return result;
  case Node::Kind::Subtract:
    if (__builtin_sub_overflow(lhs, rhs, &result)) throw error;
    return result;
  case Node::Kind::Multiply:
    if (__builtin_mul_overflow(lhs, rhs, &result)) throw error;
    return result;
  case Node::Kind::Divide:
    if (rhs == 0) {
      error.kind = SizeExpressionEvaluationError::Kind::DivisionByZero;
      throw error;
    }
    if (lhs % rhs != 0) {
      error.kind = SizeExpressionEvaluationError::Kind::InexactDivision;
      throw error;
    }
    return lhs / rhs;
  default:
    throw error;
  }
}

} // namespace

SizeExpression SizeExpression::parse(const std::string &text) {
  SizeExpression expression;
  expression.text_ = text;
  expression.root_ = Parser(text).parseAll(expression.names_);
  return expression;
}

bool SizeExpression::isLiteral() const {
  return root_ && root_->kind == Node::Kind::Literal;
}

int64_t SizeExpression::evaluate(const std::function<int64_t(const std::string &)> &lookup) const {
  return evaluateNode(*root_, lookup, text_);
}

} // namespace gerbil
