// Target profiles: which kernels the compiler writes for a kind of device, and what the plan then requires
// of it. `generic` runs on every Vulkan 1.2 device (lavapipe included); `nvidia` runs the prefill matmuls on
// tensor cores through VK_KHR_cooperative_matrix, with decode tuned on the H200; `khr` the same kernels for
// any device that multiplies 16 × 16 × 16 f16 fragments into f32 in subgroups of 32. Plain C++: the
// driver picks a profile for `--target auto` from a device query without MLIR.
#pragma once

#include "gerbil/Passes/KernelShapes.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mlir::gerbil {

// Tiling of the cooperative-matrix matmul (matmul_coop.glsl): a workgroup of warpsT × warpsN subgroups
// computes tileT tokens × tileN outputs, stepping through K by tileK.
struct CoopMatMulTiling {
  int64_t tileT, tileN, tileK, warpsT, warpsN;
  int64_t stages = 2; // shared-memory buffers of the staged slices (matmul_coop.glsl's COOP_STAGES: 1 or 2)
  // Workgroups that share a tile's K (grid z, matmul_coop.glsl's SPLIT_K): each sums its part of the slices
  // into the scratch, and the tile's last to finish adds the parts and writes the result. Plain projections
  // and the grouped q/k/v (the gate/up keeps 1: its epilogue needs both whole sums of an output).
  int64_t splitK = 1;
  int64_t workgroup() const { return warpsT * warpsN * 32; }
};

// The Vulkan extension a cooperative-matrix profile's kernels use. The kernels are written against
// GL_NV_cooperative_matrix (Debian 12's glslang has no GL_KHR_cooperative_matrix); for KHR their SPIR-V is
// retargeted after compiling (compiler/codegen/CooperativeMatrixKHR.h).
enum class CooperativeMatrixApi { NV, KHR };

// The fragments the cooperative-matrix kernels multiply, as the runtime names a device's shapes
// (vk::DeviceInfo::cooperativeMatrixKHRShapes): a plan of the khr profile requires it.
inline constexpr const char *kCooperativeMatrixShape = "16x16x16 f16*f16+f32->f32";

struct TargetProfile {
  std::string name;
  std::string description;
  bool cooperativeMatrix = false; // prefill matmuls on cooperative matrices (f16 × f16 → f32)
  uint32_t subgroupSize = 0;      // the subgroup size the kernels assume; 0: any
  CoopMatMulTiling coopTiling{};
  std::vector<std::string> deviceExtensions; // Vulkan extensions the plan's kernels need
  bool tilingGiven = false;                  // --target named the tiling: every matmul uses it
  // Weight bytes a decode attention launch loads into the L2 for the projections after it
  // (gerbil-prefetch-weights); 0: none.
  int64_t decodePrefetchBytes = 0;
  // and the stride of the words it reads of the rest of their weights, to cache their pages' address
  // translations; 0: none.
  int64_t decodePrefetchPageBytes = 0;
  // Only for launches that read at most decodePrefetchMaxLaunchBytes of matrices (the data; 0: any), and
  // models of at least decodePrefetchMinModelBytes of weights (the pages; and the large models' budget below).
  int64_t decodePrefetchMaxLaunchBytes = 0;
  int64_t decodePrefetchMinModelBytes = 0;
  // Models of at least decodePrefetchMinModelBytes instead prefetch this much of the next launch's data,
  // whatever its size, in a launch beside the attention (gerbil-prefetch-weights' large-model-budget); 0:
  // the same as other models.
  int64_t decodeLargeModelPrefetchBytes = 0;
  CooperativeMatrixApi cooperativeMatrixApi = CooperativeMatrixApi::NV;
  uint32_t vendorId = 0; // the PCI vendor it is tuned for, which `--target auto` asks of a device; 0: any
  // The grouped gate/up and q/k/v projections' tilings, where --target names them (nvidia@gate-up=TILING,
  // nvidia@qkv=TILING), and the wide plain projections' (nvidia@wide=TILING: see coopTilingFor).
  std::optional<CoopMatMulTiling> gateUpTiling = std::nullopt, qkvTiling = std::nullopt,
                                  wideTiling = std::nullopt;
  // The decode attention's query heads a workgroup and splits where --target names them
  // (nvidia@decode-query-heads=N, nvidia@decode-splits=N, to time in the model); 0, or query heads that do
  // not divide a kv head's: the catalog's (decodeAttentionShape). Its `workgroups`: the profile's aim for
  // long contexts.
  DecodeAttentionChoice decodeAttention = {};
  // The decode gemvs' workgroups hold at least this many invocations, more pairs of rows each (gemvShape),
  // where --target names it (PROFILE@gemv-workgroup=N, to time in the model); 0: the catalog's (128, or a
  // pair's teams). The gemv that also picks the greedy token keeps the catalog's.
  int64_t decodeGemvWorkgroup = 0;
};

