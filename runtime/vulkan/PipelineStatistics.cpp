#include "runtime/vulkan/PipelineStatistics.h"

#include <cstdio>

namespace gerbil::vk {
namespace {

std::string valueText(const VkPipelineExecutableStatisticKHR &s) {
  char text[64];
  switch (s.format) {
  case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
    return s.value.b32 ? "true" : "false";
  case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
    std::snprintf(text, sizeof text, "%lld", static_cast<long long>(s.value.i64));
    return text;
  case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
    std::snprintf(text, sizeof text, "%llu", static_cast<unsigned long long>(s.value.u64));
    return text;
  case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR:
    std::snprintf(text, sizeof text, "%g", s.value.f64);
    return text;
  default:
    return "?";
  }
}

} // namespace

std::vector<PipelineStatistic> pipelineStatistics(const Context &context, const Pipeline &pipeline) {
  if (!context.capturesPipelineStatistics()) return {};
  VkDevice device = context.device();
  auto getExecutables = reinterpret_cast<PFN_vkGetPipelineExecutablePropertiesKHR>(
      vkGetDeviceProcAddr(device, "vkGetPipelineExecutablePropertiesKHR"));
  auto getStatistics = reinterpret_cast<PFN_vkGetPipelineExecutableStatisticsKHR>(
      vkGetDeviceProcAddr(device, "vkGetPipelineExecutableStatisticsKHR"));
  if (!getExecutables || !getStatistics) return {};

  VkPipelineInfoKHR info{};
  info.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR;
  info.pipeline = pipeline.pipeline;
  uint32_t count = 0;
  if (getExecutables(device, &info, &count, nullptr) != VK_SUCCESS) return {};
  std::vector<VkPipelineExecutablePropertiesKHR> executables(count);
  for (auto &e : executables) e.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR;
  if (getExecutables(device, &info, &count, executables.data()) != VK_SUCCESS) return {};

  std::vector<PipelineStatistic> out;
  for (uint32_t i = 0; i < count; ++i) {
    VkPipelineExecutableInfoKHR executable{};
    executable.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR;
    executable.pipeline = pipeline.pipeline;
    executable.executableIndex = i;
    uint32_t n = 0;
    if (getStatistics(device, &executable, &n, nullptr) != VK_SUCCESS) continue;
    std::vector<VkPipelineExecutableStatisticKHR> statistics(n);
    for (auto &s : statistics) s.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
    if (getStatistics(device, &executable, &n, statistics.data()) != VK_SUCCESS) continue;
    for (const auto &s : statistics) out.push_back({executables[i].name, s.name, valueText(s)});
  }
  return out;
}

} // namespace gerbil::vk
