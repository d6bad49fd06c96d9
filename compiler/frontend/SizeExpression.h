// Integer formulas in arch specs: hyperparameter defaults ("hidden_size / num_heads", "4 * hidden_size") and
// slice offsets of fused tensors ("(num_heads + num_kv_heads) * head_dim"). Integers, names, + - * / and
// parentheses; division must be exact, so a formula never rounds a size silently.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace gerbil {

// A syntax error in a formula; the arch-spec reader adds the file and the key.
class SizeExpressionSyntaxError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// Evaluation failed: an inexact division, a division by zero or an overflow. The operands are kept apart so
// that the caller can name them by the config keys they came from.
struct SizeExpressionEvaluationError {
  enum class Kind { InexactDivision, DivisionByZero, Overflow } kind;
  std::string numeratorText, denominatorText; // for divisions; a bare name when the operand is one
  int64_t numerator = 0, denominator = 0;
  bool numeratorIsName = false, denominatorIsName = false;
  std::string expressionText;
};

class SizeExpression {
public:
  // Throws SizeExpressionSyntaxError.
  static SizeExpression parse(const std::string &text);

  const std::string &text() const { return text_; }
  // The names the formula refers to, in order of first appearance.
  const std::vector<std::string> &names() const { return names_; }
  bool isLiteral() const;

  // Throws SizeExpressionEvaluationError (and whatever lookup throws).
  int64_t evaluate(const std::function<int64_t(const std::string &)> &lookup) const;

  struct Node;

private:
  std::string text_;
  std::vector<std::string> names_;
  std::shared_ptr<const Node> root_;
};

} // namespace gerbil
