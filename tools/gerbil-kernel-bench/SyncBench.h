// gerbil-kernel-bench sync: what ordering a chain of dependent decode kernels costs on a device. It runs the
// same square gemv phases (y = W_p x, then x = y, over rotating weights) two ways:
//  - dispatches: one dispatch a phase with a pipeline barrier after each (how decode runs now);
//  - persistent: one dispatch whose workgroups all stay resident and meet at a grid barrier (an atomic
//    arrival count, polled with plain loads) between phases, each workgroup loading its next weights
//    before it waits;
//  - chained: one dispatch a phase with no barrier between them, each phase's workgroups loading their
//    weights and then waiting for the arrivals of the phase before (the grid barrier's counter);
//  - companion: the dispatches, and beside them on a second queue of the device (where it has one) a
//    prefetcher that follows their progress through memory and loads each phase's weights into the L2 while
//    the phase before runs: what a decode's latency-bound launches would gain if their weights came from the
//    L2 without any launch of theirs loading them (a barrier waits for everything before it on its queue);
// and each also without work (--empty), which leaves the cost of the ordering alone. The result of the
// last phase is checked against the host's, so that a barrier that does not hold cannot look fast.
#pragma once

#include "compiler/codegen/ShaderCompiler.h"
#include "runtime/vulkan/Device.h"
#include "tools/gerbil-kernel-bench/Defines.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

namespace gerbil::bench {

struct SyncOptions {
  uint32_t n = 896;          // rows and columns of each phase's matrix
  uint32_t phases = 96;      // dependent phases a timed run chains
  uint32_t workgroups = 132; // the persistent grid: no more than the device keeps resident at once
  uint32_t workgroupSize = 256;
  uint32_t companionWorkgroups = 32; // the companion prefetcher's grid
  uint32_t companionAhead = 1;       // it loads phase p + this while phase p runs
  bool empty = false;  // no gemv: the ordering alone
  uint32_t copies = 0; // weight matrices the phases rotate over (0: up to 256 MiB of them, past the L2)
  int repeats = 20;
  bool statistics = false; // add each way's driver statistics (the context must capture them)
  // #defines for the kernel: SYNC_NO_W=1 (no weight loads), SYNC_NO_X=1 (no input read), SYNC_NO_STORE=1
  // (no result stored), SYNC_NO_REDUCE=1 (no subgroupAdd) and SYNC_STORE_ONE=1 (one element stored) take
  // one part out of a phase, SYNC_GUARD_STORE=1 adds a store that never happens (the result check is then
  // skipped); SYNC_BDA=1 reaches the buffers through device addresses in the push constants (a context made
  // with bufferDeviceAddress); SYNC_POLL=EXPR is what the grid barrier's wait reads (default arrived_, a
  // plain coherent load; atomicAdd(arrived_,0u) polls with atomics); SYNC_CODE=n adds n dependent
  // multiply-adds, as a loop or (SYNC_CODE_UNROLLED=1) as n instructions; SYNC_PREFETCH_NEXT=1 has each
  // dispatch also load the next phase's weights (into the L2), as a kernel could for the one after it;
  // SYNC_STAGE_X=1 reads the input once a workgroup into shared memory for its subgroups.
  std::vector<Define> defines;
};

// Whether the defines ask for the SYNC_BDA variant: its context must allocate for device addresses.
bool syncTakesAddresses(const std::vector<Define> &defines);

// Runs the four ways and returns {"dispatch_us", "persistent_us", "chained_us", "companion_us" (per phase,
// medians; companion_us null without a second queue), "companion_stalls" (runs in which the prefetcher gave
// up waiting), "max_error", ...}.
// Throws std::runtime_error on a shape it cannot run, when the persistent grid stalled (2^20 polls), or when
// a result is off by more than 1e-3 of its largest magnitude.
nlohmann::json runSyncBench(vk::Context &ctx, codegen::ShaderCompiler &compiler, const SyncOptions &options);

} // namespace gerbil::bench
