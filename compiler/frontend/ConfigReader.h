// Typed look-ups in a HuggingFace config.json, with errors that name the file and the key
// ("config.json: key 'rope_scaling.factor' must be a number, got \"8\"").
// The getters treat JSON null as absent: HF writes null for "derive it" (head_dim, n_inner, rope_scaling).
// Where null means something else than the default (sliding_window: null is "no window", while a missing key
// takes MistralConfig's 4096), callers ask isExplicitNull.
#pragma once

#include "compiler/frontend/ModelDescription.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gerbil {

class ConfigReader {
public:
  // `object` must outlive the reader. `path` prefixes key names in messages ("rope_scaling").
  ConfigReader(const nlohmann::json &object, std::string fileName, std::string path = "");

  const std::string &fileName() const { return fileName_; }
  // The key as messages spell it: "rope_scaling.factor".
  std::string keyPath(const std::string &key) const;

  // Present with a non-null value.
  bool has(const std::string &key) const;
  // Present, and null.
  bool isExplicitNull(const std::string &key) const;
  const nlohmann::json *find(const std::string &key) const;

  std::optional<int64_t> getInt(const std::string &key) const;
  std::optional<double> getNumber(const std::string &key) const;
  std::optional<bool> getBool(const std::string &key) const;
  std::optional<std::string> getString(const std::string &key) const;
  std::optional<std::vector<double>> getNumberList(const std::string &key) const;
  std::optional<std::vector<std::string>> getStringList(const std::string &key) const;
  // An int, a list of ints, or null/absent (empty): bos_token_id, eos_token_id.
  std::optional<std::vector<int64_t>> getIntOrIntList(const std::string &key) const;
  // A nested object, as a reader whose messages say "key.inner".
  std::optional<ConfigReader> getObject(const std::string &key) const;

  int64_t requireInt(const std::string &key) const;
  double requireNumber(const std::string &key) const;

  // "<file>: <message>"
  [[noreturn]] void fail(const std::string &message) const;
  // "<file>: key '<path.key>' must be <expected>, got <value>"
  [[noreturn]] void failType(const std::string &key, const std::string &expected) const;
  // "<file>: missing key '<path.key>'"
  [[noreturn]] void failMissing(const std::string &key, const std::string &why = "") const;

  const nlohmann::json &json() const { return *object_; }

private:
  const nlohmann::json *object_;
  std::string fileName_;
  std::string path_;
};

// A JSON value shortened for messages.
std::string describeJsonValue(const nlohmann::json &value);

} // namespace gerbil
