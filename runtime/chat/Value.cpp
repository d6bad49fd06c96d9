#include "runtime/chat/Value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace gerbil::chat {

// A namespace can hold itself (`{% set ns.me = ns %}`): printing that deep is a cycle, not data.
constexpr int kMaxNesting = 100;

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value Value::undefined(std::string description) {
  Value v;
  v.name_ = std::move(description);
  return v;
}

Value Value::list(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::List;
  v.data_ = std::make_shared<ListData>(ListData{std::move(items), false});
  return v;
}

Value Value::tuple(std::vector<Value> items) {
  Value v = list(std::move(items));
  std::get<std::shared_ptr<ListData>>(v.data_)->tuple = true;
  return v;
}

Value Value::dict() {
  Value v;
  v.kind_ = Kind::Dict;
  v.data_ = std::make_shared<Dict>();
  return v;
}

Value Value::namespaceObject() {
  Value v = dict();
  v.kind_ = Kind::Namespace;
  return v;
}

Value Value::function(std::string name, Function call) {
  Value v;
  v.kind_ = Kind::Callable;
  v.data_ = std::make_shared<Callable>(Callable{std::move(name), std::move(call)});
  return v;
}

Value Value::fromJson(const nlohmann::ordered_json &json) {
  switch (json.type()) {
  case nlohmann::ordered_json::value_t::null:
    return none();
  case nlohmann::ordered_json::value_t::boolean:
    return Value(json.get<bool>());
  case nlohmann::ordered_json::value_t::number_integer:
    return Value(json.get<int64_t>());
  case nlohmann::ordered_json::value_t::number_unsigned:
    return Value(static_cast<int64_t>(json.get<uint64_t>()));
  case nlohmann::ordered_json::value_t::number_float:
    return Value(json.get<double>());
  case nlohmann::ordered_json::value_t::string:
    return Value(json.get<std::string>());
  case nlohmann::ordered_json::value_t::array: {
    std::vector<Value> items;
    for (const auto &item : json) items.push_back(fromJson(item));
    return list(std::move(items));
  }
  case nlohmann::ordered_json::value_t::object: {
    Value d = dict();
    for (const auto &[key, item] : json.items()) d.entries().set(key, fromJson(item));
    return d;
  }
  default:
    throw EvalError("JSON value of type " + std::string(json.type_name()) + " has no template equivalent");
  }
}

bool Value::isTuple() const {
  return kind_ == Kind::List && std::get<std::shared_ptr<ListData>>(data_)->tuple;
}

bool Value::truthy() const {
  switch (kind_) {
  case Kind::Undefined:
  case Kind::None:
    return false;
  case Kind::Bool:
    return boolean();
  case Kind::Int:
    return integer() != 0;
  case Kind::Float:
    return number() != 0.0;
  case Kind::String:
    return !string().empty();
  case Kind::List:
    return !items().empty();
  case Kind::Dict:
    return !entries().entries.empty();
  case Kind::Namespace:
  case Kind::Callable:
    return true;
  }
  return false;
}

int64_t Value::integer() const {
  if (kind_ == Kind::Bool) return boolean() ? 1 : 0;
  return std::get<int64_t>(data_);
}

double Value::number() const {
  if (kind_ == Kind::Float) return std::get<double>(data_);
  return static_cast<double>(integer());
}

std::vector<Value> &Value::items() const {
  return std::get<std::shared_ptr<ListData>>(data_)->items;
}
Dict &Value::entries() const {
  return *std::get<std::shared_ptr<Dict>>(data_);
}

std::string formatFloat(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
  // The shortest round-trip digits in scientific form, re-laid out as Python's repr does.
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  std::string scientific(buffer, end);
  size_t e = scientific.find('e');
  std::string mantissa = scientific.substr(0, e);
  int exponent = std::stoi(scientific.substr(e + 1));
  bool negative = mantissa[0] == '-';
  std::string digits;
  for (char c : mantissa)
    if (std::isdigit(static_cast<unsigned char>(c))) digits += c;
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp[16];
    std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp;
  }
  if (exponent < 0) return out + "0." + std::string(-exponent - 1, '0') + digits;
  if (static_cast<int>(digits.size()) <= exponent + 1)
    return out + digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
  return out + digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
}

namespace {

std::string reprString(const std::string &s) {
  char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == quote || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + quote;
}

std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    default:
      if (c < 0x20) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "\\u%04x", c);
        out += hex;
      } else {
        out += static_cast<char>(c);
      }
    }
  }
  return out + "\"";
}

