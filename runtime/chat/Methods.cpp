// Attribute and item access, the methods of str, dict and list, slicing and iteration.
#include "runtime/chat/Builtins.h"

#include "runtime/chat/Strings.h"

#include <algorithm>
#include <cstdio>

namespace gerbil::chat {

ArgumentReader::ArgumentReader(std::string function, const Arguments &arguments,
                               std::vector<std::string> parameters)
    : function_(std::move(function)), parameters_(std::move(parameters)),
      values_(parameters_.size(), nullptr) {
  if (arguments.positional.size() > parameters_.size())
    throw EvalError(function_ + "() takes at most " + std::to_string(parameters_.size()) + " arguments (" +
                    std::to_string(arguments.positional.size()) + " given)");
  for (size_t i = 0; i < arguments.positional.size(); ++i) values_[i] = &arguments.positional[i];
  for (const auto &[name, value] : arguments.keyword) {
    auto it = std::find(parameters_.begin(), parameters_.end(), name);
    if (it == parameters_.end())
      throw EvalError(function_ + "() got an unexpected keyword argument '" + name + "'");
    size_t index = static_cast<size_t>(it - parameters_.begin());
    if (values_[index]) throw EvalError(function_ + "() got multiple values for argument '" + name + "'");
    values_[index] = &value;
  }
}

const Value *ArgumentReader::get(size_t index) const {
  return index < values_.size() ? values_[index] : nullptr;
}

Value ArgumentReader::get(size_t index, Value fallback) const {
  const Value *v = get(index);
  return v ? *v : std::move(fallback);
}

std::string ArgumentReader::string(size_t index, const std::string &fallback) const {
  const Value *v = get(index);
  if (!v) return fallback;
  if (!v->isString())
    throw EvalError(function_ + "(): '" + parameters_[index] + "' must be a string, not " + v->typeName());
  return v->string();
}

int64_t ArgumentReader::integer(size_t index, int64_t fallback) const {
  const Value *v = get(index);
  if (!v || v->isNone()) return fallback;
  if (v->kind() != Value::Kind::Int && v->kind() != Value::Kind::Bool)
    throw EvalError(function_ + "(): '" + parameters_[index] + "' must be an integer, not " + v->typeName());
  return v->integer();
}

bool ArgumentReader::boolean(size_t index, bool fallback) const {
  const Value *v = get(index);
  return v ? v->truthy() : fallback;
}

namespace {

std::optional<std::string> optionalString(const ArgumentReader &reader, size_t index) {
  const Value *v = reader.get(index);
  if (!v || v->isNone()) return std::nullopt;
  return reader.string(index, "");
}

Value stringList(const std::vector<std::string> &parts) {
  std::vector<Value> items;
  for (const std::string &part : parts) items.emplace_back(part);
  return Value::list(std::move(items));
}

// startswith / endswith take a string or a tuple of strings.
bool affixMatches(const std::string &text, const Value &affix, bool prefix, const std::string &method) {
  auto one = [&](const Value &candidate) {
    if (!candidate.isString()) throw EvalError(method + "() argument must be str or a tuple of str");
    const std::string &s = candidate.string();
    if (s.size() > text.size()) return false;
    return prefix ? text.compare(0, s.size(), s) == 0
                  : text.compare(text.size() - s.size(), s.size(), s) == 0;
  };
  if (affix.isList()) return std::any_of(affix.items().begin(), affix.items().end(), one);
  return one(affix);
}

// Python's str.format with {} / {0} / {name} fields (no format specs).
std::string braceFormat(const std::string &format, const Arguments &arguments) {
  std::string out;
  size_t automatic = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c == '}' && i + 1 < format.size() && format[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (c != '{') {
      out += c;
    } else if (i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      ++i;
    } else {
      size_t close = format.find('}', i);
      if (close == std::string::npos) throw EvalError("format(): single '{' encountered in format string");
      std::string field = format.substr(i + 1, close - i - 1);
      i = close;
      const Value *value = nullptr;
      if (field.empty()) {
        if (automatic >= arguments.positional.size()) throw EvalError("format(): not enough arguments");
        value = &arguments.positional[automatic++];
      } else if (std::all_of(field.begin(), field.end(),
                             [](char d) { return std::isdigit(static_cast<unsigned char>(d)); })) {
        size_t index = std::stoul(field);
        if (index >= arguments.positional.size()) throw EvalError("format(): no argument " + field);
        value = &arguments.positional[index];
      } else {
        for (const auto &[name, v] : arguments.keyword)
          if (name == field) value = &v;
        if (!value) throw EvalError("format(): no argument named '" + field + "'");
      }
      out += value->str();
    }
  }
  return out;
}

Value stringMethod(const Value &receiver, const std::string &name) {
  const std::string text = receiver.string();
  auto method = [&](auto body) { return Value::function("str." + name, body); };
  const std::string qualified = "str." + name;
  if (name == "strip" || name == "lstrip" || name == "rstrip")
    return method([=](const Arguments &args) {
      ArgumentReader reader(qualified, args, {"chars"});
      return Value(strings::strip(text, optionalString(reader, 0), name != "rstrip", name != "lstrip"));
    });
  if (name == "split" || name == "rsplit")
    return method([=](const Arguments &args) {
      ArgumentReader reader(qualified, args, {"sep", "maxsplit"});
      return stringList(
          strings::split(text, optionalString(reader, 0), reader.integer(1, -1), name == "rsplit"));
    });
  if (name == "splitlines")
    return method([=](const Arguments &args) {
      ArgumentReader reader(qualified, args, {"keepends"});
      return stringList(strings::splitLines(text, reader.boolean(0, false)));
    });
  if (name == "startswith" || name == "endswith")
    return method([=](const Arguments &args) {
      ArgumentReader reader(qualified, args, {"prefix"});
      if (!reader.get(0)) throw EvalError(qualified + "() takes one argument");
      return Value(affixMatches(text, *reader.get(0), name == "startswith", qualified));
    });
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize")
    return method([=](const Arguments &args) {
      ArgumentReader reader(qualified, args, {});
      if (name == "upper") return Value(strings::upper(text));
      if (name == "lower") return Value(strings::lower(text));
      if (name == "title") return Value(strings::title(text));
      return Value(strings::capitalize(text));
    });
  if (name == "replace")
    return method([=](const Arguments &args) {
      ArgumentReader reader(qualified, args, {"old", "new", "count"});
      if (!reader.get(0) || !reader.get(1)) throw EvalError("str.replace() takes at least 2 arguments");
      return Value(strings::replace(text, reader.string(0, ""), reader.string(1, ""), reader.integer(2, -1)));
    });
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count")
    return method([=](const Arguments &args) {
      ArgumentReader reader(qualified, args, {"sub"});
      const std::string needle = reader.string(0, "");
      if (name == "count") return Value(strings::count(text, needle));
      size_t at = name[0] == 'r' ? text.rfind(needle) : text.find(needle);
      if (at == std::string::npos) {
        if (name.find("index") != std::string::npos) throw EvalError(qualified + "(): substring not found");
        return Value(int64_t{-1});
      }
      return Value(strings::codePointCount(std::string_view(text).substr(0, at)));
    });
  if (name == "join")
    return method([=](const Arguments &args) {
      ArgumentReader reader(qualified, args, {"iterable"});
      std::string out;
      bool first = true;
      for (const Value &item : iterate(reader.get(0, Value::list()))) {
        if (!item.isString()) throw EvalError("str.join(): expected str, found " + item.typeName());
        out += (first ? "" : text) + item.string();
        first = false;
      }
      return Value(out);
    });
  if (name == "format") return method([=](const Arguments &args) { return Value(braceFormat(text, args)); });
  if (name == "removeprefix" || name == "removesuffix")
    return method([=](const Arguments &args) {
      ArgumentReader reader(qualified, args, {"affix"});
      const std::string affix = reader.string(0, "");
      bool prefix = name == "removeprefix";
      if (!affixMatches(text, Value(affix), prefix, qualified)) return Value(text);
      return Value(prefix ? text.substr(affix.size()) : text.substr(0, text.size() - affix.size()));
    });
  using Predicate = bool (*)(uint32_t);
  const std::pair<const char *, Predicate> classes[] = {
      {"isspace", strings::isSpace},   {"isdigit", strings::isDigit}, {"isnumeric", strings::isDigit},
      {"isdecimal", strings::isDigit}, {"isalpha", strings::isAlpha}, {"isalnum", strings::isAlnum}};
  for (const auto &[className, predicate] : classes)
    if (name == className)
      return method([=](const Arguments &) { return Value(strings::all(text, predicate)); });
  if (name == "islower") return method([=](const Arguments &) { return Value(strings::isLower(text)); });
  if (name == "isupper") return method([=](const Arguments &) { return Value(strings::isUpper(text)); });
  return Value::undefined("'str object' has no attribute '" + name + "'");
}

Value itemsOf(const Value &mapping) {
  std::vector<Value> items;
  for (const auto &[key, value] : mapping.entries().entries)
    items.push_back(Value::tuple({Value(key), value}));
  return Value::list(std::move(items));
}

Value dictMethod(const Value &receiver, const std::string &name) {
  const std::string qualified = "dict." + name;
  if (name == "items")
    return Value::function(qualified, [=](const Arguments &args) {
      ArgumentReader(qualified, args, {});
      return itemsOf(receiver);
    });
  if (name == "keys" || name == "values")
    return Value::function(qualified, [=](const Arguments &args) {
      ArgumentReader(qualified, args, {});
      std::vector<Value> out;
      for (const auto &[key, value] : receiver.entries().entries)
        out.push_back(name == "keys" ? Value(key) : value);
      return Value::list(std::move(out));
    });
  if (name == "get")
    return Value::function(qualified, [=](const Arguments &args) {
      ArgumentReader reader(qualified, args, {"key", "default"});
      const Value *key = reader.get(0);
      const Value *found = key && key->isString() ? receiver.entries().find(key->string()) : nullptr;
      return found ? *found : reader.get(1, Value::none());
    });
  return Value();
}

const char *const kMutatingMethods[] = {"append", "extend",  "insert", "pop",        "remove", "clear",
                                        "sort",   "reverse", "update", "setdefault", "popitem"};

Value listMethod(const Value &receiver, const std::string &name) {
  const std::string qualified = "list." + name;
  if (name == "index" || name == "count")
    return Value::function(qualified, [=](const Arguments &args) {
      ArgumentReader reader(qualified, args, {"value"});
      Value needle = reader.get(0, Value::none());
      const auto &items = receiver.items();
      if (name == "count") return Value(static_cast<int64_t>(std::count(items.begin(), items.end(), needle)));
      auto it = std::find(items.begin(), items.end(), needle);
      if (it == items.end()) throw EvalError("list.index(): " + needle.repr() + " is not in list");
      return Value(static_cast<int64_t>(it - items.begin()));
    });
  return Value();
}

} // namespace

Value getAttribute(const Value &object, const std::string &name) {
  switch (object.kind()) {
  case Value::Kind::Undefined:
    throw EvalError(object.undefinedDescription());
  case Value::Kind::String:
    return stringMethod(object, name);
  case Value::Kind::Dict: {
    if (Value method = dictMethod(object, name); !method.isUndefined()) return method;
    if (const Value *found = object.entries().find(name)) return *found;
    break;
  }
  case Value::Kind::Namespace:
    if (const Value *found = object.entries().find(name)) return *found;
    return Value::undefined("the namespace has no attribute '" + name + "'");
  case Value::Kind::List:
    if (Value method = listMethod(object, name); !method.isUndefined()) return method;
    break;
  default:
    break;
  }
  for (const char *mutating : kMutatingMethods)
    if (name == mutating && (object.isList() || object.kind() == Value::Kind::Dict))
      throw EvalError("'" + object.typeName() + "." + name +
                      "' cannot be called: chat templates run in an immutable sandbox, as in transformers");
  return Value::undefined("'" + object.typeName() + " object' has no attribute '" + name + "'");
}

Value getItem(const Value &object, const Value &key) {
  switch (object.kind()) {
  case Value::Kind::Undefined:
    throw EvalError(object.undefinedDescription());
  case Value::Kind::List:
  case Value::Kind::String:
    if (key.kind() == Value::Kind::Int || key.kind() == Value::Kind::Bool) {
      int64_t index = key.integer();
      if (object.isString()) {
        std::vector<std::string> chars = strings::characters(object.string());
        int64_t n = static_cast<int64_t>(chars.size());
        if (index < 0) index += n;
        if (index < 0 || index >= n) return Value::undefined("string index out of range");
        return Value(chars[static_cast<size_t>(index)]);
      }
      int64_t n = static_cast<int64_t>(object.items().size());
      if (index < 0) index += n;
      if (index < 0 || index >= n) return Value::undefined(object.typeName() + " index out of range");
      return object.items()[static_cast<size_t>(index)];
    }
    break;
  case Value::Kind::Dict:
  case Value::Kind::Namespace:
    if (key.isString()) {
      if (const Value *found = object.entries().find(key.string())) return *found;
      if (object.kind() == Value::Kind::Namespace)
        return Value::undefined("the namespace has no attribute '" + key.string() + "'");
    } else {
      return Value::undefined("'dict object' has no attribute " + key.repr());
    }
    break;
  default:
    break;
  }
  if (key.isString()) return getAttribute(object, key.string());
  return Value::undefined("'" + object.typeName() + " object' has no item " + key.repr());
}

Value slice(const Value &object, std::optional<int64_t> start, std::optional<int64_t> stop,
            std::optional<int64_t> step) {
  if (object.isUndefined()) throw EvalError(object.undefinedDescription());
  if (!object.isList() && !object.isString())
    throw EvalError("'" + object.typeName() + "' object is not sliceable");
  std::vector<std::string> chars;
  if (object.isString()) chars = strings::characters(object.string());
  int64_t n = static_cast<int64_t>(object.isString() ? chars.size() : object.items().size());
  int64_t s = step.value_or(1);
  if (s == 0) throw EvalError("slice step cannot be zero");
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](std::optional<int64_t> index, int64_t fallback) {
    if (!index) return fallback;
    int64_t i = *index;
    if (i < 0) {
      i += n;
      if (i < 0) i = s < 0 ? -1 : 0;
    } else if (i >= n) {
      i = s < 0 ? n - 1 : n;
    }
    return i;
  };
  int64_t begin = adjust(start, s < 0 ? n - 1 : 0), end = adjust(stop, s < 0 ? -1 : n);
  std::vector<Value> items;
  std::string text;
  for (int64_t i = begin; s > 0 ? i < end : i > end; i += s) {
    if (object.isString())
      text += chars[static_cast<size_t>(i)];
    else
      items.push_back(object.items()[static_cast<size_t>(i)]);
  }
  if (object.isString()) return Value(text);
  return object.isTuple() ? Value::tuple(std::move(items)) : Value::list(std::move(items));
}

