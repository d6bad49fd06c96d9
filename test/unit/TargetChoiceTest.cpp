// gerbilc --target auto: the profile chosen for a device description.
#include "compiler/driver/TargetChoice.h"

#include <gtest/gtest.h>

namespace {

constexpr uint32_t kNvidia = 0x10de, kAmd = 0x1002;

gerbil::vk::DeviceInfo device(std::vector<std::string> extensions, std::vector<std::string> khrShapes = {},
                              uint32_t vendor = kAmd) {
  gerbil::vk::DeviceInfo d;
  d.name = "test device";
  d.vendorId = vendor;
  std::sort(extensions.begin(), extensions.end()); // DeviceInfo keeps them sorted
  d.extensions = extensions;
  d.cooperativeMatrix = d.hasExtension("VK_KHR_cooperative_matrix");
  d.cooperativeMatrixKHRShapes = std::move(khrShapes);
  d.subgroupSize = 32;
  d.shaderFloat16 = d.vulkanMemoryModel = true;
  return d;
}

const std::string kShape = "16x16x16 f16*f16+f32->f32";

// NVIDIA's: KHR matrices where the driver has them (faster on the H200), else the NV extension.
TEST(TargetChoice, NvidiaOnNvidiaDevices) {
  EXPECT_EQ(gerbil::chooseTarget(
                device({"VK_NV_cooperative_matrix", "VK_KHR_cooperative_matrix"}, {kShape}, kNvidia)),
            "nvidia");
  EXPECT_EQ(gerbil::chooseTarget(device({"VK_NV_cooperative_matrix"}, {}, kNvidia)), "nvidia-nv");
  // Another vendor's device with the same extensions gets the vendor-neutral profile.
  EXPECT_EQ(gerbil::chooseTarget(device({"VK_NV_cooperative_matrix", "VK_KHR_cooperative_matrix"}, {kShape})),
            "khr");
}

TEST(TargetChoice, KhrWhereOnlyTheKhrExtensionListsTheKernelsFragments) {
  EXPECT_EQ(gerbil::chooseTarget(device({"VK_KHR_cooperative_matrix"}, {"16x8x16 f16*f16+f32->f32", kShape})),
            "khr");
  // Other fragments only (Intel's 8 rows, f16 sums): the tiled kernels.
  EXPECT_EQ(gerbil::chooseTarget(device({"VK_KHR_cooperative_matrix"},
                                        {"8x16x16 f16*f16+f32->f32", "16x16x16 f16*f16+f16->f16"})),
            "generic");
}

TEST(TargetChoice, GenericWithoutSubgroupsOf32F16OrTheMemoryModel) {
  gerbil::vk::DeviceInfo wave64 = device({"VK_KHR_cooperative_matrix"}, {kShape});
  wave64.subgroupSize = 64;
  EXPECT_EQ(gerbil::chooseTarget(wave64), "generic");
  gerbil::vk::DeviceInfo noHalf = device({"VK_NV_cooperative_matrix"}, {}, kNvidia);
  noHalf.shaderFloat16 = false;
  EXPECT_EQ(gerbil::chooseTarget(noHalf), "generic");
  gerbil::vk::DeviceInfo noModel = device({"VK_KHR_cooperative_matrix"}, {kShape});
  noModel.vulkanMemoryModel = false;
  EXPECT_EQ(gerbil::chooseTarget(noModel), "generic");
  EXPECT_EQ(gerbil::chooseTarget(device({})), "generic");
}

} // namespace