void writeJson(const Value &v, int indent, bool sortKeys, int depth, std::string &out) {
  if (depth > kMaxNesting)
    throw EvalError("Circular reference detected (or a value nested deeper than " +
                    std::to_string(kMaxNesting) + " levels)");
  auto newline = [&](int level) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent * level), ' ');
  };
  const char *itemSeparator = indent < 0 ? ", " : ",";
  switch (v.kind()) {
  case Value::Kind::None:
    out += "null";
    return;
  case Value::Kind::Bool:
    out += v.boolean() ? "true" : "false";
    return;
  case Value::Kind::Int:
    out += std::to_string(v.integer());
    return;
  case Value::Kind::Float: {
    double d = v.number();
    out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : formatFloat(d);
    return;
  }
  case Value::Kind::String:
    out += jsonString(v.string());
    return;
  case Value::Kind::List: {
    if (v.items().empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < v.items().size(); ++i) {
      if (i) out += itemSeparator;
      newline(depth + 1);
      writeJson(v.items()[i], indent, sortKeys, depth + 1, out);
    }
    newline(depth);
    out += ']';
    return;
  }
  case Value::Kind::Dict: {
    auto entries = v.entries().entries;
    if (entries.empty()) {
      out += "{}";
      return;
    }
    if (sortKeys)
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto &a, const auto &b) { return a.first < b.first; });
    out += '{';
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i) out += itemSeparator;
      newline(depth + 1);
      out += jsonString(entries[i].first) + ": ";
      writeJson(entries[i].second, indent, sortKeys, depth + 1, out);
    }
    newline(depth);
    out += '}';
    return;
  }
  default:
    throw EvalError("Object of type " + v.typeName() + " is not JSON serializable");
  }
}

} // namespace

std::string Value::str() const {
  switch (kind_) {
  case Kind::Undefined:
    return "";
  case Kind::String:
    return string();
  default:
    return repr();
  }
}

std::string Value::repr() const {
  return reprNested(0);
}

std::string Value::reprNested(int depth) const {
  if (depth > kMaxNesting)
    throw EvalError("the value nests deeper than " + std::to_string(kMaxNesting) +
                    " levels (does it contain itself?)");
  switch (kind_) {
  case Kind::Undefined:
    return "";
  case Kind::None:
    return "None";
  case Kind::Bool:
    return boolean() ? "True" : "False";
  case Kind::Int:
    return std::to_string(integer());
  case Kind::Float:
    return formatFloat(number());
  case Kind::String:
    return reprString(string());
  case Kind::List: {
    bool isTupleValue = isTuple();
    std::string out = isTupleValue ? "(" : "[";
    for (size_t i = 0; i < items().size(); ++i) out += (i ? ", " : "") + items()[i].reprNested(depth + 1);
    if (isTupleValue && items().size() == 1) out += ",";
    return out + (isTupleValue ? ")" : "]");
  }
  case Kind::Dict: {
    std::string out = "{";
    bool first = true;
    for (const auto &[key, value] : entries().entries) {
      out += (first ? "" : ", ") + reprString(key) + ": " + value.reprNested(depth + 1);
      first = false;
    }
    return out + "}";
  }
  case Kind::Namespace: {
    std::string out = "<Namespace {";
    bool first = true;
    for (const auto &[key, value] : entries().entries) {
      out += (first ? "" : ", ") + reprString(key) + ": " + value.reprNested(depth + 1);
      first = false;
    }
    return out + "}>";
  }
  case Kind::Callable:
    return "<function " + callable().name + ">";
  }
  return "";
}

std::string Value::toJson(int indent, bool sortKeys) const {
  std::string out;
  writeJson(*this, indent, sortKeys, 0, out);
  return out;
}

std::string Value::typeName() const {
  switch (kind_) {
  case Kind::Undefined:
    return "Undefined";
  case Kind::None:
    return "NoneType";
  case Kind::Bool:
    return "bool";
  case Kind::Int:
    return "int";
  case Kind::Float:
    return "float";
  case Kind::String:
    return "str";
  case Kind::List:
    return isTuple() ? "tuple" : "list";
  case Kind::Dict:
    return "dict";
  case Kind::Namespace:
    return "Namespace";
  case Kind::Callable:
    return "function";
  }
  return "object";
}

bool Value::operator==(const Value &other) const {
  if (isNumber() && other.isNumber()) {
    if (kind_ != Kind::Float && other.kind_ != Kind::Float) return integer() == other.integer();
    return number() == other.number();
  }
  if (kind_ != other.kind_) return false;
  switch (kind_) {
  case Kind::Undefined:
  case Kind::None:
    return true;
  case Kind::String:
    return string() == other.string();
  case Kind::List:
    return isTuple() == other.isTuple() && items() == other.items();
  case Kind::Dict: {
    const auto &mine = entries().entries;
    if (mine.size() != other.entries().entries.size()) return false;
    for (const auto &[key, value] : mine) {
      const Value *theirs = other.entries().find(key);
      if (!theirs || !(*theirs == value)) return false;
    }
    return true;
  }
  case Kind::Namespace:
  case Kind::Callable:
    return data_ == other.data_;
  default:
    return false;
  }
}

const Value *Dict::find(std::string_view key) const {
  for (const auto &[k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(const std::string &key, Value value) {
  for (auto &[k, v] : entries)
    if (k == key) {
      v = std::move(value);
      return;
    }
  entries.emplace_back(key, std::move(value));
}

int compareValues(const Value &a, const Value &b) {
  if (a.isNumber() && b.isNumber()) {
    if (a.kind() != Value::Kind::Float && b.kind() != Value::Kind::Float)
      return a.integer() < b.integer() ? -1 : a.integer() > b.integer();
    return a.number() < b.number() ? -1 : a.number() > b.number();
  }
  if (a.isString() && b.isString()) return a.string().compare(b.string()) < 0 ? -1 : a.string() != b.string();
  if (a.isList() && b.isList()) {
    const auto &x = a.items(), &y = b.items();
    for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
      if (x[i] == y[i]) continue;
      return compareValues(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size();
  }
  throw EvalError("'<' not supported between instances of '" + a.typeName() + "' and '" + b.typeName() + "'");
}

} // namespace gerbil::chat
