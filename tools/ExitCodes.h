// The exit codes of the runtime's tools (README): gerbil-exec, gerbil-bench, gerbil-random-weights and
// gerbil-kernel-bench; gerbilc's driver uses the same numbers. CliHelpers.h's exitCodeFor classifies errors.
#pragma once

namespace gerbil::cli {

enum ExitCode : int { kOk = 0, kUsage = 2, kBadInput = 3, kDevice = 4, kIO = 5 };

} // namespace gerbil::cli
