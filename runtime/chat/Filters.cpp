// Jinja2's builtin filters and tests (jinja2/filters.py, jinja2/tests.py), with transformers' tojson.
#include "runtime/chat/Builtins.h"

#include "runtime/chat/Strings.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

namespace gerbil::chat {
namespace {

using FilterFn = Value (*)(const Value &input, const Arguments &arguments);
using TestFn = bool (*)(const Value &input, const Arguments &arguments);

std::string asText(const Value &input) {
  return input.str();
}

// Jinja's attribute= paths: "a.b.0".
Value attributePath(const Value &item, const std::string &path) {
  Value current = item;
  for (const std::string &part : strings::split(path, std::string("."), -1, false)) {
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c));
    });
    current = digits ? getItem(current, Value(static_cast<int64_t>(std::stoll(part))))
                     : getItem(current, Value(part));
  }
  return current;
}

// Sort keys that compare strings without case unless case_sensitive, as Jinja's sort / unique / min / max do.
Value sortKey(const Value &item, bool caseSensitive, const Value *attribute) {
  Value key = attribute && !attribute->isNone() ? attributePath(item, attribute->str()) : item;
  if (!caseSensitive && key.isString()) return Value(strings::lower(key.string()));
  return key;
}

Arguments dropFirst(const Arguments &arguments, size_t count) {
  Arguments rest;
  rest.positional.assign(arguments.positional.begin() +
                             static_cast<long>(std::min(count, arguments.positional.size())),
                         arguments.positional.end());
  rest.keyword = arguments.keyword;
  return rest;
}

