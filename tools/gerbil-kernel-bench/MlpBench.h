// gerbil-kernel-bench mlp: a decode step's MLP (RMSNorm, gate/up with SiLU, down with the residual) as one
// launch whose workgroups each take a slice of the intermediate and add their share of the down projection
// into the result with float atomics (fused_mlp.glsl), chained over phases as decode chains its layers. It
// measures what fusing the two gemv launches would gain before the compiler does it; a chain of its first
// phases (up to 4: the host's chain of a large model's phases takes seconds each) is checked against the
// host's.
#pragma once

#include "compiler/codegen/ShaderCompiler.h"
#include "runtime/vulkan/Device.h"
#include "tools/gerbil-kernel-bench/Defines.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

namespace gerbil::bench {

struct MlpOptions {
  uint32_t hidden = 896, inter = 4864; // Qwen2.5-0.5B's
  uint32_t slice = 32;                 // intermediate rows a workgroup
  uint32_t workgroupSize = 256;
  uint32_t phases = 48;
  uint32_t copies = 0; // weight sets the phases rotate over (0: up to 256 MiB of them, past the L2)
  int repeats = 20;
  bool statistics = false; // add the driver's statistics of the kernel (the context must capture them)
  std::vector<Define> defines;
};

// Returns {"us" (a phase, median), "max_error", "gb_per_s", ...}. Throws std::runtime_error on a shape it
// cannot run, on a device without float atomics on buffers, or when the result is off by more than 1e-3 of
// its largest magnitude.
nlohmann::json runMlpBench(vk::Context &ctx, codegen::ShaderCompiler &compiler, const MlpOptions &options);

} // namespace gerbil::bench
