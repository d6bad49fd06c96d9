// The values a chat template computes with: Python's object model as Jinja2 exposes it (None, bool, int,
// float, str, list/tuple, dict, namespace, callables) plus Jinja's `undefined`. Lists, dicts and namespaces
// are shared by reference, as in Python, so that `ns.x = ...` inside a loop is seen after it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace gerbil::chat {

// An error while rendering, before the interpreter has added where in the template it happened.
class EvalError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

class Value;
struct Dict;
struct ListData;
struct Callable;
struct Arguments;
using Function = std::function<Value(const Arguments &)>;

class Value {
public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };

  Value() = default; // undefined
  Value(bool b) : kind_(Kind::Bool), data_(b) {}
  Value(int v) : Value(static_cast<int64_t>(v)) {}
  Value(int64_t v) : kind_(Kind::Int), data_(v) {}
  Value(double v) : kind_(Kind::Float), data_(v) {}
  Value(std::string s) : kind_(Kind::String), data_(std::move(s)) {}
  Value(const char *s) : Value(std::string(s)) {}

  static Value none();
  // An undefined value remembers why it is undefined ("'x' is undefined") for the error its use raises.
  static Value undefined(std::string description);
  static Value list(std::vector<Value> items = {});
  static Value tuple(std::vector<Value> items);
  static Value dict();
  static Value namespaceObject();
  static Value function(std::string name, Function call);
  // JSON objects become dicts in their key order; null becomes None.
  static Value fromJson(const nlohmann::ordered_json &json);

  Kind kind() const { return kind_; }
  bool isUndefined() const { return kind_ == Kind::Undefined; }
  bool isNone() const { return kind_ == Kind::None; }
  bool isString() const { return kind_ == Kind::String; }
  bool isNumber() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool isList() const { return kind_ == Kind::List; }
  bool isTuple() const;
  bool isMapping() const { return kind_ == Kind::Dict || kind_ == Kind::Namespace; }
  bool isCallable() const { return kind_ == Kind::Callable; }

  bool truthy() const;
  bool boolean() const { return std::get<bool>(data_); }
  int64_t integer() const; // bool and int
  double number() const;   // bool, int and float
  const std::string &string() const { return std::get<std::string>(data_); }
  std::vector<Value> &items() const; // a list's or tuple's elements, shared
  Dict &entries() const;             // a dict's or namespace's entries, shared
  const Callable &callable() const { return *std::get<std::shared_ptr<Callable>>(data_); }
  std::string undefinedDescription() const { return name_.empty() ? "the value is undefined" : name_; }

  std::string str() const;  // Python str(): what {{ }} prints ("" for undefined)
  std::string repr() const; // Python repr(): how elements print inside a list or dict
  // Python json.dumps(ensure_ascii=False) as transformers' tojson filter calls it: indent < 0 is one line
  // with
  // ", " and ": " separators.
  std::string toJson(int indent = -1, bool sortKeys = false) const;
  std::string typeName() const; // Python's name of the type, for error messages

  bool operator==(const Value &other) const; // Python ==: 1 == 1.0 == True

private:
  std::string reprNested(int depth) const;

  Kind kind_ = Kind::Undefined;
  std::variant<std::monostate, bool, int64_t, double, std::string, std::shared_ptr<ListData>,
               std::shared_ptr<Dict>, std::shared_ptr<Callable>>
      data_;
  std::string name_; // why an undefined value is undefined
};

struct Arguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

struct Callable {
  std::string name;
  Function call;
};

struct ListData {
  std::vector<Value> items;
  bool tuple = false;
};

// String keys in insertion order (Python dicts keep it, and tojson prints it).
struct Dict {
  std::vector<std::pair<std::string, Value>> entries;
  const Value *find(std::string_view key) const;
  void set(const std::string &key, Value value);
};

// Python's repr of a float: the shortest digits that round-trip, exponent form outside [1e-4, 1e16).
std::string formatFloat(double value);

// Python comparison for sorting and <, >: numbers with numbers, strings with strings, lists element-wise.
// Throws EvalError for types Python refuses to order.
int compareValues(const Value &a, const Value &b);

} // namespace gerbil::chat
