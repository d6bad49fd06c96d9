#include "tools/gerbil-kernel-bench/MlpBench.h"

#include "tools/gerbil-kernel-bench/EmbeddedKernels.h"
#include "tools/gerbil-kernel-bench/HostData.h"
#include "tools/gerbil-kernel-bench/StatisticsJson.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>

namespace gerbil::bench {
namespace {

class MlpRun {
public:
  MlpRun(vk::Context &ctx, codegen::ShaderCompiler &compiler, const MlpOptions &o) : ctx_(ctx), o_(o) {
    if (o.hidden % 8 != 0 || o.hidden == 0 || o.inter == 0 || o.slice == 0 || o.slice > 1024)
      throw std::runtime_error("--hidden must be a positive multiple of 8, --inter and --slice (up to 1024) "
                               "positive");
    checkWorkgroupSize(o.workgroupSize, ctx.info().subgroupSize);
    if (!ctx.hasBufferFloatAtomicAdd())
      throw std::runtime_error(ctx.info().name +
                               " has no float atomicAdd on buffers (VK_EXT_shader_atomic_float)");
    const uint64_t setBytes = 3ull * o.inter * o.hidden * 2;
    const uint64_t matrixBytes = uint64_t(o.inter) * o.hidden * 2;
    copies_ = rotatedCopies(setBytes, std::min<uint64_t>(256ull << 20, ctx.info().maxStorageBufferRange * 3),
                            o.phases, o.copies);
    if (matrixBytes * copies_ > ctx.info().maxStorageBufferRange)
      throw std::runtime_error("the weights exceed the device's storage buffer range: lower --copies");
    // Gate and up keep the input's scale (±sqrt(3 / hidden)); down adds a tenth of it a phase.
    const size_t elements = size_t(o.inter) * o.hidden * copies_;
    gate_ = randomHalves(elements, std::sqrt(3.0f / o.hidden), 1);
    up_ = randomHalves(elements, std::sqrt(3.0f / o.hidden), 2);
    down_ = randomHalves(elements, 0.1f * std::sqrt(3.0f / o.inter), 3);
    std::mt19937 rng(4);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    g_.resize(o.hidden);
    for (float &v : g_) v = 1.0f + 0.25f * uniform(rng);
    x0_.resize(o.hidden);
    for (float &v : x0_) v = uniform(rng);

    auto upload = [&](const void *data, uint64_t bytes, const char *name) {
      vk::Buffer b = ctx.createBuffer(bytes, name);
      ctx.upload(b, 0, data, bytes);
      return b;
    };
    buffers_.push_back(upload(gate_.data(), gate_.size() * 2, "mlp gate"));
    buffers_.push_back(upload(up_.data(), up_.size() * 2, "mlp up"));
    // MLP_DOWN_ROWS: the down weights as checkpoints store them, [copy][hidden][inter].
    auto rows = [](const Define &d) { return d.first == "MLP_DOWN_ROWS" && d.second != "0"; };
    if (std::any_of(o.defines.begin(), o.defines.end(), rows)) {
      if (o.slice % 8 != 0 || o.inter % 8 != 0)
        throw std::runtime_error("MLP_DOWN_ROWS needs --slice and --inter multiples of 8");
      std::vector<uint16_t> byRows(down_.size());
      for (uint32_t c = 0; c < copies_; ++c)
        for (uint32_t j = 0; j < o.inter; ++j)
          for (uint32_t k = 0; k < o.hidden; ++k)
            byRows[(size_t(c) * o.hidden + k) * o.inter + j] =
                down_[(size_t(c) * o.inter + j) * o.hidden + k];
      buffers_.push_back(upload(byRows.data(), byRows.size() * 2, "mlp down"));
    } else {
      buffers_.push_back(upload(down_.data(), down_.size() * 2, "mlp down"));
    }
    buffers_.push_back(upload(g_.data(), g_.size() * 4, "mlp norm"));
    buffers_.push_back(ctx.createBuffer(uint64_t(o.hidden) * 3 * 4, "mlp vectors"));

    std::string source = "#define HIDDEN " + std::to_string(o.hidden) + "u\n#define INTER " +
                         std::to_string(o.inter) + "u\n#define SLICE " + std::to_string(o.slice) +
                         "u\n#define WORKGROUP " + std::to_string(o.workgroupSize) + "u\n#define EPS 1e-6\n";
    for (const auto &[name, value] : o.defines) source += "#define " + name + " " + value + "\n";
    pipeline_ = ctx.createPipeline(compiler.compile(benchKernel("fused_mlp.glsl", source), "fused mlp bench"),
                                   6, 8, "fused mlp bench");
    const vk::Buffer &v = buffers_[4];
    set_ = ctx.createDescriptorSet(pipeline_, {{buffers_[0].handle(), 0, buffers_[0].size()},
                                               {buffers_[1].handle(), 0, buffers_[1].size()},
                                               {buffers_[2].handle(), 0, buffers_[2].size()},
                                               {buffers_[3].handle(), 0, buffers_[3].size()},
                                               {v.handle(), 0, v.size()},
                                               {v.handle(), 0, v.size()}});
  }

