// What every mode of gerbil-exec shares: exit codes, timing, the logits dump and the device list.
#pragma once

#include "runtime/support/Clock.h"
#include "tools/ExitCodes.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gerbil::tool {

using enum cli::ExitCode;

using support::Clock;
using support::msSince;
inline double perSecond(double count, double ms) {
  return ms > 0 ? count / (ms / 1000.0) : 0.0;
}

// A safetensors file with `logits` [prompt, vocab] and, when tokens were generated, `step_logits`.
void writeLogits(const std::string &path, const std::vector<float> &prompt, const std::vector<float> &steps,
                 int64_t vocab);

int listDevices(bool json);
// --device-info: every device, or only `device` when it is not -1.
int deviceInfo(int device, bool json);
// --plan-info: the plan's model, target, sizes and device requirements (PlanInfo.cpp).
int planInfo(const std::string &path, bool json);

} // namespace gerbil::tool