std::vector<Value> iterate(const Value &value) {
  switch (value.kind()) {
  case Value::Kind::Undefined:
    return {};
  case Value::Kind::List:
    return value.items();
  case Value::Kind::Dict: {
    std::vector<Value> keys;
    for (const auto &[key, item] : value.entries().entries) keys.emplace_back(key);
    return keys;
  }
  case Value::Kind::String: {
    std::vector<Value> chars;
    for (std::string &c : strings::characters(value.string())) chars.emplace_back(std::move(c));
    return chars;
  }
  default:
    throw EvalError("'" + value.typeName() + "' object is not iterable");
  }
}

bool contains(const Value &haystack, const Value &needle) {
  if (haystack.isString()) {
    if (!needle.isString())
      throw EvalError("'in <string>' requires string as left operand, not " + needle.typeName());
    return haystack.string().find(needle.string()) != std::string::npos;
  }
  if (haystack.isMapping()) return needle.isString() && haystack.entries().find(needle.string());
  std::vector<Value> items = iterate(haystack);
  return std::find(items.begin(), items.end(), needle) != items.end();
}

int64_t length(const Value &value) {
  switch (value.kind()) {
  case Value::Kind::Undefined:
    return 0;
  case Value::Kind::String:
    return strings::codePointCount(value.string());
  case Value::Kind::List:
    return static_cast<int64_t>(value.items().size());
  case Value::Kind::Dict:
  case Value::Kind::Namespace:
    return static_cast<int64_t>(value.entries().entries.size());
  default:
    throw EvalError("object of type '" + value.typeName() + "' has no len()");
  }
}

