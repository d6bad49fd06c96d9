#include "runtime/chat/Interpreter.h"

#include "runtime/chat/Builtins.h"
#include "runtime/chat/TemplateError.h"

#include <cmath>
#include <ctime>

namespace gerbil::chat {
namespace {

constexpr int kMaxMacroDepth = 64;
constexpr int64_t kMaxRange = 100000; // Jinja's sandbox limit on range()

bool integral(const Value &v) {
  return v.kind() == Value::Kind::Int || v.kind() == Value::Kind::Bool;
}

[[noreturn]] void unsupported(const std::string &op, const Value &a, const Value &b) {
  if (op == "+" && a.isString())
    throw EvalError("can only concatenate str (not \"" + b.typeName() + "\") to str");
  throw EvalError("unsupported operand type(s) for " + op + ": '" + a.typeName() + "' and '" + b.typeName() +
                  "'");
}

Value repeat(const Value &sequence, int64_t times) {
  if (sequence.isString()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += sequence.string();
    return Value(out);
  }
  std::vector<Value> out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), sequence.items().begin(), sequence.items().end());
  return Value::list(std::move(out));
}

// Python's arithmetic: ints stay ints except under /, floor division and modulo follow the divisor's sign.
Value arithmetic(const std::string &op, const Value &a, const Value &b) {
  if (a.isUndefined()) throw EvalError(a.undefinedDescription());
  if (b.isUndefined()) throw EvalError(b.undefinedDescription());
  bool numbers = a.isNumber() && b.isNumber();
  bool ints = integral(a) && integral(b);
  if (op == "+") {
    if (numbers) return ints ? Value(a.integer() + b.integer()) : Value(a.number() + b.number());
    if (a.isString() && b.isString()) return Value(a.string() + b.string());
    if (a.isList() && b.isList()) {
      std::vector<Value> items = a.items();
      items.insert(items.end(), b.items().begin(), b.items().end());
      return a.isTuple() ? Value::tuple(std::move(items)) : Value::list(std::move(items));
    }
    unsupported(op, a, b);
  }
  if (op == "*") {
    if (numbers) return ints ? Value(a.integer() * b.integer()) : Value(a.number() * b.number());
    if ((a.isString() || a.isList()) && integral(b)) return repeat(a, b.integer());
    if (integral(a) && (b.isString() || b.isList())) return repeat(b, a.integer());
    unsupported(op, a, b);
  }
  if (op == "%" && a.isString()) return Value(percentFormat(a.string(), b));
  if (!numbers) unsupported(op, a, b);
  if (op == "-") return ints ? Value(a.integer() - b.integer()) : Value(a.number() - b.number());
  if (op == "**") {
    if (ints && b.integer() >= 0) {
      int64_t result = 1;
      for (int64_t i = 0; i < b.integer(); ++i) result *= a.integer();
      return Value(result);
    }
    return Value(std::pow(a.number(), b.number()));
  }
  if (b.number() == 0) throw EvalError(op == "%" ? "integer modulo by zero" : "division by zero");
  if (op == "/") return Value(a.number() / b.number());
  if (op == "//") {
    if (!ints) return Value(std::floor(a.number() / b.number()));
    int64_t q = a.integer() / b.integer();
    if ((a.integer() % b.integer() != 0) && ((a.integer() < 0) != (b.integer() < 0))) --q;
    return Value(q);
  }
  if (op == "%") {
    if (!ints) {
      double r = std::fmod(a.number(), b.number());
      if (r != 0 && ((r < 0) != (b.number() < 0))) r += b.number();
      return Value(r);
    }
    int64_t r = a.integer() % b.integer();
    if (r != 0 && ((r < 0) != (b.integer() < 0))) r += b.integer();
    return Value(r);
  }
  throw EvalError("unknown operator '" + op + "'");
}

