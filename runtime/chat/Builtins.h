// What Jinja2 and Python give a chat template for free: filters, tests, attribute and item access (with the
// methods of str, dict and list), slicing and iteration. Errors are EvalError; the interpreter adds the line.
#pragma once

#include "runtime/chat/Value.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gerbil::chat {

bool isKnownFilter(std::string_view name);
bool isKnownTest(std::string_view name);
Value applyFilter(const std::string &name, const Value &input, const Arguments &arguments);
bool applyTest(const std::string &name, const Value &input, const Arguments &arguments);

// object.name: a method of str / dict / list first, then the item (Jinja's getattr).
Value getAttribute(const Value &object, const std::string &name);
// object[key]: the item first, then for a string key the attribute (Jinja's getitem). Out of range or
// missing is undefined, as in Jinja.
Value getItem(const Value &object, const Value &key);
Value slice(const Value &object, std::optional<int64_t> start, std::optional<int64_t> stop,
            std::optional<int64_t> step);
// What `for x in value` visits: list items, dict keys, the characters of a string; nothing for undefined.
std::vector<Value> iterate(const Value &value);
// `needle in haystack`.
bool contains(const Value &haystack, const Value &needle);
// Python's len(): code points for strings.
int64_t length(const Value &value);

// Python's `format % arguments` for %s %r %d %i %f %x %% with flags, width and precision.
std::string percentFormat(const std::string &format, const Value &arguments);

// Reads the arguments of a builtin by position or keyword, naming the builtin in its errors.
class ArgumentReader {
public:
  ArgumentReader(std::string function, const Arguments &arguments, std::vector<std::string> parameters);
  // The i-th parameter, or nullptr when it was not passed.
  const Value *get(size_t index) const;
  Value get(size_t index, Value fallback) const;
  std::string string(size_t index, const std::string &fallback) const;
  int64_t integer(size_t index, int64_t fallback) const;
  bool boolean(size_t index, bool fallback) const;

private:
  std::string function_;
  std::vector<std::string> parameters_;
  std::vector<const Value *> values_;
};

} // namespace gerbil::chat
