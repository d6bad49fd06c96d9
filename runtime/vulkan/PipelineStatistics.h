// What the driver says about a pipeline's compiled code (VK_KHR_pipeline_executable_properties): registers,
// spills, shared memory and the like, named as the driver names them. For tuning kernels
// (gerbil-kernel-bench --statistics); the runtime does not need it.
#pragma once

#include "runtime/vulkan/Device.h"

#include <string>
#include <vector>

namespace gerbil::vk {

struct PipelineStatistic {
  std::string executable; // the driver's name for the compiled stage
  std::string name;
  std::string value; // integers and booleans as written by the driver, floats with %g
};

// Empty unless the context captures statistics (ContextOptions::pipelineStatistics on a device that has
// them).
std::vector<PipelineStatistic> pipelineStatistics(const Context &context, const Pipeline &pipeline);

} // namespace gerbil::vk
