// What `gerbilc --target auto` picks for a device, from its description alone (plain C++: tested without a
// device or MLIR).
#pragma once

#include "gerbil/Passes/TargetProfile.h"
#include "runtime/vulkan/Device.h"

#include <algorithm>
#include <string>

namespace gerbil {

// The first named profile whose vendor, extensions, subgroup size, f16 arithmetic and (for cooperative
// matrices) Vulkan memory model the device has, and for KHR matrices the kernels' fragments among its
// shapes; else generic.
inline std::string chooseTarget(const vk::DeviceInfo &device) {
  for (const mlir::gerbil::TargetProfile &profile : mlir::gerbil::targetProfiles()) {
    if (profile.name == "generic") continue;
    const bool hasExtensions = std::all_of(profile.deviceExtensions.begin(), profile.deviceExtensions.end(),
                                           [&](const std::string &e) { return device.hasExtension(e); });
    const bool subgroupFits = profile.subgroupSize == 0 || profile.subgroupSize == device.subgroupSize;
    const bool vendorFits = profile.vendorId == 0 || profile.vendorId == device.vendorId;
    const std::vector<std::string> &shapes = device.cooperativeMatrixKHRShapes;
    const bool shapeFits =
        profile.cooperativeMatrixApi != mlir::gerbil::CooperativeMatrixApi::KHR ||
        std::find(shapes.begin(), shapes.end(), mlir::gerbil::kCooperativeMatrixShape) != shapes.end();
    if (hasExtensions && subgroupFits && shapeFits && vendorFits &&
        (!profile.cooperativeMatrix || (device.shaderFloat16 && device.vulkanMemoryModel)))
      return profile.name;
  }
  return "generic";
}

} // namespace gerbil
