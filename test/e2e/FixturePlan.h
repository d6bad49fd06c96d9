// What the tests that run a fixture model through the executor share: the fixture compiled by gerbilc into
// a plan, and a Vulkan context to run it on.
#pragma once

#include "runtime/plan/Plan.h"
#include "runtime/vulkan/Device.h"
#include "test/e2e/ToolRun.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace gerbil::e2e {

// The plan gerbilc compiles from `fixture`'s config.json with `flags` (a fatal failure if it cannot).
inline void compileFixture(const fs::path &fixture, const std::string &flags, plan::Plan &out) {
  fs::path plan = fs::temp_directory_path() /
                  ("gerbil-" + fixture.filename().string() + "-" + std::to_string(::getpid()) + ".plan");
  Result compiled = run((binDir() / "gerbilc").string() + " " + (fixture / "config.json").string() + " -o " +
                        plan.string() + " " + flags);
  ASSERT_EQ(compiled.code, 0) << compiled.output;
  out = plan::readFile(plan.string());
  fs::remove(plan);
}

// A context on the default device, or null (with the reason in `why`) where there is none.
inline std::unique_ptr<vk::Context> contextOrNull(std::string &why) {
  try {
    return std::make_unique<vk::Context>(vk::ContextOptions{});
  } catch (const vk::NoDeviceError &e) {
    why = e.what();
    return nullptr;
  }
}

} // namespace gerbil::e2e
