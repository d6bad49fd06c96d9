#include "tools/gerbil-kernel-bench/SyncBench.h"

#include "tools/gerbil-kernel-bench/EmbeddedKernels.h"
#include "tools/gerbil-kernel-bench/HostData.h"
#include "tools/gerbil-kernel-bench/StatisticsJson.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gerbil::bench {
namespace {

// The kernel's push constants; the addresses only under SYNC_BDA.
struct Push {
  uint32_t first, count, copies, unused = 0;
  uint64_t weights = 0, vectors = 0, elements = 0, sync = 0;
};

// The host's result of `phases` phases from x0, with the weights as the device reads them.
std::vector<float> hostChain(const std::vector<uint16_t> &weights, std::vector<float> x, uint32_t n,
                             uint32_t phases, uint32_t copies) {
  std::vector<float> y(n);
  for (uint32_t p = 0; p < phases; ++p) {
    const uint16_t *w = weights.data() + size_t(p % copies) * n * n;
    for (uint32_t row = 0; row < n; ++row) {
      double sum = 0;
      for (uint32_t k = 0; k < n; ++k) sum += static_cast<double>(halfValue(w[size_t(row) * n + k])) * x[k];
      y[row] = static_cast<float>(sum);
    }
    std::swap(x, y);
  }
  return x;
}

// How the phases are ordered: a dispatch each behind a pipeline barrier; one persistent dispatch with grid
// barriers; or a dispatch each with no barrier between, each phase's workgroups loading their weights and
// then waiting for the arrivals of the phase before (the order lies in the counter alone, so consecutive
// dispatches may overlap: the latency a barrier drains is hidden, if the polls cost less).
// Companion: the dispatches with a prefetcher beside them on a second queue (SyncBench.h).
enum class Way { Dispatches, Persistent, Chained, Companion };
const char *wayName(Way way) {
  switch (way) {
  case Way::Dispatches:
    return "dispatch";
  case Way::Persistent:
    return "persistent";
  case Way::Chained:
    return "chained";
  case Way::Companion:
    return "companion";
  }
  return "?";
}

class SyncRun {
public:
  SyncRun(vk::Context &ctx, codegen::ShaderCompiler &compiler, const SyncOptions &o)
      : ctx_(ctx), compiler_(compiler), o_(o) {
    if (o.n % 8 != 0 || o.n == 0) throw std::runtime_error("--n must be a positive multiple of 8");
    subgroup_ = ctx.info().subgroupSize;
    checkWorkgroupSize(o.workgroupSize, subgroup_);
    warps_ = o.workgroups * (o.workgroupSize / subgroup_);
    rows_ = (o.n + warps_ - 1) / warps_;
    const uint64_t matrixBytes = uint64_t(o.n) * o.n * 2;
    copies_ = rotatedCopies(matrixBytes, std::min<uint64_t>(256ull << 20, ctx.info().maxStorageBufferRange),
                            o.phases, o.copies);
    // Uniform in ±sqrt(3 / n): each phase keeps the vector's scale.
    weightsHost_ = randomHalves(size_t(o.n) * o.n * copies_, std::sqrt(3.0f / static_cast<float>(o.n)), 11);
    weights_ = ctx.createBuffer(weightsHost_.size() * 2, "sync weights");
    ctx.upload(weights_, 0, weightsHost_.data(), weightsHost_.size() * 2);
    vectors_ = ctx.createBuffer(uint64_t(o.n) * 8, "sync vectors");
    sync_ = ctx.createBuffer(32, "sync counter");
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    x0_.resize(o.n);
    for (float &v : x0_) v = uniform(rng);
    if (syncTakesAddresses(o.defines)) {
      addresses_.weights = weights_.deviceAddress();
      addresses_.vectors = addresses_.elements = vectors_.deviceAddress();
      addresses_.sync = sync_.deviceAddress();
    }
  }

