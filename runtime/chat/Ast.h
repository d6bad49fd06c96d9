// The syntax tree of a parsed template: expressions and statements, each with the line it starts on so that
// rendering errors can name it.
#pragma once

#include "runtime/chat/Value.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gerbil::chat {

struct Expr {
  enum class Kind {
    Literal,
    Name,
    List,
    Dict,
    Attribute,
    Subscript,
    Slice,
    Call,
    Filter,
    Test,
    Unary,
    Binary,
    Compare,
    Conditional
  };
  Expr(Kind kind, int line) : kind(kind), line(line) {}
  virtual ~Expr() = default;
  Kind kind;
  int line;
};
using ExprPtr = std::unique_ptr<Expr>;

struct CallArguments {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
};

struct LiteralExpr : Expr {
  LiteralExpr(int line, Value value) : Expr(Kind::Literal, line), value(std::move(value)) {}
  Value value;
};
struct NameExpr : Expr {
  NameExpr(int line, std::string name) : Expr(Kind::Name, line), name(std::move(name)) {}
  std::string name;
};
struct ListExpr : Expr { // [a, b] and (a, b)
  ListExpr(int line, bool tuple) : Expr(Kind::List, line), tuple(tuple) {}
  std::vector<ExprPtr> items;
  bool tuple;
};
struct DictExpr : Expr {
  explicit DictExpr(int line) : Expr(Kind::Dict, line) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> entries;
};
struct AttributeExpr : Expr { // object.name
  AttributeExpr(int line, ExprPtr object, std::string name)
      : Expr(Kind::Attribute, line), object(std::move(object)), name(std::move(name)) {}
  ExprPtr object;
  std::string name;
};
struct SubscriptExpr : Expr { // object[index]
  SubscriptExpr(int line, ExprPtr object, ExprPtr index)
      : Expr(Kind::Subscript, line), object(std::move(object)), index(std::move(index)) {}
  ExprPtr object, index;
};
struct SliceExpr : Expr { // object[start:stop:step], each part optional
  SliceExpr(int line, ExprPtr object) : Expr(Kind::Slice, line), object(std::move(object)) {}
  ExprPtr object, start, stop, step;
};
struct CallExpr : Expr {
  CallExpr(int line, ExprPtr callee) : Expr(Kind::Call, line), callee(std::move(callee)) {}
  ExprPtr callee;
  CallArguments arguments;
};
struct FilterExpr : Expr { // input | name(arguments)
  FilterExpr(int line, ExprPtr input, std::string name)
      : Expr(Kind::Filter, line), input(std::move(input)), name(std::move(name)) {}
  ExprPtr input;
  std::string name;
  CallArguments arguments;
};
struct TestExpr : Expr { // input is [not] name(arguments)
  TestExpr(int line, ExprPtr input, std::string name, bool negated)
      : Expr(Kind::Test, line), input(std::move(input)), name(std::move(name)), negated(negated) {}
  ExprPtr input;
  std::string name;
  CallArguments arguments;
  bool negated;
};
struct UnaryExpr : Expr { // not, -, +
  UnaryExpr(int line, std::string op, ExprPtr operand)
      : Expr(Kind::Unary, line), op(std::move(op)), operand(std::move(operand)) {}
  std::string op;
  ExprPtr operand;
};
struct BinaryExpr : Expr { // + - * / // % ** ~ and or
  BinaryExpr(int line, std::string op, ExprPtr left, ExprPtr right)
      : Expr(Kind::Binary, line), op(std::move(op)), left(std::move(left)), right(std::move(right)) {}
  std::string op;
  ExprPtr left, right;
};
struct CompareExpr : Expr { // first op1 x1 op2 x2 ...: chained like Python; ops == != < <= > >= in "not in"
  CompareExpr(int line, ExprPtr first) : Expr(Kind::Compare, line), first(std::move(first)) {}
  ExprPtr first;
  std::vector<std::pair<std::string, ExprPtr>> rest;
};
struct ConditionalExpr : Expr { // then if condition else otherwise
  ConditionalExpr(int line, ExprPtr condition, ExprPtr then, ExprPtr otherwise)
      : Expr(Kind::Conditional, line), condition(std::move(condition)), then(std::move(then)),
        otherwise(std::move(otherwise)) {}
  ExprPtr condition, then, otherwise; // otherwise may be null: undefined
};

struct Stmt {
  enum class Kind { Text, Output, If, For, Set, Macro, Break, Continue, FilterBlock, Group };
  Stmt(Kind kind, int line) : kind(kind), line(line) {}
  virtual ~Stmt() = default;
  Kind kind;
  int line;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct TextStmt : Stmt {
  TextStmt(int line, std::string text) : Stmt(Kind::Text, line), text(std::move(text)) {}
  std::string text;
};
struct OutputStmt : Stmt { // {{ expr }}
  OutputStmt(int line, ExprPtr expr) : Stmt(Kind::Output, line), expr(std::move(expr)) {}
  ExprPtr expr;
};
struct IfStmt : Stmt { // if / elif ... / else
  explicit IfStmt(int line) : Stmt(Kind::If, line) {}
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body otherwise;
};
struct ForStmt : Stmt { // for a[, b] in iterable [if filter] ... [else ...]
  explicit ForStmt(int line) : Stmt(Kind::For, line) {}
  std::vector<std::string> targets;
  ExprPtr iterable, filter;
  Body body, otherwise;
};
struct SetStmt : Stmt {
  explicit SetStmt(int line) : Stmt(Kind::Set, line) {}
  std::vector<std::string> targets; // set a[, b] = value
  std::string attribute;            // set ns.attribute = value (targets[0] is the namespace)
  ExprPtr value;                    // null for {% set x %}...{% endset %}: body renders the value
  Body body;
};
struct MacroStmt : Stmt {
  explicit MacroStmt(int line) : Stmt(Kind::Macro, line) {}
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> parameters; // default may be null
  Body body;
};
struct LoopControlStmt : Stmt { // break, continue
  LoopControlStmt(Kind kind, int line) : Stmt(kind, line) {}
};
struct FilterBlockStmt : Stmt { // {% filter name(args) %}...{% endfilter %}
  FilterBlockStmt(int line, std::string name) : Stmt(Kind::FilterBlock, line), name(std::move(name)) {}
  std::string name;
  CallArguments arguments;
  Body body;
};
struct GroupStmt : Stmt { // a body with no scope of its own ({% generation %})
  explicit GroupStmt(int line) : Stmt(Kind::Group, line) {}
  Body body;
};

} // namespace gerbil::chat