// NVIDIA's PCI vendor id.
inline constexpr uint32_t kNvidiaVendorId = 0x10de;

// Prefill matmuls with N >= 2048 outputs (a grouped projection's rows counted together) or rows of K >=
// 4096 get 128 × 128 tiles on 4 × 4 subgroups of 32 × 32 (the gate/up on 2 × 4 of 64 × 32: see
// groupPrefillTiling), stepping K by 64 in one staging buffer (36 KiB; two barriers a slice but half as
// many slices), their fragments loaded a step ahead but for the gate/up's (MatMulKernel.cpp); narrower ones
// the profile's 64 × 64 tiles, also 64 deep. Through VK_KHR_cooperative_matrix 4 × 4 won on the plain ones
// (H100, sweeps bk and bl, µs): 8B o 98.4 → 87.3, 8B down 264.9 → 259.3, 1B o (split 2) 39.4 → 37.1, 1B
// down 91.8 → 90.6, Qwen down (split 4) 42.1 → 40.7. The figures below are of the NV way, before. Sweeps
// ai–ap on the H200 (µs, 512 tokens), from the tilings before (128 × 256 × 32 on 2 × 4 for N > 4096 and K >=
// 2048, 128 × 128 × 32 in two buffers on 4 × 4 for N and K >= 2048, 64 × 64 × 32 in two buffers), through 128
// × 128 × 64 on 4 × 4 (7755823):
//   Llama-3-8B   gate/up 805 → 666 → 615, q/k/v 213 → 195 → 167, down 407 → 342 → 302, o 131 → 110 → 109
//   Llama-3.2-1B gate/up 212 → 201 → 186, q/k/v 63 → 53 → 47, down 133 → 112 → 102 (split 2),
//                o 47 → 42 → 41.5 (split 2)
//   Qwen2.5-0.5B gate/up 87 → 72 → 68, down 51 → 44 → 44 (split 4); on 64 × 64 × 64: q/k/v 28 → 20, o 21 → 19
// Before them (sweeps s, ag): 64 × 64 tiles leave most multiprocessors idle on 1B-sized projections unless
// split over K (Llama-3.2-1B: 77 ms against 34 a prefill); 128 × 128 tiles of Qwen's q/k/v (K = 896) lose
// to 64 × 64 (sweeps aj, ap: 29.5 on 4 × 4, 24.8 on 2 × 4, against 20.2 µs).
inline constexpr int64_t kWideCoopMatMul = 2048, kLongRowsCoopMatMul = 4096, kMidCoopMatMul = 3072;

// Workgroup columns of the cooperative-matrix matmuls (grid x of matmul_coop.glsl), shared by the kernel
// catalog's grids and codegen's: a plain projection's n outputs in tiles of tileN; gate/up tiles hold tileN /
// 2 outputs of each matrix; q, k and v each take whole tiles (GROUPS_Q, GROUPS_K, GROUPS_V, in that order).
inline int64_t coopTiles(const CoopMatMulTiling &tiling, int64_t n) {
  return (n + tiling.tileN - 1) / tiling.tileN;
}