bool compare(const std::string &op, const Value &a, const Value &b) {
  if (op == "==") return a == b;
  if (op == "!=") return !(a == b);
  if (op == "in") return contains(b, a);
  if (op == "not in") return !contains(b, a);
  int order = compareValues(a, b);
  if (op == "<") return order < 0;
  if (op == "<=") return order <= 0;
  if (op == ">") return order > 0;
  return order >= 0;
}

std::optional<int64_t> sliceIndex(const Value &v) {
  if (v.isNone() || v.isUndefined()) return std::nullopt;
  if (!integral(v)) throw EvalError("slice indices must be integers or None, not " + v.typeName());
  return v.integer();
}

Value globalRange(const Arguments &args) {
  if (!args.keyword.empty() || args.positional.empty() || args.positional.size() > 3)
    throw EvalError("range() takes 1 to 3 integer arguments");
  for (const Value &v : args.positional)
    if (!integral(v))
      throw EvalError("range(): '" + v.typeName() + "' object cannot be interpreted as an integer");
  int64_t start = 0, stop = 0, step = 1;
  if (args.positional.size() == 1) {
    stop = args.positional[0].integer();
  } else {
    start = args.positional[0].integer();
    stop = args.positional[1].integer();
    if (args.positional.size() == 3) step = args.positional[2].integer();
  }
  if (step == 0) throw EvalError("range() arg 3 must not be zero");
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<int64_t>(items.size()) >= kMaxRange)
      throw EvalError("range() is limited to " + std::to_string(kMaxRange) + " items");
    items.emplace_back(i);
  }
  return Value::list(std::move(items));
}

Value globalNamespace(const Arguments &args, bool isNamespace) {
  Value result = isNamespace ? Value::namespaceObject() : Value::dict();
  const char *name = isNamespace ? "namespace" : "dict";
  if (args.positional.size() > 1)
    throw EvalError(std::string(name) + "() takes at most one positional argument");
  if (!args.positional.empty()) {
    if (!args.positional[0].isMapping())
      throw EvalError(std::string(name) + "(): the argument must be a dict");
    for (const auto &[key, value] : args.positional[0].entries().entries) result.entries().set(key, value);
  }
  for (const auto &[key, value] : args.keyword) result.entries().set(key, value);
  return result;
}

Value globalStrftimeNow(const Arguments &args) {
  ArgumentReader reader("strftime_now", args, {"format"});
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buffer[256];
  size_t n = std::strftime(buffer, sizeof buffer, reader.string(0, "").c_str(), &local);
  return Value(std::string(buffer, n));
}

class Interpreter {
public:
  explicit Interpreter(const std::string &name) : name_(name) {}
  // A namespace can hold itself (`{% set ns.me = ns %}`), a cycle that reference counting never frees:
  // emptying every namespace the template made breaks them all.
  ~Interpreter() {
    for (Value &ns : namespaces_) ns.entries().entries.clear();
  }
  Interpreter(const Interpreter &) = delete;
  Interpreter &operator=(const Interpreter &) = delete;

  std::string render(const Body &body, const Value &variables) {
    auto root = std::make_shared<Dict>();
    root->set("range", Value::function("range", globalRange));
    root->set("namespace", Value::function("namespace", [this](const Arguments &a) {
                return namespaces_.emplace_back(globalNamespace(a, true));
              }));
    root->set("dict", Value::function("dict", [](const Arguments &a) { return globalNamespace(a, false); }));
    root->set("raise_exception", Value::function("raise_exception", [](const Arguments &a) -> Value {
                throw EvalError(ArgumentReader("raise_exception", a, {"message"}).get(0, Value("")).str());
              }));
    root->set("strftime_now", Value::function("strftime_now", globalStrftimeNow));
    if (variables.isMapping())
      for (const auto &[key, value] : variables.entries().entries) root->set(key, value);
    scopes_.push_back(root);
    std::string output;
    out_ = &output;
    run(body);
    return output;
  }

private:
  enum class Flow { Normal, Break, Continue };

  // ---- statements ----

