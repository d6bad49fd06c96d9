// --plan-info: what a plan is and what it needs of a device, from the plan alone (no device, no weights).
#include "tools/gerbil-exec/Common.h"

#include "runtime/exec/Executor.h"
#include "runtime/plan/Plan.h"
#include "runtime/plan/PlanJson.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>

namespace gerbil::tool {
namespace {

double mebibytes(uint64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

// The device features the plan requires, in the words gerbil-exec --device-info uses.
std::vector<std::string> requiredFeatures(const plan::Requirements &r) {
  std::vector<std::string> features;
  if (r.shaderFloat16) features.push_back("shaderFloat16");
  if (r.storageBuffer16BitAccess) features.push_back("storageBuffer16BitAccess");
  if (r.vulkanMemoryModel) features.push_back("vulkanMemoryModel");
  if (r.bufferDeviceAddress) features.push_back("bufferDeviceAddress");
  if (r.subgroupArithmetic)
    features.push_back("subgroup arithmetic and shuffles (subgroups of at least " +
                       std::to_string(r.minSubgroupSize) + ")");
  if (r.subgroupSize) features.push_back("subgroup size " + std::to_string(r.subgroupSize));
  for (const std::string &extension : r.deviceExtensions) features.push_back(extension);
  for (const std::string &shape : r.cooperativeMatrixShapes) features.push_back("matrices of " + shape);
  return features;
}

} // namespace

int planInfo(const std::string &path, bool json) {
  const plan::Plan plan = plan::readFile(path);
  uint64_t weightBytes = 0;
  for (const plan::Weight &w : plan.weights) weightBytes += w.bytes();
  const plan::Requirements &r = plan.requires_;
  if (json) {
    nlohmann::json out = {{"plan", path},
                          {"compiler", plan.compilerVersion},
                          {"architecture", plan.model.architecture},
                          {"family", plan.model.family},
                          {"layers", plan.model.numLayers},
                          {"hidden_size", plan.model.hiddenSize},
                          {"vocab_size", plan.model.vocabSize},
                          {"config_path", plan.model.configPath},
                          {"target", plan.target},
                          {"max_sequence", plan.limits.maxSequence},
                          {"prefill_chunk", plan.limits.prefillChunk},
                          {"weights", plan.weights.size()},
                          {"weight_bytes", weightBytes},
                          {"kv_cache_bytes", plan.kvCache.bytes},
                          {"kv_cache_dtype", plan::toString(plan.kvCache.dtype)},
                          {"arena_bytes", plan.arenaBytes},
                          {"scratch_bytes", plan.scratchBytes},
                          {"device_bytes", exec::deviceBytesNeeded(plan)},
                          {"decode_dispatches", plan.decode.size()},
                          {"prefill_dispatches", plan.prefill.size()},
                          {"kernels", plan.kernels.size()},
                          {"gpu_argmax", plan.gpuArgmax},
                          {"decode_argmax_launch", plan.decodeArgmaxLaunch},
                          {"gpu_sampler_dispatches", plan.sampler.size()},
                          {"buffer_access", plan::toString(plan.bufferAccess)},
                          {"requires", plan::requirementsToJson(r)}}; // the manifest's object
    std::cout << out.dump() << std::endl;
    return kOk;
  }
  std::printf("plan            %s (%s)\n", path.c_str(), plan.compilerVersion.c_str());
  std::printf("model           %s (%s): %lld layers, hidden %lld, vocabulary %lld\n",
              plan.model.architecture.c_str(), plan.model.family.c_str(),
              static_cast<long long>(plan.model.numLayers), static_cast<long long>(plan.model.hiddenSize),
              static_cast<long long>(plan.model.vocabSize));
  std::printf("compiled from   %s\n", plan.model.configPath.c_str());
  std::printf("target          %s\n", plan.target.c_str());
  std::printf("limits          %u positions, prefill steps of up to %u tokens\n", plan.limits.maxSequence,
              plan.limits.prefillChunk);
  std::printf("weights         %zu, %.1f MiB on the device\n", plan.weights.size(), mebibytes(weightBytes));
  std::printf("kv cache        %.1f MiB of %s\n", mebibytes(plan.kvCache.bytes),
              plan::toString(plan.kvCache.dtype));
  std::printf("device memory   %.1f MiB in all (arena %.1f, scratch %.1f)\n",
              mebibytes(exec::deviceBytesNeeded(plan)), mebibytes(plan.arenaBytes),
              mebibytes(plan.scratchBytes));
  std::printf("schedule        %zu dispatches a decode token, %zu a prefill step, %zu kernels%s\n",
              plan.decode.size(), plan.prefill.size(), plan.kernels.size(),
              plan.gpuArgmax ? "; greedy tokens picked on the GPU" : "");
  if (!plan.sampler.empty())
    std::printf("sampling        on the GPU: %zu dispatches more a sampled token\n", plan.sampler.size());
  std::string features;
  for (const std::string &feature : requiredFeatures(r)) features += (features.empty() ? "" : ", ") + feature;
  std::printf("requires        %s\n", features.empty() ? "Vulkan 1.2" : features.c_str());
  // Plans by address bind no descriptors: no binding size to ask of the device.
  char bindings[64] = "";
  if (plan.bufferAccess == plan::BufferAccess::Descriptors)
    std::snprintf(bindings, sizeof bindings, " bindings of up to %.1f MiB,",
                  mebibytes(r.maxStorageBufferRange));
  std::printf("                %u bytes of shared memory a workgroup,%s %u bytes of push constants\n",
              r.maxSharedMemoryBytes, bindings, r.pushConstantBytes);
  std::printf("buffers         reached through %s\n", plan.bufferAccess == plan::BufferAccess::Addresses
                                                          ? "device addresses in push constants"
                                                          : "descriptor sets");
  return kOk;
}

} // namespace gerbil::tool
