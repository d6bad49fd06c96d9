#pragma once
// Work split across the host's cores, for loading weights: converting them, and copying them from a mapped
// checkpoint, whose page faults one core takes one after another.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace gerbil::support {

// Runs work(begin, end) over [0, count) in contiguous runs, for items of `itemSize` elements (or bytes), on
// up to `maxThreads` threads (0: the host's cores, at most 32), each with at least `minimumPerThread`
// elements; small work stays on the calling thread. The calling thread takes the first run, and the runs of
// threads that cannot be started. The first exception a run throws is rethrown after all have ended.
inline void parallelRanges(int64_t count, int64_t itemSize, const std::function<void(int64_t, int64_t)> &work,
                           int64_t minimumPerThread = 1 << 20, unsigned maxThreads = 0) {
  if (count <= 0) return;
  int64_t threads =
      maxThreads ? maxThreads : std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()), 32);
  threads = std::clamp<int64_t>(
      count * std::max<int64_t>(itemSize, 1) / std::max<int64_t>(minimumPerThread, 1), 1, threads);
  threads = std::min(threads, count);
  const int64_t per = (count + threads - 1) / threads;
  std::exception_ptr failure;
  std::mutex failureLock;
  auto run = [&](int64_t begin) {
    try {
      work(begin, std::min(count, begin + per));
    } catch (...) {
      std::lock_guard<std::mutex> lock(failureLock);
      if (!failure) failure = std::current_exception();
    }
  };
  {
    std::vector<std::jthread> pool; // joined as it goes out of scope
    int64_t begin = per;
    for (; begin < count; begin += per) {
      try {
        pool.emplace_back(run, begin);
      } catch (const std::system_error &) {
        break; // no more threads: the rest on this one
      }
    }
    run(0);
    for (; begin < count; begin += per) run(begin);
  }
  if (failure) std::rethrow_exception(failure);
}

// Copies `bytes` from `source` to `destination` (not overlapping) in runs of whole pages (no two threads
// fault the same page), on up to `maxThreads` threads (0: the host's cores), each at least
// `minimumPerThread` bytes.
inline void copyInParallel(void *destination, const void *source, uint64_t bytes, unsigned maxThreads = 0,
                           uint64_t minimumPerThread = 8ull << 20) {
  constexpr uint64_t kPage = 4096;
  auto *to = static_cast<char *>(destination);
  const auto *from = static_cast<const char *>(source);
  parallelRanges(
      static_cast<int64_t>((bytes + kPage - 1) / kPage), kPage,
      [&](int64_t first, int64_t end) {
        const uint64_t begin = uint64_t(first) * kPage, stop = std::min(uint64_t(end) * kPage, bytes);
        std::memcpy(to + begin, from + begin, stop - begin);
      },
      static_cast<int64_t>(minimumPerThread),
      maxThreads ? maxThreads : std::min(16u, std::max(1u, std::thread::hardware_concurrency())));
}

} // namespace gerbil::support