// The K split of a narrow plain projection: doubled, up to 4, while the tile columns times the split stay
// within kSplitColumns and each part keeps kSplitDepth of K (14 slices of 32). Small models' down and o
// projections have few columns (Qwen2.5-0.5B's: 14 of 64 outputs), so a 512-token prefill ran them on 112
// workgroups of 4 subgroups, one a multiprocessor. Sweep x on the H200 (µs, 512 tokens, residual epilogue,
// 32-wide slices):
//   Qwen down (896 / 4864):  64 × 64 142, split 2 82, 4 86, 8 92; 128 × 128 split 4 69, 8 78
//   Qwen o (896 / 896):      64 × 64 35, split 2 25, 4 28
//   1B down (2048 / 8192):   64 × 64 262, split 2 260, 4 264; 128 × 128 split 4 204
//   1B o (2048 / 2048):      64 × 64 69, split 2 73 (the rule's one loss, 6%); 128 × 128 split 4 70
//   8B down and o (128 × 128, 32 columns): split 2 3% and 1% slower; wide projections are not split.
// 128 × 128 tiles (one workgroup a multiprocessor) split only up to kSplitColumns / 2: 1B down on 4 × 4
// subgroups split 2 132 µs, 4 138 (sweep ag); on 2 × 4 with 64-wide slices 102 and 110, 1B o 41.5 and
// 48.5 (sweep ap).
inline constexpr int64_t kSplitColumns = 64, kSplitDepth = 14 * 32, kMaxSplitK = 8, kMaxChosenSplitK = 4;
inline int64_t coopSplitK(const CoopMatMulTiling &tiling, int64_t n, int64_t k) {
  const int64_t columns = coopTiles(tiling, n);
  const int64_t splitColumns = tiling.tileT * tiling.tileN > 64 * 64 ? kSplitColumns / 2 : kSplitColumns;
  int64_t split = 1;
  while (split < kMaxChosenSplitK && columns * split * 2 <= splitColumns && k / (split * 2) >= kSplitDepth)
    split *= 2;
  return split;
}