  // Median microseconds a phase, and the last run's error against the host.
  // The timed runs chain all the phases; a last run of kCheckedPhases (at most) is checked against the
  // host, whose chain of a large model's phases would take minutes.
  std::pair<double, double> run() {
    std::vector<double> us;
    for (int r = -2; r < o_.repeats; ++r) { // two untimed runs first: clocks up, pipeline compiled
      double phaseUs = chain(o_.phases);
      if (r >= 0) us.push_back(phaseUs);
    }
    const uint32_t checked = std::min(o_.phases, kCheckedPhases);
    chain(checked);
    double error = maxError(checked);
    ctx_.resetDescriptorSets();
    std::sort(us.begin(), us.end());
    return {us[us.size() / 2], error};
  }
  uint32_t copies() const { return copies_; }
  nlohmann::json statistics() const {
    nlohmann::json out = nlohmann::json::object();
    addStatistics(out, vk::pipelineStatistics(ctx_, pipeline_));
    return out;
  }
  static constexpr uint32_t kCheckedPhases = 4;

private:
  // Microseconds a phase of a chain of `phases` from x0.
  double chain(uint32_t phases) {
    const uint32_t groups = (o_.inter + o_.slice - 1) / o_.slice;
    // Phase 0 accumulates into buffer 1, which must start at zero (later phases zero theirs).
    std::vector<float> start(size_t(o_.hidden) * 3, 0.0f);
    std::copy(x0_.begin(), x0_.end(), start.begin());
    ctx_.upload(buffers_[4], 0, start.data(), start.size() * 4);
    VkCommandBuffer cmd = ctx_.beginCommands();
    ctx_.resetTimestamps(cmd, 2);
    ctx_.writeTimestamp(cmd, 0);
    for (uint32_t p = 0; p < phases; ++p) {
      uint32_t push[2] = {p, copies_};
      ctx_.dispatch(cmd, pipeline_, set_, push, sizeof push, groups, 1, 1);
      ctx_.computeBarrier(cmd);
    }
    ctx_.writeTimestamp(cmd, 1);
    ctx_.submitAndWait(cmd);
    std::vector<uint64_t> ns = ctx_.readTimestamps(2);
    return static_cast<double>(ns[1] - ns[0]) / 1e3 / phases;
  }

  // The host's chain of `phases`, with the weights as the device reads them.
  std::vector<double> hostChain(uint32_t phases) const {
    const uint32_t h = o_.hidden, n = o_.inter;
    std::vector<double> x(x0_.begin(), x0_.end()), m(n);
    for (uint32_t p = 0; p < phases; ++p) {
      const size_t set = size_t(p % copies_) * n * h;
      double squares = 0;
      for (double v : x) squares += v * v;
      const double s = 1.0 / std::sqrt(squares / h + 1e-6);
      for (uint32_t j = 0; j < n; ++j) {
        double gate = 0, up = 0;
        for (uint32_t k = 0; k < h; ++k) {
          double xk = x[k] * g_[k];
          gate += halfValue(gate_[set + size_t(j) * h + k]) * xk;
          up += halfValue(up_[set + size_t(j) * h + k]) * xk;
        }
        double a = gate * s, b = up * s;
        m[j] = a / (1.0 + std::exp(-a)) * b;
      }
      std::vector<double> next(x);
      for (uint32_t j = 0; j < n; ++j)
        for (uint32_t k = 0; k < h; ++k) next[k] += halfValue(down_[set + size_t(j) * h + k]) * m[j];
      x = std::move(next);
    }
    return x;
  }

  // Largest |device - host| after a chain of `phases`, relative to the result's largest magnitude.
  double maxError(uint32_t phases) {
    std::vector<float> all(size_t(o_.hidden) * 3);
    ctx_.download(buffers_[4], 0, all.data(), all.size() * 4);
    const std::vector<double> expected = hostChain(phases);
    const float *got = all.data() + size_t(phases % 3) * o_.hidden;
    double worst = 0, scale = 1e-30;
    for (uint32_t i = 0; i < o_.hidden; ++i) {
      worst = std::max(worst, std::abs(double(got[i]) - expected[i]));
      scale = std::max(scale, std::abs(expected[i]));
    }
    return worst / scale;
  }

  vk::Context &ctx_;
  MlpOptions o_;
  uint32_t copies_ = 0;
  std::vector<uint16_t> gate_, up_, down_;
  std::vector<float> g_, x0_;
  std::vector<vk::Buffer> buffers_;
  vk::Pipeline pipeline_;
  VkDescriptorSet set_ = VK_NULL_HANDLE;
};

} // namespace

nlohmann::json runMlpBench(vk::Context &ctx, codegen::ShaderCompiler &compiler, const MlpOptions &options) {
  MlpRun run(ctx, compiler, options);
  auto [us, error] = run.run();
  const double bytes = 3.0 * options.inter * options.hidden * 2;
  nlohmann::json out = {{"kernel", "mlp"},
                        {"hidden", options.hidden},
                        {"inter", options.inter},
                        {"slice", options.slice},
                        {"workgroup_size", options.workgroupSize},
                        {"phases", options.phases},
                        {"weight_copies", run.copies()},
                        {"us", us},
                        {"checked_phases", std::min(options.phases, MlpRun::kCheckedPhases)},
                        {"gb_per_s", bytes / (us * 1e3)},
                        {"max_error", error}};
  if (options.statistics) out["statistics"] = run.statistics();
  if (error > 1e-3)
    throw std::runtime_error("the fused MLP chain's result differs from the host's (relative error " +
                             std::to_string(error) + ")");
  return out;
}

} // namespace gerbil::bench
