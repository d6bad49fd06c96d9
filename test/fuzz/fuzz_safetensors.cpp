// libFuzzer target for the safetensors reader (gerbil::weights::SafetensorsFile). The input is the whole
// file; it is written to a memfd and opened through /proc/self/fd, so that the reader maps it exactly as it
// maps a checkpoint. A bad file must give a WeightError; any other exception, a crash or a sanitizer report
// is a bug. An accepted file's tensors are read back element by element.
#include "runtime/weights/Safetensors.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace gerbil::weights;

namespace {

[[noreturn]] void bug(const char *what) {
  std::fprintf(stderr, "fuzz-safetensors: %s\n", what);
  std::abort();
}

// One memfd for the whole run, rewritten for each input.
int fuzzFile() {
  static int fd = [] {
    int created = memfd_create("fuzz.safetensors", MFD_CLOEXEC);
    if (created < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    return created;
  }();
  return fd;
}

bool isFloat(TensorDType t) {
  return t == TensorDType::F64 || t == TensorDType::F32 || t == TensorDType::F16 || t == TensorDType::BF16;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int fd = fuzzFile();
  if (ftruncate(fd, 0) != 0 || (size > 0 && pwrite(fd, data, size, 0) != ssize_t(size))) {
    std::perror("writing the memfd");
    std::abort();
  }
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);

  try {
    SafetensorsFile file(path);
    std::vector<float> values;
    for (const auto &[name, view] : file.tensors()) {
      if (name != view.name) bug("a tensor is filed under another name");
      int64_t count = view.numElements();
      if (count < 0 || uint64_t(count) * byteSize(view.dtype) != view.bytes)
        bug("a tensor's byte size does not match its shape");
      // Every byte of an accepted tensor lies inside the mapped file: touch the first and the last.
      if (view.bytes > 0) {
        volatile uint8_t first = view.data[0];
        volatile uint8_t last = view.data[view.bytes - 1];
        (void)first;
        (void)last;
      }
      if (!isFloat(view.dtype)) {
        try {
          convertToF32(view, 0, count, nullptr);
          bug("convertToF32 accepted an integer tensor");
        } catch (const WeightError &) {
        }
        continue;
      }
      int64_t head = std::min<int64_t>(count, 4096);
      values.resize(size_t(head));
      convertToF32(view, 0, head, values.data());
      if (count > head) convertToF32(view, count - 1, 1, values.data());
    }
  } catch (const WeightError &) {
  }
  return 0;
}