// Whether a projection of n outputs (a grouped one's rows together) and K = k gets the wide tiles.
inline bool isWideCoopMatMul(int64_t n, int64_t k) {
  return n >= kWideCoopMatMul || k >= kLongRowsCoopMatMul;
}
// The catalog's tiling of a projection of n outputs and K = k (see kWideCoopMatMul), split over K where its
// tile columns are few: wide tiles for N < 3072 (Llama-3.2-1B's o and down in 2, Qwen2.5-0.5B's down in 4),
// the profile's for short ones too (Qwen's o in 2).
inline CoopMatMulTiling catalogCoopTiling(const TargetProfile &profile, int64_t n, int64_t k) {
  if (profile.tilingGiven || !profile.cooperativeMatrix) return profile.coopTiling;
  CoopMatMulTiling tiling =
      isWideCoopMatMul(n, k) ? CoopMatMulTiling{128, 128, 64, 4, 4, 1} : profile.coopTiling;
  if (n < kMidCoopMatMul) tiling.splitK = coopSplitK(tiling, n, k);
  return tiling;
}
// Plain projections of at least kTwoByFourRows outputs (Llama-3-8B's o and down) take the catalog's wide
// tiles on 2 × 4 subgroups of 64 × 32 instead of 4 × 4 of 32 × 32: in the model (H100, 26b2f77, the
// profile of `@wide=128x128x64:2x4:1` against the default in one call) the 8B's down 256.2 → 251.2 µs a
// layer and o 80.7 → 78.7, but the 1B's o (2048 outputs) 37.8 → 40.5 and Qwen's down (896, split in 4)
// 42.8 → 46.5; alone (sweeps cj, ck) the 8B's o 78.9 → 76.2 and down 246.5 → 243.4. The grouped
// projections start from catalogCoopTiling, so the 8B's q/k/v keeps 4 × 4 (on 2 × 4 it lost, sweep bk).
// The LM heads' tensor-core kernels (all prompt rows' logits) follow, untimed: the gate/up, as wide, is
// fastest on 2 × 4 too (sweep cj).
inline constexpr int64_t kTwoByFourRows = 4096;
// A plain projection's tiling: the catalog's, or for a wide one the tiling --target's @wide= gives (to time
// another against the catalog's in the model), split over K as that tiling says or, where it says nothing
// (no split), as the catalog would split it.
inline CoopMatMulTiling coopTilingFor(const TargetProfile &profile, int64_t n, int64_t k) {
  if (!profile.cooperativeMatrix || !isWideCoopMatMul(n, k)) return catalogCoopTiling(profile, n, k);
  if (profile.wideTiling) {
    CoopMatMulTiling tiling = *profile.wideTiling;
    if (tiling.splitK == 1 && n < kMidCoopMatMul) tiling.splitK = coopSplitK(tiling, n, k);
    return tiling;
  }
  // The catalog's wide tiles, on 4 × 4 subgroups unless --target gives a tiling.
  CoopMatMulTiling tiling = catalogCoopTiling(profile, n, k);
  if (!profile.tilingGiven && n >= kTwoByFourRows) tiling.warpsT = 2;
  return tiling;
}
inline int64_t coopGateUpColumns(const CoopMatMulTiling &tiling, int64_t n) {
  return (n + tiling.tileN / 2 - 1) / (tiling.tileN / 2);
}
inline int64_t coopQKVColumns(const CoopMatMulTiling &tiling, int64_t nq, int64_t nk, int64_t nv) {
  return coopTiles(tiling, nq) + coopTiles(tiling, nk) + coopTiles(tiling, nv);
}
// The tiling of a grouped projection's one prefill launch (kernel catalog's groupPrefillKernel): k the
// reduction width, n the outputs of each of gate and up, or the rows of q, and nK, nV those of k and v.
// Gate/up tiles hold gate and up rows of TILE_N / 2 outputs: tiled like a matmul of 2n rows; q/k/v like one
// of all their rows. The gate/up is never split over K (its epilogue needs both whole sums of an output);
// the q/k/v in two where it has at least kSplitQKVRows rows of K >= kSplitQKVDepth, or as --target's @qkv=
// says. Sweep bu (H100, 4ee8206/26a590d, µs at 512 tokens): Llama-3-8B's (6144 rows of 4096: 192 workgroups
// of 128 × 128, 1.45 waves of 132) 152.3 unsplit, 140.8 in 2, 169.1 in 3, 159.3 in 4; in the model 156.1 ->
// 144.9 µs a layer, prefill 35.67 -> 35.22 ms. Llama-3.2-1B's (3072 of 2048: 96 workgroups, under a wave)
// 42.1 -> 55.9 in 2, Qwen2.5-0.5B's 17.6 -> 24.7: fewer rows lose.
inline constexpr int64_t kSplitQKVRows = 6144, kSplitQKVDepth = 4096;
inline CoopMatMulTiling groupPrefillTiling(const TargetProfile &profile, bool gateUp, int64_t k, int64_t n,
                                           int64_t nK = 0, int64_t nV = 0) {
  if (gateUp && profile.gateUpTiling) return *profile.gateUpTiling;
  if (!gateUp && profile.qkvTiling) return *profile.qkvTiling;
  CoopMatMulTiling tiling = catalogCoopTiling(profile, gateUp ? 2 * n : n + nK + nV, k);
  tiling.splitK = 1;
  // The gate/up keeps 2 × 4 subgroups of 64 × 32 on 128 × 128 tiles: on 4 × 4 the 8B's took 540.6 µs
  // against 531.0 (H100, sweep bk). The grouped q/k/v has 4 × 4 like the plain wide projections: on 2 × 4
  // it ran 56 → 61 µs a layer (Llama-3.2-1B) and 200 → 203 (Llama-3-8B) in the model (profiles of 7755823
  // and 2c5a174), 154 → 164 µs through KHR (sweep bk).
  if (gateUp && !profile.tilingGiven && tiling.tileT == 128 && tiling.tileN == 128) tiling.warpsT = 2;
  if (!gateUp && !profile.tilingGiven && n + nK + nV >= kSplitQKVRows && k >= kSplitQKVDepth)
    tiling.splitK = 2;
  return tiling;
}

