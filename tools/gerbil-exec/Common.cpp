#include "tools/gerbil-exec/Common.h"

#include "runtime/vulkan/Device.h"
#include "runtime/weights/Safetensors.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <iostream>

namespace gerbil::tool {

void writeLogits(const std::string &path, const std::vector<float> &prompt, const std::vector<float> &steps,
                 int64_t vocab) {
  namespace w = gerbil::weights;
  std::vector<w::OwnedTensor> tensors;
  auto tensor = [&](const std::string &name, const std::vector<float> &data) {
    w::OwnedTensor t{name, w::TensorDType::F32, {static_cast<int64_t>(data.size()) / vocab, vocab}, {}};
    t.data.resize(data.size() * sizeof(float));
    std::memcpy(t.data.data(), data.data(), t.data.size());
    tensors.push_back(std::move(t));
  };
  tensor("logits", prompt);
  if (!steps.empty()) tensor("step_logits", steps);
  w::writeSafetensors(path, tensors, {{"producer", "gerbil-exec"}});
}

int listDevices(bool json) {
  auto devices = gerbil::vk::Context::listDevices();
  nlohmann::json list = nlohmann::json::array();
  for (const auto &d : devices) {
    if (!json)
      std::printf("%u: %s (%s, %s, %.1f GiB, subgroup %u)\n", d.index, d.name.c_str(), d.type.c_str(),
                  d.driver.c_str(), static_cast<double>(d.deviceLocalBytes) / (1 << 30), d.subgroupSize);
    list.push_back({{"index", d.index},
                    {"name", d.name},
                    {"type", d.type},
                    {"driver", d.driver},
                    {"device_local_bytes", d.deviceLocalBytes},
                    {"subgroup_size", d.subgroupSize}});
  }
  if (json) std::cout << list.dump() << "\n";
  return kOk;
}

int deviceInfo(int device, bool json) {
  auto devices = gerbil::vk::Context::listDevices();
  if (device >= 0 && static_cast<size_t>(device) >= devices.size())
    throw gerbil::vk::VulkanError("device " + std::to_string(device) +
                                  " does not exist (see --list-devices)");
  // The extensions the target profiles use or could use, shown in the text form; --json lists them all.
  static const char *const kOfNote[] = {"VK_KHR_cooperative_matrix",
                                        "VK_NV_cooperative_matrix",
                                        "VK_NV_cooperative_matrix2",
                                        "VK_NV_cooperative_vector",
                                        "VK_KHR_shader_bfloat16",
                                        "VK_KHR_shader_float16_int8",
                                        "VK_KHR_16bit_storage",
                                        "VK_KHR_shader_integer_dot_product",
                                        "VK_EXT_subgroup_size_control",
                                        "VK_KHR_push_descriptor",
                                        "VK_EXT_device_generated_commands",
                                        "VK_NV_device_generated_commands_compute"};
  nlohmann::json list = nlohmann::json::array();
  for (const auto &d : devices) {
    if (device >= 0 && d.index != static_cast<uint32_t>(device)) continue;
    std::string api = std::to_string(VK_API_VERSION_MAJOR(d.apiVersion)) + "." +
                      std::to_string(VK_API_VERSION_MINOR(d.apiVersion)) + "." +
                      std::to_string(VK_API_VERSION_PATCH(d.apiVersion));
    if (!json) {
      std::printf("%u: %s (%s, driver %s, Vulkan %s)\n", d.index, d.name.c_str(), d.type.c_str(),
                  d.driver.c_str(), api.c_str());
      std::printf("  device-local memory      %.1f GiB\n",
                  static_cast<double>(d.deviceLocalBytes) / (1 << 30));
      std::printf("  subgroup size            %u (min %u, max %u)\n", d.subgroupSize, d.minSubgroupSize,
                  d.maxSubgroupSize);
      std::printf("  shared memory/workgroup  %u bytes\n", d.maxSharedMemoryBytes);
      std::printf("  maxStorageBufferRange    %llu bytes\n",
                  static_cast<unsigned long long>(d.maxStorageBufferRange));
      std::printf("  maxComputeWorkGroupCount %u, %u, %u\n", d.maxWorkgroupCount[0], d.maxWorkgroupCount[1],
                  d.maxWorkgroupCount[2]);
      std::printf("  shaderFloat16            %s\n", d.shaderFloat16 ? "yes" : "no");
      std::printf("  storageBuffer16BitAccess %s\n", d.storageBuffer16BitAccess ? "yes" : "no");
      std::printf("  vulkanMemoryModel        %s\n", d.vulkanMemoryModel ? "yes" : "no");
      std::printf("  bufferDeviceAddress      %s\n", d.bufferDeviceAddress ? "yes" : "no");
      std::printf("  maxPushConstantsSize     %u bytes\n", d.maxPushConstantsBytes);
      std::printf("  timestamps               %s (%.3g ns/tick)\n", d.timestamps ? "yes" : "no",
                  d.timestampPeriodNs);
      for (const char *e : kOfNote) std::printf("  %-40s %s\n", e, d.hasExtension(e) ? "yes" : "no");
      for (const std::string &shape : d.cooperativeMatrixNVShapes)
        std::printf("  VK_NV_cooperative_matrix shape  %s\n", shape.c_str());
      for (const std::string &shape : d.cooperativeMatrixKHRShapes)
        std::printf("  VK_KHR_cooperative_matrix shape %s\n", shape.c_str());
      if (!d.cooperativeMatrixWorkgroupShapes.empty())
        std::printf("  workgroup-scope matrices       up to %u invocations, dimensions up to %u, %u bytes of "
                    "shared memory reserved\n",
                    d.cooperativeMatrixWorkgroupMaxInvocations, d.cooperativeMatrixFlexibleMaxDimension,
                    d.cooperativeMatrixWorkgroupSharedBytes);
      for (const std::string &shape : d.cooperativeMatrixWorkgroupShapes)
        std::printf("  VK_NV_cooperative_matrix2 workgroup granularity %s\n", shape.c_str());
      std::printf("  %zu device extensions in all (--json lists them)\n", d.extensions.size());
    }
    list.push_back(
        {{"index", d.index},
         {"name", d.name},
         {"type", d.type},
         {"driver", d.driver},
         {"api_version", api},
         {"device_local_bytes", d.deviceLocalBytes},
         {"subgroup_size", d.subgroupSize},
         {"min_subgroup_size", d.minSubgroupSize},
         {"max_subgroup_size", d.maxSubgroupSize},
         {"max_shared_memory_bytes", d.maxSharedMemoryBytes},
         {"max_storage_buffer_range", d.maxStorageBufferRange},
         {"shader_float16", d.shaderFloat16},
         {"storage_buffer_16bit_access", d.storageBuffer16BitAccess},
         {"vulkan_memory_model", d.vulkanMemoryModel},
         {"buffer_device_address", d.bufferDeviceAddress},
         {"max_push_constants_bytes", d.maxPushConstantsBytes},
         {"timestamps", d.timestamps},
         {"cooperative_matrix_nv_shapes", d.cooperativeMatrixNVShapes},
         {"cooperative_matrix_khr_shapes", d.cooperativeMatrixKHRShapes},
         {"cooperative_matrix_workgroup_shapes", d.cooperativeMatrixWorkgroupShapes},
         {"cooperative_matrix_workgroup_max_invocations", d.cooperativeMatrixWorkgroupMaxInvocations},
         {"cooperative_matrix_flexible_max_dimension", d.cooperativeMatrixFlexibleMaxDimension},
         {"cooperative_matrix_workgroup_reserved_shared_bytes", d.cooperativeMatrixWorkgroupSharedBytes},
         {"extensions", d.extensions}});
  }
  if (json) std::cout << list.dump() << "\n";
  return kOk;
}

} // namespace gerbil::tool
