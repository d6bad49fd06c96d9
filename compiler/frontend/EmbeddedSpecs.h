// The arch-specs/*.yaml files as they were at build time, compiled into the library by EmbedSpecs.cmake so
// that gerbilc works from any folder.
#pragma once

#include <cstddef>

namespace gerbil::embedded_specs {

struct File {
  const char *name; // "llama.yaml"
  const char *text; // NUL-terminated
  size_t size;      // without the NUL
};

extern const File kFiles[];
extern const size_t kFileCount;

} // namespace gerbil::embedded_specs
