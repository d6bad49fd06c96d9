// Target profiles: which kernels the compiler writes for a kind of device, and what the plan then requires
// of it. `generic` runs on every Vulkan 1.2 device (lavapipe included); `nvidia` runs the prefill matmuls on
// tensor cores through VK_NV_cooperative_matrix. Plain C++: the driver picks a profile for `--target auto`
// from a device query without MLIR.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mlir::gerbil {

// Tiling of the cooperative-matrix matmul (matmul_coop.glsl): a workgroup of warpsT × warpsN subgroups
// computes tileT tokens × tileN outputs, stepping through K by tileK.
struct CoopMatMulTiling {
  int64_t tileT, tileN, tileK, warpsT, warpsN;
  int64_t stages = 2; // shared-memory buffers of the staged slices (matmul_coop.glsl's COOP_STAGES: 1 or 2)
  // Workgroups that share a tile's K (grid z, matmul_coop.glsl's SPLIT_K): each sums its part of the slices
  // into the scratch, and the tile's last to finish adds the parts and writes the result. Plain projections
  // only (the grouped ones keep 1).
  int64_t splitK = 1;
  int64_t workgroup() const { return warpsT * warpsN * 32; }
};

struct TargetProfile {
  std::string name;
  std::string description;
  bool cooperativeMatrix = false; // prefill matmuls on GL_NV_cooperative_matrix (f16 × f16 → f32)
  uint32_t subgroupSize = 0;      // the subgroup size the kernels assume; 0: any
  CoopMatMulTiling coopTiling{};
  std::vector<std::string> deviceExtensions; // Vulkan extensions the plan's kernels need
  bool tilingGiven = false;                  // --target named the tiling: every matmul uses it
};

// Wide matmuls (N >= 4096: q/o/down of 7B-class models) get 128 × 128 tiles with 8 subgroups: the H200 ran
// Llama-3-8B's 512-token prefill in 137 ms with them against 202 ms with 64 × 64 ones. Wider ones (N > 4096:
// grouped gate/up of all sizes, grouped q/k/v of 7B-class models) get 128 × 256 tiles with 8 subgroups of
// 64 × 64 in one staging buffer (two do not fit in 48 KiB): 135 against 114 TFLOP/s for an 8B gate
// matrix, 109 against 85 for its q/k/v (with the norm prologue, which they sum over half as often), and 144
// against 124 for a 1B gate (sweep s); at N = 4096 their 16 columns leave half of the H200's 132
// multiprocessors idle for 512 tokens (77 against 133). In the model the 8B's q/k/v went 11.0 → 9.0 ms and
// the 1B's gate/up 5.7 → 4.9 ms a prefill, but Qwen2.5-0.5B's gate/up (K = 896: 28 slices, too few to
// cover the longer start of a workgroup that is alone on its multiprocessor) 3.3 → 3.5 ms, so they need K
// >= 2048. Narrow ones keep the profile's 64 × 64: 128 × 128 tiles of k/v projections or of a 1B model's
// 2048-wide ones leave most multiprocessors idle (Llama-3.2-1B: 77 ms against 34 ms), unless their rows
// are long enough to split over K (coopSplitK below).
inline constexpr int64_t kWideCoopMatMul = 4096, kDeepCoopMatMul = 2048, kMidCoopMatMul = 3072;

// Workgroup columns of the cooperative-matrix matmuls (grid x of matmul_coop.glsl), shared by the kernel
// catalog's grids and codegen's: a plain projection's n outputs in tiles of tileN; gate/up tiles hold tileN /
// 2 outputs of each matrix; q, k and v each take whole tiles (GROUPS_Q, GROUPS_K, GROUPS_V, in that order).
inline int64_t coopTiles(const CoopMatMulTiling &tiling, int64_t n) {
  return (n + tiling.tileN - 1) / tiling.tileN;
}

