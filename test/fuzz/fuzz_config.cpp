// libFuzzer target for the front end (gerbil::resolveModel): the input is a config.json, resolved against the
// built-in arch specs. A bad config must give a FrontendError; any other exception, a crash or a sanitizer
// report is a bug. An accepted config is resolved again with a long --max-seq (longrope's long factors,
// learned position tables).
#include "compiler/frontend/Frontend.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  try {
    gerbil::resolveModel(text, "config.json");
  } catch (const gerbil::FrontendError &) {
    return 0;
  }
  try {
    gerbil::FrontendOptions options;
    options.maxSequence = 1 << 20;
    gerbil::resolveModel(text, "config.json", options);
  } catch (const gerbil::FrontendError &) {
  }
  return 0;
}
