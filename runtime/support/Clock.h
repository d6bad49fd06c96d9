#pragma once
// Wall-clock intervals for the timings the runtime and the tools report.
#include <chrono>

namespace gerbil::support {

using Clock = std::chrono::steady_clock;

inline double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

} // namespace gerbil::support