// What an H200's decode attention loads for the launches after it (BENCHMARKS.md, 3384a01-0ab0874): up to
// 16 MiB of the next launch's weights, and one word every 2 MiB of the rest up to the next attention.
// Llama-3-8B's decode 215 -> 218 tok/s with the data alone (the o projection 14.0 -> 10.8 µs, the
// attention 12.3 -> 13.0), 224.5 with the pages too. The gemvs ran 5-12% slower with their weights spread
// over 16 GiB than over 512 MiB (sweep av: address translation); one word every 2 MiB gets half of that back
// for 2.6 µs of attention, every 512 KiB 75% for 15 µs, every 64 KiB all of it for 67 µs. Loading 16 MiB over
// the MLP too made the small models' attention (7 µs) 3.4 µs longer, more than it saved (so the data is the
// next launch's only, gerbil-prefetch-weights' data-launches). Measured at 4790b6f and 2572f6d: Llama-3.2-1B
// 1117 tok/s with its o's data (8 MiB: 6.2 -> 5.4 µs for 3.0 µs more attention) and pages against 1137 and
// 1143 without; Qwen2.5-0.5B 1355 with its o's data alone (1.6 MiB: 5.7 -> 4.7 µs for 0.2 µs) against 1322
// without. The attention launch takes about as long as its prefetch, which a larger launch does not win
// back; a small one does (its first loads skip the trip to memory). Llama-3-8B's o (32 MiB) read 10.5 µs
// instead of 13.1 with 16 MiB of it loaded, but its attention launch took 16.9 µs instead of 13.0 (3b61124,
// two query heads a workgroup): 225.7 tok/s against 228.9 with the page words alone. So only launches of at
// most 2 MiB get their data. Weights under 4 GiB keep their address translations (sweep ax: 3.5 GiB of
// copies lose nothing): no page words for them. Since the runtime gives each weight matrix an allocation
// dedicated to it (f4960b9), whose translations the gemvs no longer miss (sweep cm), the page words only
// cost their attention time: the 8B decoded at 180.5 tok/s with them against 182.7 without (H100, f4960b9),
// so there are none by default (`--prefetch-page-bytes` still reads them). Models of 4 GiB or more (the 8B,
// whose attention takes 11 µs on an H200) read 8 MiB of their o's 32 in a launch beside the attention: 238.9
// -> 239.5 tok/s on the H200, 178.7 -> 179.7 on an H100 (twice; 12, 16 and 24 MiB gained less or lost;
// a48cac9, BENCHMARKS.md). In the attention's own launch 16 MiB had lost 1.4% on the H200 (3b61124).
inline constexpr int64_t kNvidiaDecodePrefetchBytes = 2ll << 20;
inline constexpr int64_t kNvidiaDecodePrefetchPageBytes = 0;
inline constexpr int64_t kNvidiaDecodePrefetchMaxLaunchBytes = 2ll << 20;
inline constexpr int64_t kNvidiaDecodePrefetchMinModelBytes = 4ll << 30;
inline constexpr int64_t kNvidiaDecodeLargeModelPrefetchBytes = 8ll << 20;
// The decode attention's workgroups for long contexts on NVIDIA (DecodeAttentionChoice::workgroups): about
// one wave of an H100's or H200's 132 multiprocessors. Sweep de and call de (H200, position 3840,
// BENCHMARKS.md 2026-12-07): the 8B's shape 28.1 µs with 512 (15 splits, 480 workgroups of 232 registers,
// one a multiprocessor) against 18.5 with 4 splits (128 workgroups), decode 208.8 -> 225.4 tok/s; the 1B's
// 17.0 -> 14.0 µs (4 splits; 8: 13.3), 954 -> 1000 tok/s (8: 1012); Qwen2.5-0.5B's 11.2 -> 10.7 with 8
// splits (112 workgroups), 1231 -> 1243 tok/s. Contexts up to 4 × 256 positions are cut as before.
inline constexpr int64_t kNvidiaDecodeAttentionWorkgroups = 128;
// Heads of up to 64 dims take 8 splits instead (DecodeAttentionChoice::smallHeadSplits): their kernel's ~128
// registers leave room for two workgroups a multiprocessor, and the same call found 8 the fastest for both
// such shapes (the 1B's 32 columns: 13.3 µs against 14.0 with the 4 that 128 workgroups give, 1000 -> 1012
// tok/s; Qwen2.5-0.5B's 14 columns: 10.7 with 8, 13.5 with 4, 11.2 with 15), where the 8B's 128-dim heads
// (254 registers, one workgroup a multiprocessor) lost with 8 (22.2 against 18.5).
inline constexpr int64_t kNvidiaSmallHeadDecodeSplits = 8;

