// What the end-to-end tests share: where the built tools and the test data are, running a tool with its
// output captured, and a tensor's values as floats.
#pragma once

#include "runtime/weights/Safetensors.h"

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

inline std::vector<float> floats(const weights::TensorView &t) {
  std::vector<float> v(t.numElements());
  weights::convertToF32(t, 0, t.numElements(), v.data());
  return v;
}

} // namespace gerbil::e2e
