// Weight prefetch workers (gerbil-prefetch-weights, prefetch.glsl): extra workgroups of a decode launch that
// only read words of weights of the launches after it, so that those find them in the L2 (every word) or
// their pages' address translations cached (a word a page). The decode attention holds them in grid rows
// past its splits, a gemv before its own workgroups.
#pragma once

#include "compiler/codegen/KernelWriter.h"

#include <string>
#include <vector>

namespace gerbil::codegen {

inline constexpr size_t kMaxPrefetchBindings = 8;
inline constexpr int64_t kPrefetchWorkerBytes = 64 * 1024;

// The first `bytes` of a weight, one 16-byte word every `stride` bytes.
struct PrefetchRange {
  int64_t bytes = 0;
  int64_t stride = 16; // 16: every word (the data); a page's size: its address translation
};

// Adds a binding prefetchI (16-byte view) for each range after the kernel's own, prefetch.glsl and its
// defines; `sink` is a statement of the kernel that stores `value` (it never runs). Returns the number of
// worker workgroups (each reads up to kPrefetchWorkerBytes / 16 words); `what` names the launch in errors.
int64_t addPrefetchWorkers(KernelSource &k, const std::vector<PrefetchRange> &prefetch,
                           const std::string &sink, const std::string &what);
// The worker workgroups addPrefetchWorkers gives a kernel of `workgroupSize` invocations.
int64_t prefetchWorkers(const std::vector<PrefetchRange> &prefetch, int64_t workgroupSize);

// A launch of its own that only runs prefetch workers (prefetch_launch.glsl), `workers` workgroups along x:
// its bindings are `sink` (written by a store that never happens) and then the prefetched weights.
struct PrefetchLaunch {
  KernelSource source;
  int64_t workers = 0;
};
PrefetchLaunch prefetchLaunch(const std::vector<PrefetchRange> &prefetch);

} // namespace gerbil::codegen