  Flow run(const Body &body) {
    for (const StmtPtr &stmt : body)
      if (Flow flow = run(*stmt); flow != Flow::Normal) return flow;
    return Flow::Normal;
  }

  Flow run(const Stmt &stmt) {
    try {
      return runImpl(stmt);
    } catch (const EvalError &e) {
      throw ChatTemplateError(name_, stmt.line, e.what());
    }
  }

  Flow runImpl(const Stmt &stmt) {
    switch (stmt.kind) {
    case Stmt::Kind::Text:
      *out_ += static_cast<const TextStmt &>(stmt).text;
      return Flow::Normal;
    case Stmt::Kind::Output:
      *out_ += eval(*static_cast<const OutputStmt &>(stmt).expr).str();
      return Flow::Normal;
    case Stmt::Kind::If: {
      const auto &node = static_cast<const IfStmt &>(stmt);
      for (const auto &[condition, body] : node.branches)
        if (eval(*condition).truthy()) return run(body);
      return run(node.otherwise);
    }
    case Stmt::Kind::For:
      return runFor(static_cast<const ForStmt &>(stmt));
    case Stmt::Kind::Set:
      runSet(static_cast<const SetStmt &>(stmt));
      return Flow::Normal;
    case Stmt::Kind::Macro: {
      const auto &node = static_cast<const MacroStmt &>(stmt);
      scopes_.back()->set(node.name, Value::function(node.name, [this, &node](const Arguments &args) {
                            return callMacro(node, args);
                          }));
      return Flow::Normal;
    }
    case Stmt::Kind::Break:
      return Flow::Break;
    case Stmt::Kind::Continue:
      return Flow::Continue;
    case Stmt::Kind::FilterBlock: {
      const auto &node = static_cast<const FilterBlockStmt &>(stmt);
      Value text(capture(node.body));
      *out_ += applyFilter(node.name, text, evalArguments(node.arguments)).str();
      return Flow::Normal;
    }
    case Stmt::Kind::Group:
      return run(static_cast<const GroupStmt &>(stmt).body);
    }
    return Flow::Normal;
  }

