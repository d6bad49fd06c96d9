// A JSON value together with its file name and its path inside the file ("model.merges[12]"), so that every
// loading error can say exactly which key is wrong.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace gerbil::tokenizer::detail {

class JsonRef {
public:
  JsonRef(const nlohmann::json &value, const std::string &file, std::string path = "")
      : value_(&value), file_(&file), path_(std::move(path)) {}

  const nlohmann::json &value() const { return *value_; }
  const std::string &path() const { return path_; }
  const std::string &file() const { return *file_; }
  bool isNull() const { return value_->is_null(); }
  bool isString() const { return value_->is_string(); }
  bool isArray() const { return value_->is_array(); }
  bool isObject() const { return value_->is_object(); }

  // A member that must be there (and not null).
  JsonRef at(const char *key) const;
  // A member that may be absent or null.
  std::optional<JsonRef> find(const char *key) const;
  JsonRef item(size_t index) const;
  size_t arraySize() const; // fails unless an array

  std::string string() const;
  bool boolean() const;
  int64_t integer() const;
  double number() const;
  int32_t tokenId() const;    // an integer in [0, INT32_MAX]
  char32_t character() const; // a string of exactly one character

  std::string stringOr(const char *key, const std::string &fallback) const;
  bool booleanOr(const char *key, bool fallback) const;
  // The "type" member (or `fallback` when absent).
  std::string type(const std::optional<std::string> &fallback = std::nullopt) const;

  void requireObject() const;
  // "<file>: <path> <problem>"; at the top level, "<file>: <problem>".
  [[noreturn]] void fail(const std::string &problem) const;

private:
  std::string childPath(const std::string &key) const;
  const nlohmann::json *value_;
  const std::string *file_;
  std::string path_;
};

} // namespace gerbil::tokenizer::detail