  // The kernel of a way (the companion's prefetcher with `companion`).
  vk::Pipeline kernelOf(Way way, bool companion) {
    const bool persistent = way == Way::Persistent, ordered = way == Way::Persistent || way == Way::Chained;
    std::string source =
        std::string("#define N ") + std::to_string(o_.n) + "u\n#define PHASES " + std::to_string(o_.phases) +
        "u\n#define ROWS " + std::to_string(rows_) + "u\n#define WORKGROUP " +
        std::to_string(o_.workgroupSize) + "u\n#define SUBGROUP " + std::to_string(subgroup_) +
        "u\n#define EMPTY " + (o_.empty ? "1" : "0") + "\n#define PERSISTENT " + (persistent ? "1" : "0") +
        "\n#define CHAINED " + (way == Way::Chained ? "1" : "0") + "\n#define VECTOR_QUALIFIER " +
        (ordered ? "coherent" : "") + "\n#define SYNC_SIGNAL " + (way == Way::Companion ? "1" : "0") +
        "\n#define COMPANION " + (companion ? "1" : "0") + "\n";
    if (companion) {
      const uint64_t words = uint64_t(o_.n) * (o_.n / 8),
                     invocations = uint64_t(o_.companionWorkgroups) * o_.workgroupSize;
      source += "#define COMPANION_LOADS " + std::to_string((words + invocations - 1) / invocations) +
                "u\n#define COMPANION_AHEAD " + std::to_string(o_.companionAhead) + "u\n";
    }
    // --define NAME=VALUE, then 0 for the diagnosis switches not given.
    for (const auto &[name, value] : o_.defines) source += "#define " + name + " " + value + "\n";
    for (const char *name : {"SYNC_NO_W", "SYNC_NO_X", "SYNC_NO_STORE", "SYNC_NO_REDUCE", "SYNC_STORE_ONE",
                             "SYNC_GUARD_STORE", "SYNC_PREFETCH_NEXT", "SYNC_BDA", "SYNC_SKIP_PREFETCH",
                             "SYNC_SKIP_COMPUTE", "SYNC_CODE", "SYNC_CODE_UNROLLED", "SYNC_STAGE_X"})
      if (source.find(std::string("#define ") + name + " ") == std::string::npos)
        source += std::string("#define ") + name + " 0\n";
    return ctx_.createPipeline(compiler_.compile(benchKernel("sync.glsl", source), "sync bench"), 3,
                               sizeof(Push), "sync bench");
  }

