// What gerbil-kernel-bench's own chains (sync, mlp) share on the host: random f16 weights and their values
// as the device reads them, how many weight copies a chain rotates over, and the workgroup-size check.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace gerbil::bench {

// `count` f16 values (their bits) uniform in ±scale.
inline std::vector<uint16_t> randomHalves(size_t count, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<uint16_t> out(count);
  for (uint16_t &v : out) {
    _Float16 h = static_cast<_Float16>(uniform(rng) * scale);
    std::memcpy(&v, &h, 2);
  }
  return out;
}

inline float halfValue(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return static_cast<float>(h);
}

// Weight copies of `copyBytes` a chain of `phases` rotates over: `requested`, else as many as fit `budget`
// (at least one, and no more than one a phase), so that the phases read memory, not the L2.
inline uint32_t rotatedCopies(uint64_t copyBytes, uint64_t budget, uint32_t phases, uint32_t requested) {
  if (requested) return requested;
  return std::min(static_cast<uint32_t>(std::clamp<uint64_t>(budget / copyBytes, 1, 4096)), phases);
}

inline void checkWorkgroupSize(uint32_t workgroupSize, uint32_t subgroupSize) {
  if (subgroupSize == 0 || workgroupSize % subgroupSize != 0 || workgroupSize > 1024)
    throw std::runtime_error("--workgroup-size must be a multiple of the subgroup size (" +
                             std::to_string(subgroupSize) + ") up to 1024");
}

} // namespace gerbil::bench
