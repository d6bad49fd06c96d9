#include "compiler/frontend/ConfigReader.h"

#include "runtime/support/JsonExcerpt.h"

#include <cmath>

namespace gerbil {

namespace {

// An integer, or a float that holds one exactly (some tools write 4096.0).
std::optional<int64_t> asInteger(const nlohmann::json &value) {
  if (value.is_number_integer()) {
    if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      return std::nullopt;
    return value.get<int64_t>();
  }
  if (value.is_number_float()) {
    double number = value.get<double>();
    if (std::isfinite(number) && std::floor(number) == number && std::fabs(number) < 9.0e15)
      return static_cast<int64_t>(number);
  }
  return std::nullopt;
}

} // namespace

std::string describeJsonValue(const nlohmann::json &value) {
  constexpr size_t kMaxLength = 60;
  return support::jsonExcerpt(value, kMaxLength);
}

ConfigReader::ConfigReader(const nlohmann::json &object, std::string fileName, std::string path)
    : object_(&object), fileName_(std::move(fileName)), path_(std::move(path)) {}

std::string ConfigReader::keyPath(const std::string &key) const {
  return path_.empty() ? key : path_ + "." + key;
}

const nlohmann::json *ConfigReader::find(const std::string &key) const {
  if (!object_->is_object()) return nullptr;
  auto it = object_->find(key);
  if (it == object_->end() || it->is_null()) return nullptr;
  return &*it;
}

bool ConfigReader::has(const std::string &key) const {
  return find(key) != nullptr;
}

bool ConfigReader::isExplicitNull(const std::string &key) const {
  if (!object_->is_object()) return false;
  auto it = object_->find(key);
  return it != object_->end() && it->is_null();
}

std::optional<int64_t> ConfigReader::getInt(const std::string &key) const {
  const nlohmann::json *value = find(key);
  if (!value) return std::nullopt;
  if (auto integer = asInteger(*value)) return integer;
  failType(key, "an integer");
}

std::optional<double> ConfigReader::getNumber(const std::string &key) const {
  const nlohmann::json *value = find(key);
  if (!value) return std::nullopt;
  if (!value->is_number()) failType(key, "a number");
  double number = value->get<double>();
  if (!std::isfinite(number)) failType(key, "a finite number");
  return number;
}

std::optional<bool> ConfigReader::getBool(const std::string &key) const {
  const nlohmann::json *value = find(key);
  if (!value) return std::nullopt;
  if (!value->is_boolean()) failType(key, "true or false");
  return value->get<bool>();
}

std::optional<std::string> ConfigReader::getString(const std::string &key) const {
  const nlohmann::json *value = find(key);
  if (!value) return std::nullopt;
  if (!value->is_string()) failType(key, "a string");
  return value->get<std::string>();
}

std::optional<std::vector<double>> ConfigReader::getNumberList(const std::string &key) const {
  const nlohmann::json *value = find(key);
  if (!value) return std::nullopt;
  if (!value->is_array()) failType(key, "a list of numbers");
  std::vector<double> numbers;
  for (const auto &element : *value) {
    if (!element.is_number() || !std::isfinite(element.get<double>())) failType(key, "a list of numbers");
    numbers.push_back(element.get<double>());
  }
  return numbers;
}

std::optional<std::vector<std::string>> ConfigReader::getStringList(const std::string &key) const {
  const nlohmann::json *value = find(key);
  if (!value) return std::nullopt;
  if (!value->is_array()) failType(key, "a list of strings");
  std::vector<std::string> strings;
  for (const auto &element : *value) {
    if (!element.is_string()) failType(key, "a list of strings");
    strings.push_back(element.get<std::string>());
  }
  return strings;
}

std::optional<std::vector<int64_t>> ConfigReader::getIntOrIntList(const std::string &key) const {
  const nlohmann::json *value = find(key);
  if (!value) return std::nullopt;
  std::vector<int64_t> integers;
  if (value->is_array()) {
    for (const auto &element : *value) {
      auto integer = asInteger(element);
      if (!integer) failType(key, "an integer, a list of integers or null");
      integers.push_back(*integer);
    }
  } else if (auto integer = asInteger(*value)) {
    integers.push_back(*integer);
  } else {
    failType(key, "an integer, a list of integers or null");
  }
  return integers;
}

std::optional<ConfigReader> ConfigReader::getObject(const std::string &key) const {
  const nlohmann::json *value = find(key);
  if (!value) return std::nullopt;
  if (!value->is_object()) failType(key, "an object");
  return ConfigReader(*value, fileName_, keyPath(key));
}

int64_t ConfigReader::requireInt(const std::string &key) const {
  if (auto value = getInt(key)) return *value;
  failMissing(key);
}

double ConfigReader::requireNumber(const std::string &key) const {
  if (auto value = getNumber(key)) return *value;
  failMissing(key);
}

void ConfigReader::fail(const std::string &message) const {
  throw FrontendError(fileName_ + ": " + message);
}

void ConfigReader::failType(const std::string &key, const std::string &expected) const {
  const nlohmann::json *value = object_->is_object() && object_->contains(key) ? &(*object_)[key] : nullptr;
  fail("key '" + keyPath(key) + "' must be " + expected + ", got " +
       (value ? describeJsonValue(*value) : std::string("nothing")));
}

void ConfigReader::failMissing(const std::string &key, const std::string &why) const {
  fail("missing key '" + keyPath(key) + "'" + (why.empty() ? "" : " (" + why + ")"));
}

} // namespace gerbil
