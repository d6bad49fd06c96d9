// Codegen proper: reads the dispatched, memory-planned gerbil module and produces the plan, with one
// specialised, validated SPIR-V kernel per distinct dispatch.
#pragma once

#include "compiler/codegen/KernelWriter.h"
#include "runtime/plan/Plan.h"

#include "mlir/IR/BuiltinOps.h"

#include <ostream>
#include <string>
#include <vector>

namespace gerbil::codegen {

struct CodegenOptions {
  std::string target = "generic";
  int64_t maxSequence = 0;  // KV cache positions
  std::ostream *glsl = nullptr;  // when set, receives the GLSL of every distinct kernel
  // Kernels that can reduce with subgroup operations do (the plan then requires subgroup arithmetic);
  // off, they reduce through shared memory only, for devices without it.
  bool subgroupOps = true;
  // Variants of the kernels (gerbilc --kernel-define), applied after codegen's own defines.
  std::vector<KernelDefine> kernelDefines;
  // Kernels reach their buffers through device addresses in push constants instead of descriptor sets
  // (plan::BufferAccess::Addresses; gerbilc --buffer-addresses).
  bool bufferAddresses = false;
  // A decode attention's prefetch (gerbil-prefetch-weights) runs as a launch of its own right after it, with
  // no barrier between them (prefetch_launch.glsl), instead of as extra workgroups of the attention kernel
  // (gerbilc --prefetch-beside).
  bool prefetchBeside = false;
};

// Throws CodegenError naming the dispatch at fault.
plan::Plan buildPlan(mlir::ModuleOp module, const CodegenOptions &options);

} // namespace gerbil::codegen