inline const std::vector<TargetProfile> &targetProfiles() {
  static const std::vector<TargetProfile> profiles = [] {
    const TargetProfile generic{
        "generic", "any Vulkan 1.2 device: tiled f32 matmuls, no subgroup size assumed", false, 0, {}, {}};
    // Hopper: 16×16×16 f16 fragments, 4 subgroups of 32 per workgroup, each 32 × 32 outputs, K in steps of
    // 64 through one staging buffer (18 KiB of the 48 KiB of shared memory). Through the KHR extension: the
    // same kernels prefilled 12-21% faster than through VK_NV_cooperative_matrix on the H200 (BENCHMARKS.md,
    // 57da83f: Llama-3-8B 43.2 -> 37.3 ms; sweep bj).
    TargetProfile nvidia{"nvidia",
                         "NVIDIA (Turing and later, drivers with VK_KHR_cooperative_matrix): prefill matmuls "
                         "on tensor cores, subgroup size 32",
                         true,
                         32,
                         {64, 64, 64, 2, 2, 1},
                         {"VK_KHR_cooperative_matrix"},
                         false,
                         kNvidiaDecodePrefetchBytes,
                         kNvidiaDecodePrefetchPageBytes,
                         kNvidiaDecodePrefetchMaxLaunchBytes,
                         kNvidiaDecodePrefetchMinModelBytes,
                         kNvidiaDecodeLargeModelPrefetchBytes,
                         CooperativeMatrixApi::KHR,
                         kNvidiaVendorId};
    nvidia.decodeAttention.workgroups = kNvidiaDecodeAttentionWorkgroups;
    nvidia.decodeAttention.smallHeadSplits = kNvidiaSmallHeadDecodeSplits;
    // The nvidia profile's kernels through VK_NV_cooperative_matrix as written (before 57da83f's
    // measurement, the default), for NVIDIA drivers without the KHR extension.
    TargetProfile nvidiaNv = nvidia;
    nvidiaNv.name = "nvidia-nv";
    nvidiaNv.description = "NVIDIA drivers without VK_KHR_cooperative_matrix: the nvidia kernels through "
                           "VK_NV_cooperative_matrix";
    nvidiaNv.deviceExtensions = {"VK_NV_cooperative_matrix"};
    nvidiaNv.cooperativeMatrixApi = CooperativeMatrixApi::NV;
    // The nvidia profile's kernels and tilings (tuned on the H200), without its decode tuning, which was
    // measured there only.
    TargetProfile khr{
        "khr",
        "any device with VK_KHR_cooperative_matrix multiplying 16x16x16 f16 fragments into f32, "
        "subgroup size 32: prefill matmuls on its matrix units",
        true,
        32,
        {64, 64, 64, 2, 2, 1},
        {"VK_KHR_cooperative_matrix"}};
    khr.cooperativeMatrixApi = CooperativeMatrixApi::KHR;
    return std::vector<TargetProfile>{generic, nvidia, nvidiaNv, khr};
  }();
  return profiles;
}

// nullptr when there is no profile of that name.
inline const TargetProfile *findTargetProfile(std::string_view name) {
  for (const TargetProfile &p : targetProfiles())
    if (p.name == name) return &p;
  return nullptr;
}

// A matmul tiling as --target spells it, "TxNxK:WTxWN[:S[:P]]" (tokens × outputs × reduction step per
// workgroup, subgroups along tokens × outputs, optionally the staging buffers, 1 or 2 (default), and the K
// split of plain projections, or of the q/k/v given as @qkv= (parseTarget), 1 to 8 (default 1)).
// std::nullopt when it does not parse.
inline std::optional<CoopMatMulTiling> parseCoopTiling(std::string_view spec) {
  int64_t v[5], stages = 2, split = 1;
  int used = 0, usedWithStages = 0, usedWithSplit = 0;
  std::string text(spec);
  if (std::sscanf(text.c_str(), "%ldx%ldx%ld:%ldx%ld%n:%ld%n:%ld%n", &v[0], &v[1], &v[2], &v[3], &v[4], &used,
                  &stages, &usedWithStages, &split, &usedWithSplit) < 5)
    return std::nullopt;
  const int length = static_cast<int>(text.size());
  if (used != length && usedWithStages != length && usedWithSplit != length) return std::nullopt;
  for (int64_t x : v)
    if (x <= 0 || x > 1024) return std::nullopt;
  if (stages != 1 && stages != 2) return std::nullopt;
  if (split < 1 || split > kMaxSplitK) return std::nullopt;
  return CoopMatMulTiling{v[0], v[1], v[2], v[3], v[4], stages, split};
}

