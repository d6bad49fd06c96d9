// checkDevice: a plan's requirements against what a device reports, before anything is allocated. The
// messages name the missing feature and the way out.
#include "runtime/exec/Executor.h"

#include <gtest/gtest.h>

namespace {

using gerbil::exec::checkDevice;

gerbil::plan::Plan planNeedingSubgroups() {
  gerbil::plan::Plan plan;
  plan.requires_.subgroupArithmetic = true;
  plan.requires_.minSubgroupSize = 4;
  return plan;
}

gerbil::vk::DeviceInfo deviceWith(bool arithmetic, uint32_t minSubgroup) {
  gerbil::vk::DeviceInfo device;
  device.name = "test device";
  device.maxStorageBufferRange = 1u << 30;
  device.maxSharedMemoryBytes = 32768;
  device.maxPushConstantsBytes = 128; // Vulkan's least
  device.subgroupArithmetic = arithmetic;
  device.subgroupSize = device.minSubgroupSize = minSubgroup;
  return device;
}

std::string refusal(const gerbil::plan::Plan &plan, const gerbil::vk::DeviceInfo &device) {
  try {
    checkDevice(plan, device);
  } catch (const std::exception &e) {
    return e.what();
  }
  return "";
}

TEST(DeviceCheck, AcceptsADeviceWithSubgroupArithmetic) {
  EXPECT_EQ(refusal(planNeedingSubgroups(), deviceWith(true, 8)), "");
  EXPECT_EQ(refusal(planNeedingSubgroups(), deviceWith(true, 4)), "");
}

TEST(DeviceCheck, RefusesADeviceWithoutSubgroupArithmetic) {
  std::string message = refusal(planNeedingSubgroups(), deviceWith(false, 32));
  EXPECT_NE(message.find("subgroup arithmetic"), std::string::npos) << message;
  EXPECT_NE(message.find("--no-subgroup-ops"), std::string::npos) << message;
}

TEST(DeviceCheck, RefusesSubgroupsSmallerThanThePlanSizedItsArraysFor) {
  std::string message = refusal(planNeedingSubgroups(), deviceWith(true, 2));
  EXPECT_NE(message.find("subgroups of at least 4"), std::string::npos) << message;
}

TEST(DeviceCheck, PlansWithoutSubgroupsRunAnywhere) {
  gerbil::plan::Plan plan;
  EXPECT_EQ(refusal(plan, deviceWith(false, 1)), "");
}

// A khr plan's fragments must be among the shapes the device lists for VK_KHR_cooperative_matrix.
TEST(DeviceCheck, CooperativeMatrixShapesMustBeListed) {
  gerbil::plan::Plan plan;
  plan.target = "khr";
  plan.requires_.cooperativeMatrixShapes = {"16x16x16 f16*f16+f32->f32"};
  gerbil::vk::DeviceInfo device = deviceWith(true, 32);
  device.cooperativeMatrixKHRShapes = {"16x8x16 f16*f16+f32->f32", "16x16x16 f16*f16+f16->f16"};
  const std::string message = refusal(plan, device);
  EXPECT_NE(message.find("16x16x16 f16*f16+f32->f32"), std::string::npos) << message;
  EXPECT_NE(message.find("VK_KHR_cooperative_matrix"), std::string::npos) << message;
  EXPECT_NE(message.find("--target generic"), std::string::npos) << message;
  device.cooperativeMatrixKHRShapes.push_back("16x16x16 f16*f16+f32->f32");
  EXPECT_EQ(refusal(plan, device), "");
}

// An nvidia plan on a driver with VK_NV_cooperative_matrix but not the KHR extension: the advice names
// nvidia-nv, whose kernels run there (it named only generic before).
TEST(DeviceCheck, AnNvidiaPlanWithoutTheKhrExtensionPointsToNvidiaNv) {
  gerbil::plan::Plan plan;
  plan.target = "nvidia";
  plan.requires_.deviceExtensions = {"VK_KHR_cooperative_matrix"};
  gerbil::vk::DeviceInfo device = deviceWith(true, 32);
  device.vulkanMemoryModel = true;
  device.extensions = {"VK_NV_cooperative_matrix"};
  std::string message = refusal(plan, device);
  EXPECT_NE(message.find("VK_KHR_cooperative_matrix"), std::string::npos) << message;
  EXPECT_NE(message.find("--target nvidia-nv"), std::string::npos) << message;
  // Without the NV extension either, or for a khr plan, the kernels that run anywhere.
  device.extensions.clear();
  message = refusal(plan, device);
  EXPECT_EQ(message.find("nvidia-nv"), std::string::npos) << message;
  EXPECT_NE(message.find("--target generic"), std::string::npos) << message;
  plan.target = "khr";
  device.extensions = {"VK_NV_cooperative_matrix"};
  message = refusal(plan, device);
  EXPECT_EQ(message.find("nvidia-nv"), std::string::npos) << message;
}

// Kernels that reach their buffers by address need bufferDeviceAddress and push constants for every address.
TEST(DeviceCheck, BufferAddressesNeedTheFeatureAndThePushConstants) {
  gerbil::plan::Plan plan;
  plan.bufferAccess = gerbil::plan::BufferAccess::Addresses;
  plan.requires_.bufferDeviceAddress = true;
  plan.requires_.pushConstantBytes = 120;
  gerbil::vk::DeviceInfo device = deviceWith(false, 32);
  std::string message = refusal(plan, device);
  EXPECT_NE(message.find("needs bufferDeviceAddress; test device lacks it"), std::string::npos) << message;
  EXPECT_NE(message.find("compile without --buffer-addresses"), std::string::npos) << message;
  device.bufferDeviceAddress = true;
  EXPECT_EQ(refusal(plan, device), "");
  plan.requires_.pushConstantBytes = 136;
  message = refusal(plan, device);
  EXPECT_NE(message.find("take 136 bytes of push constants; test device allows 128 (maxPushConstantsSize)"),
            std::string::npos)
      << message;
}

// Grids past the device's maxComputeWorkGroupCount: prefill ones at the plan's chunk, decode ones (fixed, but
// a decode attention's grows with the weights it prefetches) as they are.
TEST(DeviceCheck, RefusesGridsLargerThanTheDeviceDispatches) {
  gerbil::plan::Plan plan;
  plan.limits.prefillChunk = 512;
  gerbil::plan::Dispatch decode;
  decode.label = "layers.0.attn.attention";
  decode.grid = {gerbil::plan::GridDim{0, 14, 1}, gerbil::plan::GridDim{0, 70000, 1},
                 gerbil::plan::GridDim{}};
  plan.decode.push_back(decode);
  gerbil::vk::DeviceInfo device = deviceWith(true, 8);
  for (uint32_t &count : device.maxWorkgroupCount) count = 65535;
  EXPECT_EQ(refusal(plan, device),
            "decode dispatch 'layers.0.attn.attention' needs 70000 workgroups along y, more than test device "
            "allows "
            "(maxComputeWorkGroupCount); a decode attention's grid grows with gerbilc --prefetch-bytes and "
            "--prefetch-page-bytes");
  plan.decode[0].grid[1] = gerbil::plan::GridDim{0, 65535, 1};
  EXPECT_EQ(refusal(plan, device), "");
  gerbil::plan::Dispatch prefill;
  prefill.label = "layers.0.mlp.down_proj";
  prefill.grid = {gerbil::plan::GridDim{1, 0, 1}, gerbil::plan::GridDim{}, gerbil::plan::GridDim{}};
  plan.prefill.push_back(prefill);
  device.maxWorkgroupCount[0] = 256;
  EXPECT_NE(refusal(plan, device).find("compile with a smaller --prefill-chunk"), std::string::npos);
}

} // namespace