  // Median microseconds a phase over the repeats, and the last run's error against the host.
  std::pair<double, double> run(Way way) {
    const bool persistent = way == Way::Persistent;
    vk::Pipeline pipeline = kernelOf(way, false);
    vk::Pipeline companion;
    if (way == Way::Companion) companion = kernelOf(way, true);
    // The driver's statistics of each way's kernel (where the context captures them: --statistics).
    addStatistics(statistics_, vk::pipelineStatistics(ctx_, pipeline), std::string(wayName(way)) + " ");
    const std::vector<vk::BufferRange> ranges = {{weights_.handle(), 0, weights_.size()},
                                                 {vectors_.handle(), 0, vectors_.size()},
                                                 {sync_.handle(), 0, sync_.size()}};
    VkDescriptorSet set = ctx_.createDescriptorSet(pipeline, ranges);
    VkDescriptorSet companionSet =
        way == Way::Companion ? ctx_.createDescriptorSet(companion, ranges) : nullptr;
    std::vector<double> us;
    double error = 0;
    for (int r = -2; r < o_.repeats; ++r) { // two untimed runs first: clocks up, pipeline compiled
      ctx_.upload(vectors_, 0, x0_.data(), x0_.size() * 4);
      ctx_.fill(sync_, 0);
      VkCommandBuffer cmd = ctx_.beginCommands();
      ctx_.resetTimestamps(cmd, 2);
      ctx_.writeTimestamp(cmd, 0);
      if (persistent) {
        Push all = push(0, o_.phases);
        ctx_.dispatch(cmd, pipeline, set, &all, sizeof all, o_.workgroups, 1, 1);
      } else {
        for (uint32_t p = 0; p < o_.phases; ++p) {
          Push one = push(p, 1);
          ctx_.dispatch(cmd, pipeline, set, &one, sizeof one, o_.workgroups, 1, 1);
          // The companion way runs the dispatches as decode does: each behind a barrier (the prefetcher on
          // the other queue is what differs); the chained way orders them by its counter alone.
          if (way != Way::Dispatches && way != Way::Companion) continue;
          if (p + 1 < o_.phases)
            ctx_.dispatchBarrier(cmd);
          else
            ctx_.computeBarrier(cmd); // also before the result's download
        }
      }
      ctx_.writeTimestamp(cmd, 1);
      if (way == Way::Companion) {
        VkCommandBuffer beside = ctx_.beginCompanionCommands();
        Push all = push(0, o_.phases);
        ctx_.dispatch(beside, companion, companionSet, &all, sizeof all, o_.companionWorkgroups, 1, 1);
        ctx_.submitWithCompanionAndWait(cmd, beside);
      } else {
        ctx_.submitAndWait(cmd);
      }
      std::vector<uint64_t> ns = ctx_.readTimestamps(2);
      // stalled, progress, companionBegan, firstSeen, overlapped (sync.glsl's Sync block)
      std::array<uint32_t, 5> words{};
      ctx_.download(sync_, 4, words.data(), sizeof words);
      const uint32_t stalled = words[0];
      if (way == Way::Companion && r >= 0) {
        if (words[4] == 2) ++companionOverlaps_;
        if (words[3] > 0) companionFirstSeen_.push_back(words[3] - 1);
      }
      if (stalled == 2) { // the companion gave up waiting: the phases ran, maybe without its loads
        if (r >= 0) ++companionStalls_;
      } else if (stalled)
        throw std::runtime_error(std::string("the ") + wayName(way) + " phases of " +
                                 std::to_string(o_.workgroups) +
                                 " workgroups waited for 2^20 polls: the device does not keep them all "
                                 "resident (lower --workgroups)");
      if (r >= 0) us.push_back(static_cast<double>(ns[1] - ns[0]) / 1e3 / o_.phases);
      if (r == o_.repeats - 1 && checked()) error = maxError();
    }
    ctx_.resetDescriptorSets();
    std::sort(us.begin(), us.end());
    return {us[us.size() / 2], error};
  }

  // Whether the result is the chain's: with work, and no diagnosis define that leaves a part out.
  bool checked() const {
    auto diagnosis = [](const Define &d) {
      return d.second != "0" && (d.first.rfind("SYNC_NO_", 0) == 0 || d.first.rfind("SYNC_SKIP_", 0) == 0 ||
                                 d.first == "SYNC_STORE_ONE" || d.first == "SYNC_GUARD_STORE");
    };
    return !o_.empty && std::none_of(o_.defines.begin(), o_.defines.end(), diagnosis);
  }
  uint32_t rows() const { return rows_; }
  uint32_t companionStalls() const { return companionStalls_; }
  // Runs in which the chain's last phase found the companion running (the two queues side by side).
  uint32_t companionOverlaps() const { return companionOverlaps_; }
  // The median progress the companion's first poll saw (the phases begun before it ran; -1 if it never ran).
  int64_t companionFirstSeen() const {
    if (companionFirstSeen_.empty()) return -1;
    std::vector<uint32_t> sorted = companionFirstSeen_;
    std::sort(sorted.begin(), sorted.end());
    return sorted[sorted.size() / 2];
  }
  void compileCompanion() {
    kernelOf(Way::Companion, false);
    kernelOf(Way::Companion, true);
  }
  const nlohmann::json &statistics() const { return statistics_; }

