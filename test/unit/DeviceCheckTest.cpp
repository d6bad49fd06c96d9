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

} // namespace
