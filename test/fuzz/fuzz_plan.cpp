// libFuzzer target for the plan reader (gerbil::plan::deserialize). A bad plan must give a PlanError; any
// other exception, a crash or a sanitizer report is a bug.
//
// Every input is tried twice: as a whole plan file, which tests the header, length and checksum checks, and
// as "manifest JSON [NUL blob]" wrapped in a correct header and checksum, so that the manifest reader and
// validate() see fuzzed manifests (a fuzzer cannot forge an XXH64 by itself). A plan that is accepted must
// serialize, and read back to the same bytes.
#include "runtime/plan/Plan.h"

#include <xxhash.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace gerbil::plan;

namespace {

[[noreturn]] void bug(const char *what) {
  std::fprintf(stderr, "fuzz-plan: %s\n", what);
  std::abort();
}

void putU32(std::vector<uint8_t> &out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(uint8_t(v >> (8 * i)));
}

void putU64(std::vector<uint8_t> &out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(uint8_t(v >> (8 * i)));
}

// A plan file around a fuzzed manifest and blob: magic, version, flags 0, the two lengths, the checksum.
std::vector<uint8_t> wrap(const uint8_t *manifest, size_t manifestBytes, const uint8_t *blob,
                          size_t blobBytes) {
  std::vector<uint8_t> file(kMagic, kMagic + sizeof(kMagic));
  putU32(file, kFormatVersion);
  putU32(file, 0);
  putU64(file, manifestBytes);
  putU64(file, blobBytes);
  file.insert(file.end(), manifest, manifest + manifestBytes);
  file.insert(file.end(), blob, blob + blobBytes);
  putU64(file, XXH64(file.data(), file.size(), 0));
  return file;
}

void check(const uint8_t *data, size_t size) {
  Plan plan;
  try {
    plan = deserialize(data, size, "fuzz.plan");
  } catch (const PlanError &) {
    return;
  }
  // Accepted: the plan is consistent, so it must serialize, and its bytes must read back unchanged.
  std::vector<uint8_t> bytes;
  try {
    bytes = serialize(plan);
  } catch (const PlanError &e) {
    std::fprintf(stderr, "%s\n", e.what());
    bug("a plan that deserialize accepted does not serialize");
  }
  try {
    if (serialize(deserialize(bytes.data(), bytes.size(), "round trip")) != bytes)
      bug("serialize(deserialize(serialize(plan))) differs from serialize(plan)");
  } catch (const PlanError &e) {
    std::fprintf(stderr, "%s\n", e.what());
    bug("a serialized plan does not read back");
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  check(data, size);

  const uint8_t *nul = static_cast<const uint8_t *>(std::memchr(data, 0, size));
  size_t manifestBytes = nul ? size_t(nul - data) : size;
  const uint8_t *blob = nul ? nul + 1 : data + size;
  size_t blobBytes = (size - manifestBytes - (nul ? 1 : 0)) & ~size_t(3);
  std::vector<uint8_t> file = wrap(data, manifestBytes, blob, blobBytes);
  check(file.data(), file.size());
  return 0;
}