std::string htmlEscape(const std::string &text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&#34;";
      break;
    case '\'':
      out += "&#39;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

Value toNumber(const Value &input, bool integer, const Value &fallback, int64_t base) {
  if (input.kind() == Value::Kind::Int || input.kind() == Value::Kind::Bool)
    return integer ? Value(input.integer()) : Value(input.number());
  if (input.kind() == Value::Kind::Float)
    return integer ? Value(static_cast<int64_t>(std::trunc(input.number()))) : input;
  if (input.isString()) {
    std::string text = strings::strip(input.string(), std::nullopt, true, true);
    try {
      size_t used = 0;
      if (integer) {
        int64_t v = std::stoll(text, &used, static_cast<int>(base));
        if (used == text.size()) return Value(v);
        double d = std::stod(text, &used); // Jinja's int filter accepts "3.7"
        if (used == text.size()) return Value(static_cast<int64_t>(std::trunc(d)));
      } else {
        double d = std::stod(text, &used);
        if (used == text.size()) return Value(d);
      }
    } catch (const std::exception &) {
    }
  }
  return fallback;
}

Value filterSelect(const Value &input, const Arguments &arguments, bool byAttribute, bool keep) {
  size_t skip = byAttribute ? 2 : 1;
  const Value *attribute = byAttribute && !arguments.positional.empty() ? &arguments.positional[0] : nullptr;
  if (byAttribute && !attribute) throw EvalError("selectattr / rejectattr need an attribute name");
  const Value *test = arguments.positional.size() >= skip ? &arguments.positional[skip - 1] : nullptr;
  if (test && !test->isString()) throw EvalError("the test of select / reject must be a test name");
  if (test && !isKnownTest(test->string())) throw EvalError("no test named '" + test->string() + "'");
  Arguments testArguments = dropFirst(arguments, skip);
  std::vector<Value> out;
  for (const Value &item : iterate(input)) {
    Value subject = attribute ? attributePath(item, attribute->str()) : item;
    bool passed = test ? applyTest(test->string(), subject, testArguments) : subject.truthy();
    if (passed == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

const std::map<std::string, FilterFn, std::less<>> &filters() {
  static const std::map<std::string, FilterFn, std::less<>> table = {
      {"abs",
       [](const Value &in, const Arguments &) {
         if (!in.isNumber()) throw EvalError("bad operand type for abs(): '" + in.typeName() + "'");
         return in.kind() == Value::Kind::Float ? Value(std::fabs(in.number())) : Value(static_cast<int64_t>(std::llabs(in.integer())));
       }},
      {"attr",
       [](const Value &in, const Arguments &args) {
         return getAttribute(in, ArgumentReader("attr", args, {"name"}).string(0, ""));
       }},
      {"capitalize", [](const Value &in, const Arguments &) { return Value(strings::capitalize(asText(in))); }},
      {"center",
       [](const Value &in, const Arguments &args) {
         int64_t width = ArgumentReader("center", args, {"width"}).integer(0, 80);
         std::string text = asText(in);
         int64_t padding = std::max<int64_t>(0, width - strings::codePointCount(text));
         // Python's str.center puts the odd space on the right when the padding is odd and the width even.
         int64_t left = padding / 2 + (padding & width & 1);
         return Value(std::string(left, ' ') + text + std::string(padding - left, ' '));
       }},
      {"count", [](const Value &in, const Arguments &) { return Value(length(in)); }},
      {"default",
       [](const Value &in, const Arguments &args) {
         ArgumentReader reader("default", args, {"default_value", "boolean"});
         bool useDefault = in.isUndefined() || (reader.boolean(1, false) && !in.truthy());
         return useDefault ? reader.get(0, Value("")) : in;
       }},
      {"dictsort",
       [](const Value &in, const Arguments &args) {
         ArgumentReader reader("dictsort", args, {"case_sensitive", "by", "reverse"});
         if (!in.isMapping()) throw EvalError("dictsort: expected a dict, got " + in.typeName());
         bool byValue = reader.string(1, "key") == "value";
         bool caseSensitive = reader.boolean(0, false);
         std::vector<Value> items = getAttribute(in, "items").callable().call({}).items();
         std::stable_sort(items.begin(), items.end(), [&](const Value &a, const Value &b) {
           return compareValues(sortKey(a.items()[byValue], caseSensitive, nullptr),
                                sortKey(b.items()[byValue], caseSensitive, nullptr)) < 0;
         });
         if (reader.boolean(2, false)) std::reverse(items.begin(), items.end());
         return Value::list(std::move(items));
       }},
      {"escape", [](const Value &in, const Arguments &) { return Value(htmlEscape(asText(in))); }},
      {"first",
       [](const Value &in, const Arguments &) {
         std::vector<Value> items = iterate(in);
         return items.empty() ? Value::undefined("first: the sequence is empty") : items.front();
       }},
      {"float",
       [](const Value &in, const Arguments &args) {
         return toNumber(in, false, ArgumentReader("float", args, {"default"}).get(0, Value(0.0)), 10);
       }},
      {"format",
       [](const Value &in, const Arguments &args) {
         if (!args.keyword.empty()) throw EvalError("format: keyword arguments are not supported");
         return Value(percentFormat(asText(in), Value::tuple(args.positional)));
       }},
      {"indent",
       [](const Value &in, const Arguments &args) {
         ArgumentReader reader("indent", args, {"width", "first", "blank"});
         const Value *width = reader.get(0);
         std::string pad = width && width->isString() ? width->string() : std::string(reader.integer(0, 4), ' ');
         bool first = reader.boolean(1, false), blank = reader.boolean(2, false);
         std::vector<std::string> lines = strings::split(asText(in), std::string("\n"), -1, false);
         std::string out;
         for (size_t i = 0; i < lines.size(); ++i) {
           if (i) out += '\n';
           bool indentThis = (i > 0 || first) && (blank || !lines[i].empty());
           out += (indentThis ? pad : "") + lines[i];
         }
         return Value(out);
       }},
      {"int",
       [](const Value &in, const Arguments &args) {
         ArgumentReader reader("int", args, {"default", "base"});
         return toNumber(in, true, reader.get(0, Value(int64_t{0})), reader.integer(1, 10));
       }},
      {"items",
       [](const Value &in, const Arguments &) {
         if (in.isUndefined()) return Value::list();
         if (!in.isMapping()) throw EvalError("items: expected a dict, got " + in.typeName());
         return getAttribute(in, "items").callable().call({});
       }},
      {"join",
       [](const Value &in, const Arguments &args) {
         ArgumentReader reader("join", args, {"d", "attribute"});
         std::string separator = reader.get(0, Value("")).str(), out;
         const Value *attribute = reader.get(1);
         bool first = true;
         for (const Value &item : iterate(in)) {
           out += (first ? "" : separator) + (attribute ? attributePath(item, attribute->str()) : item).str();
           first = false;
         }
         return Value(out);
       }},
      {"last",
       [](const Value &in, const Arguments &) {
         std::vector<Value> items = iterate(in);
         return items.empty() ? Value::undefined("last: the sequence is empty") : items.back();
       }},
      {"length", [](const Value &in, const Arguments &) { return Value(length(in)); }},
      {"list", [](const Value &in, const Arguments &) { return Value::list(iterate(in)); }},
      {"lower", [](const Value &in, const Arguments &) { return Value(strings::lower(asText(in))); }},
      {"map",
       [](const Value &in, const Arguments &args) {
         std::vector<Value> out;
         const Value *attribute = nullptr, *fallback = nullptr;
         for (const auto &[name, value] : args.keyword) {
           if (name == "attribute") attribute = &value;
           else if (name == "default") fallback = &value;
         }
         if (attribute) {
           for (const Value &item : iterate(in)) {
             Value mapped = attributePath(item, attribute->str());
             out.push_back(mapped.isUndefined() && fallback ? *fallback : mapped);
           }
           return Value::list(std::move(out));
         }
         if (args.positional.empty() || !args.positional[0].isString())
           throw EvalError("map: give a filter name or attribute=");
         const std::string &filter = args.positional[0].string();
         if (!isKnownFilter(filter)) throw EvalError("no filter named '" + filter + "'");
         Arguments rest = dropFirst(args, 1);
         for (const Value &item : iterate(in)) out.push_back(applyFilter(filter, item, rest));
         return Value::list(std::move(out));
       }},
      {"max",
       [](const Value &in, const Arguments &args) {
         ArgumentReader reader("max", args, {"case_sensitive", "attribute"});
         std::vector<Value> items = iterate(in);
         if (items.empty()) return Value::undefined("max: the sequence is empty");
         return *std::max_element(items.begin(), items.end(), [&](const Value &a, const Value &b) {
           return compareValues(sortKey(a, reader.boolean(0, false), reader.get(1)),
                                sortKey(b, reader.boolean(0, false), reader.get(1))) < 0;
         });
       }},
      {"min",
       [](const Value &in, const Arguments &args) {
         ArgumentReader reader("min", args, {"case_sensitive", "attribute"});
         std::vector<Value> items = iterate(in);
         if (items.empty()) return Value::undefined("min: the sequence is empty");
         return *std::min_element(items.begin(), items.end(), [&](const Value &a, const Value &b) {
           return compareValues(sortKey(a, reader.boolean(0, false), reader.get(1)),
                                sortKey(b, reader.boolean(0, false), reader.get(1))) < 0;
         });
       }},
      {"reject", [](const Value &in, const Arguments &args) { return filterSelect(in, args, false, false); }},
      {"rejectattr", [](const Value &in, const Arguments &args) { return filterSelect(in, args, true, false); }},
      {"replace",
       [](const Value &in, const Arguments &args) {
         ArgumentReader reader("replace", args, {"old", "new", "count"});
         return Value(strings::replace(asText(in), reader.get(0, Value("")).str(), reader.get(1, Value("")).str(),
                                       reader.integer(2, -1)));
       }},
      {"reverse",
       [](const Value &in, const Arguments &) {
         if (in.isString()) {
           std::vector<std::string> chars = strings::characters(in.string());
           std::string out;
           for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
           return Value(out);
         }
         std::vector<Value> items = iterate(in);
         std::reverse(items.begin(), items.end());
         return Value::list(std::move(items));
       }},
      {"round",
       [](const Value &in, const Arguments &args) {
         ArgumentReader reader("round", args, {"precision", "method"});
         if (!in.isNumber()) throw EvalError("round: expected a number, got " + in.typeName());
         double scale = std::pow(10.0, static_cast<double>(reader.integer(0, 0)));
         const std::string method = reader.string(1, "common");
         double x = in.number() * scale;
         double rounded = method == "ceil"    ? std::ceil(x)
                          : method == "floor" ? std::floor(x)
                          : method == "common" ? std::nearbyint(x)  // Python's round(): half to even
                                               : throw EvalError("round: method must be common, ceil or floor");
         return Value(rounded / scale);
       }},
      {"safe", [](const Value &in, const Arguments &) { return in; }},
      {"select", [](const Value &in, const Arguments &args) { return filterSelect(in, args, false, true); }},
      {"selectattr", [](const Value &in, const Arguments &args) { return filterSelect(in, args, true, true); }},
      {"sort",
       [](const Value &in, const Arguments &args) {
         ArgumentReader reader("sort", args, {"reverse", "case_sensitive", "attribute"});
         std::vector<Value> items = iterate(in);
         bool reverse = reader.boolean(0, false), caseSensitive = reader.boolean(1, false);
         std::stable_sort(items.begin(), items.end(), [&](const Value &a, const Value &b) {
           int order = compareValues(sortKey(a, caseSensitive, reader.get(2)), sortKey(b, caseSensitive, reader.get(2)));
           return reverse ? order > 0 : order < 0;
         });
         return Value::list(std::move(items));
       }},
      {"string", [](const Value &in, const Arguments &) { return Value(asText(in)); }},
      {"sum",
       [](const Value &in, const Arguments &args) {
         ArgumentReader reader("sum", args, {"attribute", "start"});
         Value total = reader.get(1, Value(int64_t{0}));
         for (const Value &item : iterate(in)) {
           Value x = reader.get(0) ? attributePath(item, reader.get(0)->str()) : item;
           if (!x.isNumber() || !total.isNumber()) throw EvalError("sum: the items must be numbers");
           bool integral = x.kind() != Value::Kind::Float && total.kind() != Value::Kind::Float;
           total = integral ? Value(total.integer() + x.integer()) : Value(total.number() + x.number());
         }
         return total;
       }},
      {"title",
       [](const Value &in, const Arguments &) {
         // Jinja's title: words begin after whitespace, '-', or an opening bracket.
         std::string text = asText(in), out;
         bool wordStart = true;
         for (const std::string &c : strings::characters(text)) {
           bool boundary = c.size() == 1 && (strings::isSpace(static_cast<unsigned char>(c[0])) ||
                                             std::string("-({[<").find(c[0]) != std::string::npos);
           out += boundary ? c : wordStart ? strings::upper(c) : strings::lower(c);
           wordStart = boundary;
         }
         return Value(out);
       }},
      {"tojson",
       [](const Value &in, const Arguments &args) {
         ArgumentReader reader("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
         if (reader.boolean(0, false)) throw EvalError("tojson: ensure_ascii=true is not supported");
         if (reader.get(2) && !reader.get(2)->isNone()) throw EvalError("tojson: separators= is not supported");
         return Value(in.toJson(static_cast<int>(reader.integer(1, -1)), reader.boolean(3, false)));
       }},
      {"trim",
       [](const Value &in, const Arguments &args) {
         const Value *chars = ArgumentReader("trim", args, {"chars"}).get(0);
         std::optional<std::string> set;
         if (chars && !chars->isNone()) set = chars->str();
         return Value(strings::strip(asText(in), set, true, true));
       }},
      {"unique",
       [](const Value &in, const Arguments &args) {
         ArgumentReader reader("unique", args, {"case_sensitive", "attribute"});
         std::vector<Value> out, seen;
         for (const Value &item : iterate(in)) {
           Value key = sortKey(item, reader.boolean(0, false), reader.get(1));
           if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
           seen.push_back(key);
           out.push_back(item);
         }
         return Value::list(std::move(out));
       }},
      {"upper", [](const Value &in, const Arguments &) { return Value(strings::upper(asText(in))); }},
      {"wordcount",
       [](const Value &in, const Arguments &) {
         return Value(static_cast<int64_t>(strings::split(asText(in), std::nullopt, -1, false).size()));
       }},
  };
  return table;
}

bool compareTest(const Value &in, const Arguments &args, const char *name, bool (*accept)(int)) {
  const Value *other = ArgumentReader(name, args, {"other"}).get(0);
  if (!other) throw EvalError(std::string("the test '") + name + "' needs a value to compare with");
  return accept(compareValues(in, *other));
}

const std::map<std::string, TestFn, std::less<>> &tests() {
  static const std::map<std::string, TestFn, std::less<>> table = {
      {"boolean", [](const Value &in, const Arguments &) { return in.kind() == Value::Kind::Bool; }},
      {"callable", [](const Value &in, const Arguments &) { return in.isCallable(); }},
      {"defined", [](const Value &in, const Arguments &) { return !in.isUndefined(); }},
      {"divisibleby",
       [](const Value &in, const Arguments &args) {
         int64_t divisor = ArgumentReader("divisibleby", args, {"num"}).integer(0, 0);
         if (divisor == 0) throw EvalError("divisibleby: division by zero");
         return in.isNumber() && in.integer() % divisor == 0;
       }},
      {"eq",
       [](const Value &in, const Arguments &args) {
         return in == ArgumentReader("eq", args, {"other"}).get(0, Value());
       }},
      {"escaped", [](const Value &, const Arguments &) { return false; }},
      {"even", [](const Value &in, const Arguments &) { return in.isNumber() && in.integer() % 2 == 0; }},
      {"false",
       [](const Value &in, const Arguments &) { return in.kind() == Value::Kind::Bool && !in.boolean(); }},
      {"float", [](const Value &in, const Arguments &) { return in.kind() == Value::Kind::Float; }},
      {"ge", [](const Value &in,
                const Arguments &args) { return compareTest(in, args, "ge", [](int c) { return c >= 0; }); }},
      {"gt", [](const Value &in,
                const Arguments &args) { return compareTest(in, args, "gt", [](int c) { return c > 0; }); }},
      {"in",
       [](const Value &in, const Arguments &args) {
         return contains(ArgumentReader("in", args, {"seq"}).get(0, Value::list()), in);
       }},
      {"integer", [](const Value &in, const Arguments &) { return in.kind() == Value::Kind::Int; }},
      {"iterable",
       [](const Value &in, const Arguments &) { return in.isList() || in.isMapping() || in.isString(); }},
      {"le", [](const Value &in,
                const Arguments &args) { return compareTest(in, args, "le", [](int c) { return c <= 0; }); }},
      {"lower",
       [](const Value &in, const Arguments &) { return in.isString() && strings::isLower(in.string()); }},
      {"lt", [](const Value &in,
                const Arguments &args) { return compareTest(in, args, "lt", [](int c) { return c < 0; }); }},
      {"mapping", [](const Value &in, const Arguments &) { return in.kind() == Value::Kind::Dict; }},
      {"ne",
       [](const Value &in, const Arguments &args) {
         return !(in == ArgumentReader("ne", args, {"other"}).get(0, Value()));
       }},
      {"none", [](const Value &in, const Arguments &) { return in.isNone(); }},
      {"number", [](const Value &in, const Arguments &) { return in.isNumber(); }},
      {"odd", [](const Value &in, const Arguments &) { return in.isNumber() && in.integer() % 2 != 0; }},
      {"sameas",
       [](const Value &in, const Arguments &args) {
         Value other = ArgumentReader("sameas", args, {"other"}).get(0, Value());
         return in.kind() == other.kind() && in == other;
       }},
      {"sequence",
       [](const Value &in, const Arguments &) { return in.isList() || in.isMapping() || in.isString(); }},
      {"string", [](const Value &in, const Arguments &) { return in.isString(); }},
      {"true",
       [](const Value &in, const Arguments &) { return in.kind() == Value::Kind::Bool && in.boolean(); }},
      {"undefined", [](const Value &in, const Arguments &) { return in.isUndefined(); }},
      {"upper",
       [](const Value &in, const Arguments &) { return in.isString() && strings::isUpper(in.string()); }},
  };
  return table;
}

// Jinja's other names for the same filters and tests.
std::string_view canonicalFilter(std::string_view name) {
  if (name == "d") return "default";
  if (name == "e" || name == "forceescape") return "escape";
  return name;
}

std::string_view canonicalTest(std::string_view name) {
  if (name == "==" || name == "equalto") return "eq";
  if (name == "!=") return "ne";
  if (name == "<" || name == "lessthan") return "lt";
  if (name == "<=") return "le";
  if (name == ">" || name == "greaterthan") return "gt";
  if (name == ">=") return "ge";
  return name;
}

} // namespace

bool isKnownFilter(std::string_view name) {
  return filters().count(canonicalFilter(name)) != 0;
}
bool isKnownTest(std::string_view name) {
  return tests().count(canonicalTest(name)) != 0;
}

Value applyFilter(const std::string &name, const Value &input, const Arguments &arguments) {
  auto it = filters().find(canonicalFilter(name));
  if (it == filters().end()) throw EvalError("no filter named '" + name + "'");
  // Jinja's default Undefined prints as "" and iterates as nothing, so most filters accept it; those that
  // need a number, an attribute or JSON fail as in Jinja.
  static const std::string_view strict[] = {"abs", "round", "attr", "tojson", "dictsort"};
  if (input.isUndefined() &&
      std::find(std::begin(strict), std::end(strict), canonicalFilter(name)) != std::end(strict))
    throw EvalError(input.undefinedDescription());
  return it->second(input, arguments);
}

bool applyTest(const std::string &name, const Value &input, const Arguments &arguments) {
  auto it = tests().find(canonicalTest(name));
  if (it == tests().end()) throw EvalError("no test named '" + name + "'");
  return it->second(input, arguments);
}

} // namespace gerbil::chat