// A target as gerbilc's --target spells it: a profile name, and for a cooperative-matrix profile optionally
// its matmul tiling, "nvidia:TILING" (parseCoopTiling; e.g. nvidia:128x128x32:2x4 or nvidia:64x64x32:2x2:2:4)
// for every matmul, and/or "@gate-up=TILING" for the grouped gate/up projections (never split),
// "@qkv=TILING" for the grouped q/k/v (split or not) and "@wide=TILING" for the wide plain projections (see
// coopTilingFor), each at most once, after the first if it is given ("nvidia:TILING@gate-up=TILING@qkv=
// TILING"), and for any profile "@decode-query-heads=N" and "@decode-splits=N" (1 to 64 each, at most once)
// for the decode attention and "@gemv-workgroup=N" (32 to 1024, a multiple of 32) for the decode gemvs, to
// tune on a device. std::nullopt when it does not parse.
inline std::optional<TargetProfile> parseTarget(std::string_view spec) {
  const size_t at = spec.find('@'), colon = spec.substr(0, at).find(':');
  const TargetProfile *base = findTargetProfile(spec.substr(0, std::min(colon, at)));
  if (!base) return std::nullopt;
  TargetProfile profile = *base;
  if (colon == std::string_view::npos && at == std::string_view::npos) return profile;
  if (colon != std::string_view::npos) { // the tiling of every matmul
    if (!profile.cooperativeMatrix) return std::nullopt;
    std::optional<CoopMatMulTiling> tiling =
        parseCoopTiling(spec.substr(colon + 1, at == std::string_view::npos ? at : at - colon - 1));
    if (!tiling) return std::nullopt;
    profile.coopTiling = *tiling;
    profile.tilingGiven = true;
  }
  // The grouped and wide projections' own tilings, the decode attention's query heads and splits.
  for (size_t from = at; from != std::string_view::npos;) {
    const size_t next = spec.find('@', from + 1);
    const std::string_view part = spec.substr(from, next == std::string_view::npos ? next : next - from);
    struct Count {
      std::string_view prefix;
      int64_t *slot;
      int64_t most, multipleOf;
    };
    const Count counts[] = {{"@decode-query-heads=", &profile.decodeAttention.queryHeads, 64, 1},
                            {"@decode-splits=", &profile.decodeAttention.splits, 64, 1},
                            {"@gemv-workgroup=", &profile.decodeGemvWorkgroup, 1024, 32}};
    if (const Count *which = std::find_if(std::begin(counts), std::end(counts),
                                          [&](const Count &c) { return part.starts_with(c.prefix); });
        which != std::end(counts)) {
      const std::string_view digits = part.substr(which->prefix.size());
      int64_t count = 0;
      const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
      if (error != std::errc() || end != digits.data() + digits.size() || count < 1 || count > which->most ||
          count % which->multipleOf != 0 || *which->slot != 0)
        return std::nullopt;
      *which->slot = count;
      from = next;
      continue;
    }
    const std::pair<std::string_view, std::optional<CoopMatMulTiling> *> overrides[] = {
        {"@gate-up=", &profile.gateUpTiling}, {"@qkv=", &profile.qkvTiling}, {"@wide=", &profile.wideTiling}};
    const auto *which = std::find_if(std::begin(overrides), std::end(overrides),
                                     [&](const auto &o) { return part.starts_with(o.first); });
    if (which == std::end(overrides) || !profile.cooperativeMatrix) return std::nullopt;
    std::optional<CoopMatMulTiling> &slot = *which->second;
    std::optional<CoopMatMulTiling> tiling = parseCoopTiling(part.substr(which->first.size()));
    if (!tiling || slot || (&slot == &profile.gateUpTiling && tiling->splitK != 1)) return std::nullopt;
    slot = tiling;
    from = next;
  }
  profile.name = std::string(spec);
  return profile;
}

} // namespace mlir::gerbil
