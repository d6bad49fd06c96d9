// What the end-to-end tests share: where the built tools and the test data are, running a tool with its
// output captured, token ids to and from gerbil-exec, and a tensor's values as floats.
#pragma once

#include "runtime/weights/Safetensors.h"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace gerbil::e2e {

namespace fs = std::filesystem;

// GERBIL_TEST_DATA / GERBIL_BIN_DIR override the build's folders (to run the tests against another build).
inline fs::path testData() {
  const char *env = std::getenv("GERBIL_TEST_DATA");
  return env ? fs::path(env) : fs::path(GERBIL_TEST_DATA_DIR);
}
inline fs::path binDir() {
  const char *env = std::getenv("GERBIL_BIN_DIR");
  return env ? fs::path(env) : fs::path(GERBIL_BIN_DIR);
}

struct Result {
  int code = 0;        // the exit status, -1 when the command did not exit normally
  std::string output;  // stdout and stderr together
};

inline Result run(const std::string &command) {
  fs::path log = fs::temp_directory_path() / ("gerbil-e2e-" + std::to_string(::getpid()) + ".log");
  int status = std::system((command + " > " + log.string() + " 2>&1").c_str());
  std::ifstream in(log);
  std::stringstream s;
  s << in.rdbuf();
  fs::remove(log);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, s.str()};
}

// Token ids as gerbil-exec's --prompt-ids takes them ("1,2,3").
inline std::string joinIds(const std::vector<int64_t> &ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s;
}

// The ids after "output_ids":[ in gerbil-exec's --json output (none if it has no such key).
inline std::vector<int64_t> outputIds(const std::string &json) {
  std::vector<int64_t> ids;
  const std::string key = "\"output_ids\":[";
  size_t begin = json.find(key), end = begin == std::string::npos ? begin : json.find(']', begin);
  if (end == std::string::npos) return ids;
  begin += key.size();
  std::stringstream s(json.substr(begin, end - begin));
  for (std::string item; std::getline(s, item, ',');) ids.push_back(std::stoll(item));
  return ids;
}

inline std::vector<float> floats(const weights::TensorView &t) {
  std::vector<float> v(t.numElements());
  weights::convertToF32(t, 0, t.numElements(), v.data());
  return v;
}

} // namespace gerbil::e2e
