#include "compiler/codegen/PrefetchWorkers.h"

#include "compiler/codegen/ShaderCompiler.h"

#include <algorithm>

namespace gerbil::codegen {
namespace {
// 16 loads in flight an invocation (64 registers), fewer where the workgroup is wide enough.
int64_t stepsOf(int64_t workgroupSize) {
  return std::clamp<int64_t>(kPrefetchWorkerBytes / 16 / workgroupSize, 1, 16);
}
int64_t readsOf(const PrefetchRange &range) {
  return (range.bytes / 16 + range.stride / 16 - 1) / (range.stride / 16);
}
int64_t workersOf(const PrefetchRange &range, int64_t workgroupSize) {
  const int64_t workerBytes = stepsOf(workgroupSize) * 16 * workgroupSize;
  return (readsOf(range) * 16 + workerBytes - 1) / workerBytes;
}
} // namespace

int64_t prefetchWorkers(const std::vector<PrefetchRange> &prefetch, int64_t workgroupSize) {
  int64_t workers = 0;
  for (const PrefetchRange &range : prefetch) workers += workersOf(range, workgroupSize);
  return workers;
}

int64_t addPrefetchWorkers(KernelSource &k, const std::vector<PrefetchRange> &prefetch,
                           const std::string &sink, const std::string &what) {
  if (prefetch.empty()) return 0;
  if (prefetch.size() > kMaxPrefetchBindings)
    throw CodegenError(what + ": " + std::to_string(prefetch.size()) +
                       " weights to prefetch, more than its " + std::to_string(kMaxPrefetchBindings) +
                       " prefetch bindings");
  int64_t workers = 0;
  for (size_t i = 0; i < prefetch.size(); ++i) {
    const auto [bytes, stride] = prefetch[i];
    if (bytes <= 0 || bytes % 16 != 0 || stride <= 0 || stride % 16 != 0)
      throw CodegenError(what + ": a prefetch of " + std::to_string(bytes) + " bytes at strides of " +
                         std::to_string(stride) + " (positive multiples of 16 are needed)");
    const std::string index = std::to_string(i);
    k.bindings.push_back({"prefetch" + index, Access::Read, plan::DType::F16, true});
    k.defines.emplace_back("PREFETCH_FIRST_" + index, uintValue(workers));
    k.defines.emplace_back("PREFETCH_READS_" + index, uintValue(readsOf(prefetch[i])));
    k.defines.emplace_back("PREFETCH_STRIDE_" + index, uintValue(stride / 16));
    workers += workersOf(prefetch[i], k.workgroup[0]);
  }
  k.defines.emplace_back("PREFETCH_COUNT", std::to_string(prefetch.size())); // in #if: no "u"
  k.defines.emplace_back("PREFETCH_STEPS", uintValue(stepsOf(k.workgroup[0])));
  k.defines.emplace_back("PREFETCH_SINK(value)", sink);
  k.libraries.push_back("prefetch.glsl");
  return workers;
}

PrefetchLaunch prefetchLaunch(const std::vector<PrefetchRange> &prefetch) {
  PrefetchLaunch launch;
  KernelSource &k = launch.source;
  k.templateFile = "prefetch_launch.glsl";
  // 256 invocations of 16 loads in flight each (64 KiB a workgroup; the loads hold 64 registers, the driver's
  // count not measured): several workgroups a multiprocessor, where the attention's own prefetch workers held
  // one each.
  k.workgroup = {256, 1, 1};
  k.bindings = {{"sink", Access::Write, plan::DType::F32}};
  launch.workers = addPrefetchWorkers(k, prefetch, "store_sink(0u, value)", "prefetch launch");
  // Every Vulkan device dispatches at least 65535 workgroups along x.
  if (launch.workers > 65535)
    throw CodegenError("prefetch launch: " + std::to_string(launch.workers) +
                       " workgroups, more than the 65535 every device allows");
  return launch;
}

} // namespace gerbil::codegen