// The K split of a narrow plain projection: doubled, up to 4, while the tile columns times the split stay
// within kSplitColumns and each part keeps kSplitSlices slices of K. Small models' down and o projections
// have few columns (Qwen2.5-0.5B's: 14 of 64 outputs), so a 512-token prefill ran them on 112 workgroups
// of 4 subgroups, one a multiprocessor. Sweep x on the H200 (µs, 512 tokens, residual epilogue):
//   Qwen down (896 / 4864):  64 × 64 142, split 2 82, 4 86, 8 92; 128 × 128 split 4 69, 8 78
//   Qwen o (896 / 896):      64 × 64 35, split 2 25, 4 28
//   1B down (2048 / 8192):   64 × 64 262, split 2 260, 4 264; 128 × 128 split 4 204
//   1B o (2048 / 2048):      64 × 64 69, split 2 73 (the rule's one loss, 6%); 128 × 128 split 4 70
//   8B down and o (128 × 128, 32 columns): split 2 3% and 1% slower; wide projections are not split.
// Workgroups of 16 subgroups (one a multiprocessor) split only up to kSplitColumns / 2: sweep ag, 1B down
// on 128 x 128 tiles of 4 x 4 subgroups, split 2 132 µs, 4 138.
inline constexpr int64_t kSplitColumns = 64, kSplitSlices = 14, kMaxSplitK = 8, kMaxChosenSplitK = 4;
inline int64_t coopSplitK(const CoopMatMulTiling &tiling, int64_t n, int64_t k) {
  const int64_t columns = coopTiles(tiling, n), slices = (k + tiling.tileK - 1) / tiling.tileK;
  const int64_t splitColumns = tiling.workgroup() > 256 ? kSplitColumns / 2 : kSplitColumns;
  int64_t split = 1;
  while (split < kMaxChosenSplitK && columns * split * 2 <= splitColumns &&
         slices / (split * 2) >= kSplitSlices)
    split *= 2;
  return split;
}