  void bindTargets(Dict &scope, const std::vector<std::string> &targets, const Value &value) {
    if (targets.size() == 1) {
      scope.set(targets[0], value);
      return;
    }
    std::vector<Value> parts = iterate(value);
    if (parts.size() != targets.size())
      throw EvalError("cannot unpack " + std::to_string(parts.size()) + " values into " +
                      std::to_string(targets.size()) + " names");
    for (size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], parts[i]);
  }

  Flow runFor(const ForStmt &node) {
    std::vector<Value> items = iterate(eval(*node.iterable));
    if (node.filter) {
      std::vector<Value> kept;
      for (const Value &item : items) {
        auto scope = std::make_shared<Dict>();
        bindTargets(*scope, node.targets, item);
        scopes_.push_back(scope);
        bool keep = eval(*node.filter).truthy();
        scopes_.pop_back();
        if (keep) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) return run(node.otherwise);
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      // Each iteration is a fresh scope: a `set` inside the body is gone at the next one, as in Jinja.
      auto scope = std::make_shared<Dict>();
      bindTargets(*scope, node.targets, items[static_cast<size_t>(i)]);
      scope->set("loop", loopObject(items, i));
      scopes_.push_back(scope);
      Flow flow = run(node.body);
      scopes_.pop_back();
      if (flow == Flow::Break) break;
    }
    return Flow::Normal;
  }

  static Value loopObject(const std::vector<Value> &items, int64_t i) {
    const int64_t n = static_cast<int64_t>(items.size());
    Value loop = Value::dict();
    Dict &d = loop.entries();
    d.set("index", Value(i + 1));
    d.set("index0", Value(i));
    d.set("revindex", Value(n - i));
    d.set("revindex0", Value(n - i - 1));
    d.set("first", Value(i == 0));
    d.set("last", Value(i == n - 1));
    d.set("length", Value(n));
    d.set("depth", Value(int64_t{1}));
    d.set("depth0", Value(int64_t{0}));
    d.set("previtem",
          i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item"));
    d.set("nextitem",
          i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item"));
    d.set("cycle", Value::function("loop.cycle", [i](const Arguments &args) {
            if (args.positional.empty()) throw EvalError("loop.cycle() needs at least one value");
            return args.positional[static_cast<size_t>(i) % args.positional.size()];
          }));
    return loop;
  }

  void runSet(const SetStmt &node) {
    Value value = node.value ? eval(*node.value) : Value(capture(node.body));
    if (!node.attribute.empty()) {
      Value target = lookup(node.targets[0]);
      if (target.kind() != Value::Kind::Namespace)
        throw EvalError("cannot assign attribute '" + node.attribute + "' on '" + node.targets[0] +
                        "': it is not a namespace()");
      target.entries().set(node.attribute, std::move(value));
      return;
    }
    bindTargets(*scopes_.back(), node.targets, value);
  }

  std::string capture(const Body &body) {
    std::string buffer;
    std::string *saved = out_;
    out_ = &buffer;
    run(body);
    out_ = saved;
    return buffer;
  }

  Value callMacro(const MacroStmt &node, const Arguments &args) {
    if (macroDepth_ >= kMaxMacroDepth)
      throw EvalError("macro '" + node.name + "' recurses deeper than " + std::to_string(kMaxMacroDepth));
    if (args.positional.size() > node.parameters.size())
      throw EvalError("macro '" + node.name + "' takes " + std::to_string(node.parameters.size()) +
                      " arguments, " + std::to_string(args.positional.size()) + " given");
    auto frame = std::make_shared<Dict>();
    std::vector<std::shared_ptr<Dict>> saved = scopes_;
    // A macro sees the template's top level and its own arguments, not the scopes of its caller.
    scopes_ = {saved.front(), frame};
    ++macroDepth_;
    for (const auto &[name, value] : args.keyword) {
      bool known = false;
      for (const auto &parameter : node.parameters) known = known || parameter.first == name;
      if (!known) throw EvalError("macro '" + node.name + "' has no parameter '" + name + "'");
    }
    for (size_t i = 0; i < node.parameters.size(); ++i) {
      const auto &[name, fallback] = node.parameters[i];
      Value value = Value::undefined("'" + name + "' is undefined");
      if (i < args.positional.size()) {
        value = args.positional[i];
      } else {
        bool given = false;
        for (const auto &[key, v] : args.keyword)
          if (key == name) value = v, given = true;
        if (!given && fallback) value = eval(*fallback);
      }
      frame->set(name, value);
    }
    std::string text = capture(node.body);
    --macroDepth_;
    scopes_ = std::move(saved);
    return Value(text);
  }

  // ---- expressions ----

  Value lookup(const std::string &name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
      if (const Value *found = (*it)->find(name)) return *found;
    return Value::undefined("'" + name + "' is undefined");
  }

  Arguments evalArguments(const CallArguments &arguments) {
    Arguments out;
    for (const ExprPtr &e : arguments.positional) out.positional.push_back(eval(*e));
    for (const auto &[name, e] : arguments.keyword) out.keyword.emplace_back(name, eval(*e));
    return out;
  }

  Value eval(const Expr &expr) {
    try {
      return evalImpl(expr);
    } catch (const EvalError &e) {
      throw ChatTemplateError(name_, expr.line, e.what());
    }
  }

  Value evalImpl(const Expr &expr) {
    switch (expr.kind) {
    case Expr::Kind::Literal:
      return static_cast<const LiteralExpr &>(expr).value;
    case Expr::Kind::Name:
      return lookup(static_cast<const NameExpr &>(expr).name);
    case Expr::Kind::List: {
      const auto &node = static_cast<const ListExpr &>(expr);
      std::vector<Value> items;
      for (const ExprPtr &item : node.items) items.push_back(eval(*item));
      return node.tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
    }
    case Expr::Kind::Dict: {
      Value dict = Value::dict();
      for (const auto &[key, value] : static_cast<const DictExpr &>(expr).entries)
        dict.entries().set(eval(*key).str(), eval(*value));
      return dict;
    }
    case Expr::Kind::Attribute: {
      const auto &node = static_cast<const AttributeExpr &>(expr);
      return getAttribute(eval(*node.object), node.name);
    }
    case Expr::Kind::Subscript: {
      const auto &node = static_cast<const SubscriptExpr &>(expr);
      Value object = eval(*node.object);
      return getItem(object, eval(*node.index));
    }
    case Expr::Kind::Slice: {
      const auto &node = static_cast<const SliceExpr &>(expr);
      Value object = eval(*node.object);
      auto part = [&](const ExprPtr &e) { return e ? sliceIndex(eval(*e)) : std::nullopt; };
      return slice(object, part(node.start), part(node.stop), part(node.step));
    }
    case Expr::Kind::Call: {
      const auto &node = static_cast<const CallExpr &>(expr);
      Value callee = eval(*node.callee);
      Arguments args = evalArguments(node.arguments);
      if (callee.isUndefined()) throw EvalError(callee.undefinedDescription());
      if (!callee.isCallable()) throw EvalError("'" + callee.typeName() + "' object is not callable");
      return callee.callable().call(args);
    }
    case Expr::Kind::Filter: {
      const auto &node = static_cast<const FilterExpr &>(expr);
      Value input = eval(*node.input);
      return applyFilter(node.name, input, evalArguments(node.arguments));
    }
    case Expr::Kind::Test: {
      const auto &node = static_cast<const TestExpr &>(expr);
      Value input = eval(*node.input);
      return Value(applyTest(node.name, input, evalArguments(node.arguments)) != node.negated);
    }
    case Expr::Kind::Unary: {
      const auto &node = static_cast<const UnaryExpr &>(expr);
      Value operand = eval(*node.operand);
      if (node.op == "not") return Value(!operand.truthy());
      if (operand.isUndefined()) throw EvalError(operand.undefinedDescription());
      if (!operand.isNumber())
        throw EvalError("bad operand type for unary " + node.op + ": '" + operand.typeName() + "'");
      if (node.op == "+") return integral(operand) ? Value(operand.integer()) : operand;
      return integral(operand) ? Value(-operand.integer()) : Value(-operand.number());
    }
    case Expr::Kind::Binary: {
      const auto &node = static_cast<const BinaryExpr &>(expr);
      Value left = eval(*node.left);
      // and / or return one of their operands, evaluating the right one only when needed (Python).
      if (node.op == "and") return left.truthy() ? eval(*node.right) : left;
      if (node.op == "or") return left.truthy() ? left : eval(*node.right);
      Value right = eval(*node.right);
      if (node.op == "~") return Value(left.str() + right.str());
      return arithmetic(node.op, left, right);
    }
    case Expr::Kind::Compare: {
      const auto &node = static_cast<const CompareExpr &>(expr);
      Value left = eval(*node.first);
      for (const auto &[op, operand] : node.rest) {
        Value right = eval(*operand);
        if (!compare(op, left, right)) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case Expr::Kind::Conditional: {
      const auto &node = static_cast<const ConditionalExpr &>(expr);
      if (eval(*node.condition).truthy()) return eval(*node.then);
      return node.otherwise ? eval(*node.otherwise)
                            : Value::undefined("the condition was false and there is no else");
    }
    }
    return Value();
  }

  const std::string &name_;
  std::vector<std::shared_ptr<Dict>> scopes_;
  std::string *out_ = nullptr;
  int macroDepth_ = 0;
  std::vector<Value> namespaces_; // every namespace() made, emptied at the end
};

} // namespace

std::string render(const Body &body, const Value &variables, const std::string &templateName) {
  return Interpreter(templateName).render(body, variables);
}

} // namespace gerbil::chat
