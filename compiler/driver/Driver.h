// The gerbilc driver: config.json -> arch spec -> gerbil module -> pass pipeline -> codegen -> plan.
#pragma once

#include "gerbil/Passes/TargetProfile.h"
#include "runtime/vulkan/Device.h"

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace gerbil {

struct CompileOptions {
  std::string configPath;
  std::string outputPath;          // the plan (or "-" for stdout with --emit=mlir*)
  std::string emit = "plan";       // plan | mlir | mlir-opt | glsl
  std::string weightDtype = "f32"; // f32 | f16
  std::string kvDtype = "auto";    // what the KV cache holds: f32 | f16 | auto (kvCacheDtype)
  std::string target = "generic";  // a target profile, or auto
  std::string archSpecDir;         // extra specs, searched before the built-in ones
  int64_t maxSequence = 0;         // 0: min(max_position_embeddings, 2048)
  int64_t prefillChunk = 0;        // 0: min(maxSequence, 256)
  bool subgroupOps = true;         // false: kernels reduce through shared memory only (--no-subgroup-ops)
  bool fuseLogitsArgmax = false;   // decode picks the token in the LM head's gemv (--fuse-logits-argmax)
  bool fuseEmbedding = false;      // decode's first q/k/v gemv reads the token's row (--fuse-embedding)
  int64_t prefetchBytes = -1;      // --prefetch-bytes: decode attention's weight prefetch; -1: the target's
  int64_t prefetchPageBytes = -1;  // --prefetch-page-bytes: and its page stride; -1: the target's
  bool spreadPages = false;        // --spread-pages: page words in each decode gemv, for the next launch
  bool bufferAddresses = false;    // --buffer-addresses: kernels reach buffers by device address
  bool prefetchBeside = false;     // --prefetch-beside: an attention's prefetch as a launch beside it
  std::vector<std::string> kernelDefines; // --kernel-define [FAMILY:]NAME[=VALUE]: kernel variants
};

struct CompileSummary {
  std::string architecture;
  std::string target; // the profile compiled for (auto resolved)
  int64_t dispatchesPerStep = 0;
  int64_t prefillDispatches = 0; // per prefill step (chunk)
  int64_t kernels = 0;
  uint64_t weightBytes = 0;
  uint64_t arenaBytes = 0;
  uint64_t kvCacheBytes = 0;
  std::string kvCacheDtype; // f32 | f16
  uint64_t planBytes = 0;
  // What one decode token moves, from the decode schedule: weight bytes read (an embedding lookup reads one
  // row), activation bytes read and written, and KV-cache bytes attention reads per position of context.
  uint64_t decodeWeightBytes = 0;
  uint64_t decodeActivationBytes = 0;
  uint64_t decodeKVBytesPerPosition = 0;
};

// Exit codes that mean something to scripts.
enum ExitCode : int { kExitOk = 0, kExitUsage = 2, kExitBadInput = 3, kExitInternal = 4, kExitIO = 5 };

// Compiles and writes the output; errors go to `err` as "gerbilc: error: ..." and give a non-zero code.
int compileModel(const CompileOptions &options, std::ostream &out, std::ostream &err,
                 CompileSummary *summary);

// chooseTarget (TargetChoice.h) of the device gerbil-exec would pick, with a note on `err`; generic without
// any device.
std::string autoTarget(std::ostream &err);

// What the KV cache holds for --kv-dtype `requested` (f32, f16 or auto) on a resolved target: auto is f16
// with f16 weights on a cooperative-matrix target (where the tensor-core prefill attention runs, for head
// dims it fits), else f32.
std::string kvCacheDtype(const std::string &requested, const mlir::gerbil::TargetProfile &target,
                         const std::string &weightDtype);

// Prints the architecture registry.
int listArchitectures(const std::string &archSpecDir, std::ostream &out, std::ostream &err);

} // namespace gerbil
