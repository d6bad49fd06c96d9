// gerbilc --target auto: the profile chosen for a device description.
#include "compiler/driver/TargetChoice.h"

#include <gtest/gtest.h>

namespace {

gerbil::vk::DeviceInfo device(std::vector<std::string> extensions, std::vector<std::string> khrShapes = {}) {
  gerbil::vk::DeviceInfo d;
  d.name = "test device";
  std::sort(extensions.begin(), extensions.end()); // DeviceInfo keeps them sorted
  d.extensions = extensions;
  d.cooperativeMatrix = d.hasExtension("VK_KHR_cooperative_matrix");
  d.cooperativeMatrixKHRShapes = std::move(khrShapes);
  d.subgroupSize = 32;
  d.shaderFloat16 = d.vulkanMemoryModel = true;
  return d;
}

const std::string kShape = "16x16x16 f16*f16+f32->f32";

TEST(TargetChoice, NvidiaWhereTheNvExtensionIs) {
  EXPECT_EQ(gerbil::chooseTarget(device({"VK_NV_cooperative_matrix", "VK_KHR_cooperative_matrix"}, {kShape})),
            "nvidia");
  EXPECT_EQ(gerbil::chooseTarget(device({"VK_NV_cooperative_matrix"})), "nvidia");
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
  gerbil::vk::DeviceInfo noHalf = device({"VK_NV_cooperative_matrix"});
  noHalf.shaderFloat16 = false;
  EXPECT_EQ(gerbil::chooseTarget(noHalf), "generic");
  gerbil::vk::DeviceInfo noModel = device({"VK_KHR_cooperative_matrix"}, {kShape});
  noModel.vulkanMemoryModel = false;
  EXPECT_EQ(gerbil::chooseTarget(noModel), "generic");
  EXPECT_EQ(gerbil::chooseTarget(device({})), "generic");
}

} // namespace
