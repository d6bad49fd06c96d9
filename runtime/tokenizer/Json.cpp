#include "runtime/tokenizer/Json.h"

#include "runtime/tokenizer/Tokenizer.h"
#include "runtime/tokenizer/Unicode.h"

#include <cmath>
#include <limits>

namespace gerbil::tokenizer::detail {

namespace {

const char *kindOf(const nlohmann::json &v) {
  switch (v.type()) {
  case nlohmann::json::value_t::null:
    return "null";
  case nlohmann::json::value_t::object:
    return "an object";
  case nlohmann::json::value_t::array:
    return "an array";
  case nlohmann::json::value_t::string:
    return "a string";
  case nlohmann::json::value_t::boolean:
    return "a boolean";
  case nlohmann::json::value_t::number_float:
    return "a number";
  default:
    return "an integer";
  }
}

} // namespace

std::string JsonRef::childPath(const std::string &key) const {
  return path_.empty() ? key : path_ + "." + key;
}

void JsonRef::fail(const std::string &problem) const {
  if (path_.empty()) throw TokenizerError(*file_ + ": " + problem);
  throw TokenizerError(*file_ + ": " + path_ + " " + problem);
}

void JsonRef::requireObject() const {
  if (!value_->is_object()) fail(std::string("is ") + kindOf(*value_) + ", not an object");
}

JsonRef JsonRef::at(const char *key) const {
  requireObject();
  auto it = value_->find(key);
  if (it == value_->end() || it->is_null()) JsonRef(*value_, *file_, childPath(key)).fail("is missing");
  return JsonRef(*it, *file_, childPath(key));
}

std::optional<JsonRef> JsonRef::find(const char *key) const {
  requireObject();
  auto it = value_->find(key);
  if (it == value_->end() || it->is_null()) return std::nullopt;
  return JsonRef(*it, *file_, childPath(key));
}

size_t JsonRef::arraySize() const {
  if (!value_->is_array()) fail(std::string("is ") + kindOf(*value_) + ", not an array");
  return value_->size();
}

JsonRef JsonRef::item(size_t index) const {
  if (index >= arraySize()) fail("has no element " + std::to_string(index));
  return JsonRef((*value_)[index], *file_, path_ + "[" + std::to_string(index) + "]");
}

std::string JsonRef::string() const {
  if (!value_->is_string()) fail(std::string("is ") + kindOf(*value_) + ", not a string");
  return value_->get<std::string>();
}

bool JsonRef::boolean() const {
  if (!value_->is_boolean()) fail(std::string("is ") + kindOf(*value_) + ", not a boolean");
  return value_->get<bool>();
}

int64_t JsonRef::integer() const {
  if (value_->is_number_integer()) {
    if (value_->is_number_unsigned() &&
        value_->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      fail("is out of range");
    return value_->get<int64_t>();
  }
  if (value_->is_number_float()) {
    double d = value_->get<double>();
    if (std::floor(d) == d && std::fabs(d) < 9.0e15) return static_cast<int64_t>(d);
  }
  fail(std::string("is ") + kindOf(*value_) + ", not an integer");
}

double JsonRef::number() const {
  if (!value_->is_number()) fail(std::string("is ") + kindOf(*value_) + ", not a number");
  return value_->get<double>();
}

int32_t JsonRef::tokenId() const {
  int64_t v = integer();
  if (v < 0 || v > std::numeric_limits<int32_t>::max()) fail("is " + std::to_string(v) + ", not a token id");
  return static_cast<int32_t>(v);
}

char32_t JsonRef::character() const {
  std::string s = string();
  if (!isValidUtf8(s)) fail("is not valid UTF-8");
  size_t pos = 0;
  char32_t c = s.empty() ? 0 : decodeUtf8(s, pos);
  if (s.empty() || pos != s.size()) fail("is '" + s + "', not a single character");
  return c;
}

std::string JsonRef::stringOr(const char *key, const std::string &fallback) const {
  auto v = find(key);
  return v ? v->string() : fallback;
}

bool JsonRef::booleanOr(const char *key, bool fallback) const {
  auto v = find(key);
  return v ? v->boolean() : fallback;
}

std::string JsonRef::type(const std::optional<std::string> &fallback) const {
  requireObject();
  if (auto t = find("type")) return t->string();
  if (fallback) return *fallback;
  at("type"); // fails: "... .type is missing"
  return {};
}

} // namespace gerbil::tokenizer::detail