std::string percentFormat(const std::string &format, const Value &arguments) {
  std::vector<Value> values = arguments.isTuple() ? arguments.items() : std::vector<Value>{arguments};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    size_t specStart = i;
    ++i;
    while (i < format.size() && std::string("-+ 0#").find(format[i]) != std::string::npos) ++i;
    while (i < format.size() && std::isdigit(static_cast<unsigned char>(format[i]))) ++i;
    if (i < format.size() && format[i] == '.') {
      ++i;
      while (i < format.size() && std::isdigit(static_cast<unsigned char>(format[i]))) ++i;
    }
    if (i >= format.size()) throw EvalError("incomplete format");
    char type = format[i];
    if (type == '%') {
      out += '%';
      continue;
    }
    if (next >= values.size()) throw EvalError("not enough arguments for format string");
    const Value &value = values[next++];
    std::string spec = format.substr(specStart, i - specStart);
    char buffer[512];
    if (type == 's' || type == 'r') {
      // By hand rather than snprintf: the text may be longer than any buffer.
      std::string text = type == 's' ? value.str() : value.repr();
      size_t dot = spec.find('.');
      std::string widthDigits = spec.substr(1, dot == std::string::npos ? std::string::npos : dot - 1);
      widthDigits.erase(0, widthDigits.find_first_not_of("-+ 0#"));
      if (dot != std::string::npos) {
        std::vector<std::string> chars = strings::characters(text);
        size_t precision = dot + 1 < spec.size() ? std::stoul(spec.substr(dot + 1)) : 0;
        if (chars.size() > precision) {
          text.clear();
          for (size_t c = 0; c < precision; ++c) text += chars[c];
        }
      }
      int64_t width = widthDigits.empty() ? 0 : std::stoll(widthDigits);
      int64_t padding = std::max<int64_t>(0, width - strings::codePointCount(text));
      bool leftAlign = spec.find('-') != std::string::npos;
      out += leftAlign ? text + std::string(padding, ' ') : std::string(padding, ' ') + text;
    } else if (type == 'd' || type == 'i' || type == 'x' || type == 'X' || type == 'o') {
      if (!value.isNumber())
        throw EvalError("%" + std::string(1, type) + " format: a number is required, not " +
                        value.typeName());
      std::snprintf(buffer, sizeof buffer, (spec + "ll" + (type == 'i' ? 'd' : type)).c_str(),
                    static_cast<long long>(value.kind() == Value::Kind::Float
                                               ? static_cast<int64_t>(value.number())
                                               : value.integer()));
      out += buffer;
    } else if (type == 'f' || type == 'F' || type == 'e' || type == 'E' || type == 'g' || type == 'G') {
      if (!value.isNumber())
        throw EvalError("%" + std::string(1, type) + " format: a number is required, not " +
                        value.typeName());
      std::snprintf(buffer, sizeof buffer, (spec + type).c_str(), value.number());
      out += buffer;
    } else {
      throw EvalError(std::string("unsupported format character '") + type + "'");
    }
  }
  if (next < values.size()) throw EvalError("not all arguments converted during string formatting");
  return out;
}

} // namespace gerbil::chat