// The tiling of a plain projection of n outputs and K = k. Narrow ones with long rows (K >= 4096: the down
// projections of small models) take 128 × 128 tiles split over K, others the profile's 64 × 64 tiles.
//
// 128 × 128 tiles with n >= 2048 and K >= 2048 go on 16 subgroups of 32 × 32 (two staging buffers, which
// fit beside their epilogue since it took the buffers' memory) instead of 8 of 64 × 32. Sweep ag (µs, 512
// tokens): 8B down 440 → 403, o 147 → 130; 1B down 148 (split 4) → 132 (split 2), o 54 (64 × 64, split 2)
// → 46 (split 2), q/k/v rows 64 → 62. Not for 128 × 256 tiles (8B gate/up 807 → 874 on 4 × 4, 831 on
// 2 × 8).
inline constexpr int64_t kLongRowsCoopMatMul = 4096, kSixteenSubgroupsCoopMatMul = 2048;
inline CoopMatMulTiling coopTilingFor(const TargetProfile &profile, int64_t n, int64_t k) {
  if (profile.tilingGiven || !profile.cooperativeMatrix) return profile.coopTiling;
  if (n > kWideCoopMatMul && k >= kDeepCoopMatMul) return {128, 256, 32, 2, 4, 1};
  if (n >= kSixteenSubgroupsCoopMatMul && k >= kSixteenSubgroupsCoopMatMul) {
    CoopMatMulTiling tiling{128, 128, 32, 4, 4};
    if (n < kMidCoopMatMul) tiling.splitK = coopSplitK(tiling, n, k);
    return tiling;
  }
  if (n >= kWideCoopMatMul) return {128, 128, 32, 2, 4};
  // Sweep aa (H200, 512 tokens): 3072 outputs of K = 2048 (Llama-3.2-1B's q/k/v rows) took 69 µs on
  // 128 × 128 tiles (96 workgroups) against 93 on 64 × 64 (384).
  if (n >= kMidCoopMatMul) return {128, 128, 32, 2, 4};
  // Long rows on 16 subgroups too: Qwen2.5-0.5B's down (896 / 4864, split 4) 53.7 → 51.9 µs (sweep ah);
  // its shorter rows lose on them (o 20.6 → 27.3, q/k/v 24.8 → 31.4, gate/up 87.8 → 89.8).
  CoopMatMulTiling tiling =
      k >= kLongRowsCoopMatMul ? CoopMatMulTiling{128, 128, 32, 4, 4} : profile.coopTiling;
  tiling.splitK = coopSplitK(tiling, n, k);
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
// of all their rows. Never split over K: their epilogues need whole sums.
inline CoopMatMulTiling groupPrefillTiling(const TargetProfile &profile, bool gateUp, int64_t k, int64_t n,
                                           int64_t nK = 0, int64_t nV = 0) {
  CoopMatMulTiling tiling = coopTilingFor(profile, gateUp ? 2 * n : n + nK + nV, k);
  tiling.splitK = 1;
  return tiling;
}

inline const std::vector<TargetProfile> &targetProfiles() {
  static const std::vector<TargetProfile> profiles = {
      {"generic", "any Vulkan 1.2 device: tiled f32 matmuls, no subgroup size assumed", false, 0, {}, {}},
      // Hopper: 16×16×16 f16 fragments, 4 subgroups of 32 per workgroup, each 32 × 32 outputs; 37 KiB of
      // the 48 KiB of shared memory.
      {"nvidia",
       "NVIDIA (Turing and later): prefill matmuls on tensor cores, subgroup size 32",
       true,
       32,
       {64, 64, 32, 2, 2},
       {"VK_NV_cooperative_matrix"}},
  };
  return profiles;
}

// nullptr when there is no profile of that name.
inline const TargetProfile *findTargetProfile(std::string_view name) {
  for (const TargetProfile &p : targetProfiles())
    if (p.name == name) return &p;
  return nullptr;
}

// A target as gerbilc's --target spells it: a profile name, and for a cooperative-matrix profile optionally
// its matmul tiling, "nvidia:TxNxK:WTxWN[:S[:P]]" (tokens × outputs × reduction step per workgroup,
// subgroups along tokens × outputs, optionally the staging buffers, 1 or 2 (default), and the K split of
// plain projections, 1 to 8 (default 1); e.g. nvidia:128x128x32:2x4 or nvidia:64x64x32:2x2:2:4), to tune on
// a device. std::nullopt when it does not parse.
inline std::optional<TargetProfile> parseTarget(std::string_view spec) {
  size_t colon = spec.find(':');
  const TargetProfile *base = findTargetProfile(spec.substr(0, colon));
  if (!base) return std::nullopt;
  TargetProfile profile = *base;
  if (colon == std::string_view::npos) return profile;
  if (!profile.cooperativeMatrix) return std::nullopt;
  int64_t v[5], stages = 2, split = 1;
  int used = 0, usedWithStages = 0, usedWithSplit = 0;
  std::string text(spec.substr(colon + 1));
  if (std::sscanf(text.c_str(), "%ldx%ldx%ld:%ldx%ld%n:%ld%n:%ld%n", &v[0], &v[1], &v[2], &v[3], &v[4], &used,
                  &stages, &usedWithStages, &split, &usedWithSplit) < 5)
    return std::nullopt;
  const int length = static_cast<int>(text.size());
  if (used != length && usedWithStages != length && usedWithSplit != length) return std::nullopt;
  for (int64_t x : v)
    if (x <= 0 || x > 1024) return std::nullopt;
  if (stages != 1 && stages != 2) return std::nullopt;
  if (split < 1 || split > kMaxSplitK) return std::nullopt;
  profile.name = std::string(spec);
  profile.coopTiling = {v[0], v[1], v[2], v[3], v[4], stages, split};
  profile.tilingGiven = true;
  return profile;
}

} // namespace mlir::gerbil
