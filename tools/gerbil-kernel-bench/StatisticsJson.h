// The driver's statistics of a compiled kernel (--statistics) in gerbil-kernel-bench's JSON.
#pragma once

#include "runtime/vulkan/PipelineStatistics.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace gerbil::bench {

// {"<prefix>executable: name": value, ...} added to `out` (an object).
inline void addStatistics(nlohmann::json &out, const std::vector<vk::PipelineStatistic> &statistics,
                          const std::string &prefix = "") {
  for (const vk::PipelineStatistic &s : statistics) out[prefix + s.executable + ": " + s.name] = s.value;
}

} // namespace gerbil::bench