  // The push constants of `count` phases from `first`, with the buffers' addresses under SYNC_BDA.
  Push push(uint32_t first, uint32_t count) const {
    Push p = addresses_;
    p.first = first, p.count = count, p.copies = copies_;
    return p;
  }
  uint32_t copies() const { return copies_; }

private:
  // Largest |device - host| of the last phase's result, relative to the result's largest magnitude.
  double maxError() {
    std::vector<float> both(size_t(o_.n) * 2);
    ctx_.download(vectors_, 0, both.data(), both.size() * 4);
    if (expected_.empty()) expected_ = hostChain(weightsHost_, x0_, o_.n, o_.phases, copies_);
    const float *got = both.data() + (o_.phases % 2 == 0 ? 0 : o_.n);
    double worst = 0, scale = 1e-30;
    for (uint32_t i = 0; i < o_.n; ++i) {
      worst = std::max(worst, std::abs(double(got[i]) - expected_[i]));
      scale = std::max(scale, std::abs(double(expected_[i])));
    }
    return worst / scale;
  }

  vk::Context &ctx_;
  codegen::ShaderCompiler &compiler_;
  SyncOptions o_;
  uint32_t subgroup_ = 0, warps_ = 0, rows_ = 0, copies_ = 0, companionStalls_ = 0, companionOverlaps_ = 0;
  std::vector<uint32_t> companionFirstSeen_;
  std::vector<uint16_t> weightsHost_;
  std::vector<float> x0_, expected_;
  nlohmann::json statistics_ = nlohmann::json::object();
  vk::Buffer weights_, vectors_, sync_;
  Push addresses_{}; // only its addresses: the buffers' under SYNC_BDA, else 0
};

} // namespace

bool syncTakesAddresses(const std::vector<Define> &defines) {
  return std::any_of(defines.begin(), defines.end(),
                     [](const Define &d) { return d.first == "SYNC_BDA" && d.second != "0"; });
}

nlohmann::json runSyncBench(vk::Context &ctx, codegen::ShaderCompiler &compiler, const SyncOptions &options) {
  SyncRun run(ctx, compiler, options);
  double worst = 0;
  auto timed = [&](Way way) {
    auto [us, error] = run.run(way);
    if (error > 1e-3)
      throw std::runtime_error(std::string("the gemv chain's result differs from the host's, ") +
                               wayName(way) + " (relative error " + std::to_string(error) + ")");
    worst = std::max(worst, error);
    return us;
  };
  const double dispatchUs = timed(Way::Dispatches), persistentUs = timed(Way::Persistent),
               chainedUs = timed(Way::Chained);
  // Without a second queue (lavapipe has one queue) there is no companion to time.
  const bool companion = ctx.hasCompanionQueue();
  const double companionUs = companion ? timed(Way::Companion) : 0.0;
  if (!companion) run.compileCompanion(); // its kernels still compile (lavapipe has one queue)
  const double phaseBytes = 2.0 * options.n * options.n;
  nlohmann::json out = {{"kernel", "sync"},
                        {"n", options.n},
                        {"phases", options.phases},
                        {"workgroups", options.workgroups},
                        {"workgroup_size", options.workgroupSize},
                        {"rows_per_warp", run.rows()},
                        {"weight_copies", run.copies()},
                        {"empty", options.empty},
                        {"dispatch_us", dispatchUs},
                        {"persistent_us", persistentUs},
                        {"chained_us", chainedUs},
                        {"companion_us", companion ? nlohmann::json(companionUs) : nlohmann::json(nullptr)},
                        {"companion_workgroups", options.companionWorkgroups},
                        {"companion_ahead", options.companionAhead},
                        {"companion_stalls", run.companionStalls()},
                        {"companion_overlaps", run.companionOverlaps()},
                        {"companion_first_seen", run.companionFirstSeen()}};
  out["checked"] = run.checked();
  if (options.statistics) out["statistics"] = run.statistics();
  if (!options.empty) {
    out["dispatch_gb_per_s"] = phaseBytes / (dispatchUs * 1e3);
    out["persistent_gb_per_s"] = phaseBytes / (persistentUs * 1e3);
    out["chained_gb_per_s"] = phaseBytes / (chainedUs * 1e3);
    if (companion) out["companion_gb_per_s"] = phaseBytes / (companionUs * 1e3);
    if (run.checked()) out["max_error"] = worst;
  }
  return out;
}

} // namespace gerbil::bench
