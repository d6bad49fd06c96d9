#pragma once
// memcpy across the host's cores, for the weights' way to the device: they come from a mapped checkpoint,
// whose page faults one core takes one after another (most of a large model's load time when copied on
// one thread).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <system_error>
#include <thread>
#include <vector>

namespace gerbil::support {

// Copies `bytes` from `source` to `destination` (not overlapping) on up to `maxThreads` threads (0: the
// host's cores, at most 16), each at least `minimumPerThread` bytes; the calling thread takes the first
// part. Where a thread cannot be started, the calling thread copies its part.
inline void copyInParallel(void *destination, const void *source, uint64_t bytes, unsigned maxThreads = 0,
                           uint64_t minimumPerThread = 8ull << 20) {
  if (bytes == 0) return; // memcpy may not be given the null pointers of empty ranges
  auto *to = static_cast<char *>(destination);
  const auto *from = static_cast<const char *>(source);
  unsigned threads = maxThreads ? maxThreads : std::clamp(std::thread::hardware_concurrency(), 1u, 16u);
  threads = static_cast<unsigned>(
      std::clamp<uint64_t>(bytes / std::max<uint64_t>(minimumPerThread, 1), 1, threads));
  // Parts of whole pages, so that no two threads fault the same page.
  const uint64_t part = ((bytes + threads - 1) / threads + 4095) & ~uint64_t(4095);
  std::vector<std::jthread> workers; // joined when they go out of scope, also on an exception
  uint64_t begin = part;
  for (; begin < bytes && workers.size() + 1 < threads; begin += part) {
    const uint64_t length = std::min(part, bytes - begin);
    try {
      workers.emplace_back([=] { std::memcpy(to + begin, from + begin, length); });
    } catch (const std::system_error &) {
      break; // no more threads: the rest on this one
    }
  }
  std::memcpy(to, from, std::min(part, bytes));
  if (begin < bytes) std::memcpy(to + begin, from + begin, bytes - begin);
}

} // namespace gerbil::support
