#include "tools/gerbil-kernel-bench/SyncBench.h"

#include "runtime/vulkan/PipelineStatistics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace gerbil::bench {
namespace {

// Each subgroup (warp) owns rows warp, warp + warps, ... (ROWS of them) and keeps their f16 weights in
// registers: PER_LANE 16-byte loads a row and lane. x and y are the two halves of `vectors`, swapped every
// phase.
constexpr const char *kSyncKernel = R"glsl(#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_buffer_reference : enable
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = WORKGROUP) in;

#if SYNC_BDA
// The buffers through their device addresses in the push constants instead of descriptors (the launch then
// has no descriptor to fetch before the first load's address is known).
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer WeightsRef { uvec4 w_[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) VECTOR_QUALIFIER buffer VectorsRef { vec4 v_[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) VECTOR_QUALIFIER buffer ElementsRef { float e_[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) coherent volatile buffer SyncRef {
  uint arrived_;
  uint stalled_;
};
layout(push_constant) uniform Push {
  uint first; uint count; uint copies; uint unused;
  WeightsRef weights; VectorsRef vectors; ElementsRef elements; SyncRef sync;
} push_;
#define w_ push_.weights.w_
#define v_ push_.vectors.v_
#define e_ push_.elements.e_
#define arrived_ push_.sync.arrived_
#define stalled_ push_.sync.stalled_
#else
layout(std430, binding = 0) restrict readonly buffer Weights { uvec4 w_[]; };
// Persistent: other workgroups wrote the input in this dispatch, so it is read past the caches that are
// not coherent; across dispatches the barrier makes it visible.
layout(std430, binding = 1) VECTOR_QUALIFIER buffer Vectors { vec4 v_[]; };
// The same, element by element: a store of one component through v_ may be a read-modify-write of all four,
// which would lose the neighbours' results that other workgroups store at the same time.
layout(std430, binding = 1) VECTOR_QUALIFIER buffer VectorElements { float e_[]; };
layout(std430, binding = 2) coherent volatile buffer Sync { uint arrived_; uint stalled_; };
layout(push_constant) uniform Push { uint first; uint count; uint copies; } push_;
#endif

#ifndef SYNC_POLL
#define SYNC_POLL arrived_
#endif
const uint WARPS = WORKGROUP / SUBGROUP;
const uint LOADS = N / 8u;
const uint PER_LANE = (LOADS + SUBGROUP - 1u) / SUBGROUP;

uvec4 w[ROWS][PER_LANE];

uint warpIndex() { return gl_WorkGroupID.x * WARPS + gl_SubgroupID; }
uint warpCount() { return gl_NumWorkGroups.x * WARPS; }

void prefetch(uint phase) {
#if !EMPTY && !SYNC_SKIP_PREFETCH
  uint base = (phase % push_.copies) * (N * LOADS);
  [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
    uint row = min(warpIndex() + r * warpCount(), N - 1u);
    [[unroll]] for (uint i = 0u; i < PER_LANE; ++i)
#if SYNC_NO_W
      w[r][i] = uvec4(0x3c003c00u);  // weights of 1.0 instead of loads (latency diagnosis)
#else
      w[r][i] = w_[base + row * LOADS + min(gl_SubgroupInvocationID + i * SUBGROUP, LOADS - 1u)];
#endif
  }
#endif
}

float dot8(uvec4 q, vec4 a, vec4 b) {
  return dot(vec4(unpackHalf2x16(q.x), unpackHalf2x16(q.y)), a) +
         dot(vec4(unpackHalf2x16(q.z), unpackHalf2x16(q.w)), b);
}

void compute(uint phase) {
#if !EMPTY && !SYNC_SKIP_COMPUTE
  uint in4 = (phase & 1u) * (N / 4u), out0 = N - (phase & 1u) * N;
  vec4 xa[PER_LANE], xb[PER_LANE];
  [[unroll]] for (uint i = 0u; i < PER_LANE; ++i) {
    uint k = min(gl_SubgroupInvocationID + i * SUBGROUP, LOADS - 1u);
#if SYNC_NO_X
    xa[i] = vec4(1.0), xb[i] = vec4(1.0);  // no read of the previous phase's result (latency diagnosis)
#else
    xa[i] = v_[in4 + 2u * k], xb[i] = v_[in4 + 2u * k + 1u];
#endif
  }
  [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
    float sum = 0.0;
    [[unroll]] for (uint i = 0u; i < PER_LANE; ++i)
      if (gl_SubgroupInvocationID + i * SUBGROUP < LOADS) sum += dot8(w[r][i], xa[i], xb[i]);
#if !SYNC_NO_REDUCE
    sum = subgroupAdd(sum);
#endif
    uint row = warpIndex() + r * warpCount();
#if SYNC_NO_STORE
    // Stored only under a condition that never holds and that the compiler cannot know (latency diagnosis).
    if (subgroupElect() && row < N && push_.copies == 0u) e_[out0 + row] = sum;
#elif SYNC_STORE_ONE
    if (subgroupElect() && row == 0u) e_[out0 + row] = sum;  // one store a phase (latency diagnosis)
#else
    if (subgroupElect() && row < N) e_[out0 + row] = sum;
#endif
  }
#endif
}

// The grid barrier in two halves: a workgroup arrives once its writes are out, and waits later until all
// `target` arrivals are in, so that what it does between them (its next weights' loads) overlaps the
// wait. A memory barrier waits for the workgroup's loads in flight, so none may be issued before arrive().
// A bound on the polls turns a grid that is not all resident into an error.
void arrive() {
  memoryBarrierBuffer();
  barrier();
  if (gl_LocalInvocationIndex == 0u) atomicAdd(arrived_, 1u);
}

void wait(uint target) {
  if (gl_LocalInvocationIndex == 0u) {
    uint spins = 0u;
    while (SYNC_POLL < target)
      if (++spins == 16777216u) break;
    // Also where the driver cut the loop short: lavapipe ends any loop after 65535 iterations (gallivm's
    // loop limiter), which a wait longer than that (another process holding the CPUs) runs into.
    if (arrived_ < target) stalled_ = 1u;
  }
  barrier();
  memoryBarrierBuffer();
}

// SYNC_CODE=n (with SYNC_CODE_UNROLLED 0 or 1): n dependent multiply-adds before the phase, as a loop of
// a few instructions or unrolled into n of them, to tell the cost of a kernel's code size at its launch
// (instruction fetch) from that of executing it.
float codeBlock() {
  float v = float(gl_LocalInvocationIndex) * 1e-3;
#if SYNC_CODE_UNROLLED
  [[unroll]]
#else
  [[dont_unroll]]
#endif
  for (uint i = 0u; i < SYNC_CODE; ++i) v = v * 0.999 + 1e-4;
  return v;
}

void main() {
#if SYNC_CODE > 0
  if (codeBlock() == -1.0 && push_.copies == 0u) e_[0] = 0.0;  // never: keeps the code
#endif
#if SYNC_GUARD_STORE
  // A store that never happens and that the compiler cannot rule out (latency diagnosis, with --empty); its
  // index or value takes one built-in each: 1 the global invocation, 2 the workgroup count, 3 the subgroup,
  // 4 subgroupElect, 5 the lane, 6 a subgroupAdd.
#if SYNC_GUARD_STORE == 2
  if (push_.copies == 0u) e_[gl_WorkGroupID.x * gl_NumWorkGroups.x] = 0.0;
#elif SYNC_GUARD_STORE == 3
  if (push_.copies == 0u) e_[gl_SubgroupID] = 0.0;
#elif SYNC_GUARD_STORE == 4
  if (push_.copies == 0u && subgroupElect()) e_[gl_GlobalInvocationID.x] = 0.0;
#elif SYNC_GUARD_STORE == 5
  if (push_.copies == 0u) e_[gl_SubgroupInvocationID] = 0.0;
#elif SYNC_GUARD_STORE == 6
  float one = subgroupAdd(1.0 + float(gl_LocalInvocationIndex));
  if (push_.copies == 0u) e_[gl_GlobalInvocationID.x] = one;
#else
  if (push_.copies == 0u) e_[gl_GlobalInvocationID.x] = 0.0;
#endif
#endif
  prefetch(push_.first);
#if PERSISTENT
  for (uint p = 0u; p < push_.count; ++p) {
    compute(push_.first + p);
    if (p + 1u == push_.count) break;
    arrive();
    prefetch(push_.first + p + 1u);
    wait((p + 1u) * gl_NumWorkGroups.x);
  }
#else
#if SYNC_PREFETCH_NEXT
  // The next phase's weights of the same rows, loaded into the L2 only: their sum decides a store that
  // never happens, which the compiler cannot know, so the loads stay.
  uint touched = 0u;
  uint next = ((push_.first + 1u) % push_.copies) * (N * LOADS);
  [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
    uint row = min(warpIndex() + r * warpCount(), N - 1u);
    [[unroll]] for (uint i = 0u; i < PER_LANE; ++i)
      touched += w_[next + row * LOADS + min(gl_SubgroupInvocationID + i * SUBGROUP, LOADS - 1u)].x;
  }
#endif
  compute(push_.first);
#if SYNC_PREFETCH_NEXT
  if (touched == 0x7fffffffu && push_.count == 0u) e_[0] = 0.0;
#endif
#endif
}
)glsl";

// The kernel's push constants; the addresses only under SYNC_BDA.
struct Push {
  uint32_t first, count, copies, unused = 0;
  uint64_t weights = 0, vectors = 0, elements = 0, sync = 0;
};

std::vector<uint8_t> randomHalfMatrices(uint32_t n, uint32_t copies) {
  // Uniform in ±sqrt(3 / n): each phase keeps the vector's scale.
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const float scale = std::sqrt(3.0f / static_cast<float>(n));
  std::vector<uint8_t> bytes(size_t(n) * n * copies * 2);
  for (size_t i = 0; i < bytes.size() / 2; ++i) {
    _Float16 h = static_cast<_Float16>(uniform(rng) * scale);
    std::memcpy(bytes.data() + 2 * i, &h, 2);
  }
  return bytes;
}

// The host's result of `phases` phases from x0, with the weights as the device reads them.
std::vector<float> hostChain(const std::vector<uint8_t> &weights, std::vector<float> x, uint32_t n,
                             uint32_t phases, uint32_t copies) {
  std::vector<float> y(n);
  for (uint32_t p = 0; p < phases; ++p) {
    const uint8_t *w = weights.data() + size_t(p % copies) * n * n * 2;
    for (uint32_t row = 0; row < n; ++row) {
      double sum = 0;
      for (uint32_t k = 0; k < n; ++k) {
        _Float16 h;
        std::memcpy(&h, w + (size_t(row) * n + k) * 2, 2);
        sum += static_cast<double>(static_cast<float>(h)) * x[k];
      }
      y[row] = static_cast<float>(sum);
    }
    std::swap(x, y);
  }
  return x;
}

class SyncRun {
public:
  SyncRun(vk::Context &ctx, codegen::ShaderCompiler &compiler, const SyncOptions &o)
      : ctx_(ctx), compiler_(compiler), o_(o) {
    if (o.n % 8 != 0 || o.n == 0) throw std::runtime_error("--n must be a positive multiple of 8");
    subgroup_ = ctx.info().subgroupSize;
    if (subgroup_ == 0 || o.workgroupSize % subgroup_ != 0 || o.workgroupSize > 1024)
      throw std::runtime_error("--workgroup-size must be a multiple of the subgroup size (" +
                               std::to_string(subgroup_) + ") up to 1024");
    warps_ = o.workgroups * (o.workgroupSize / subgroup_);
    rows_ = (o.n + warps_ - 1) / warps_;
    const uint64_t matrixBytes = uint64_t(o.n) * o.n * 2;
    const uint64_t budget = std::min<uint64_t>(256ull << 20, ctx.info().maxStorageBufferRange);
    copies_ = static_cast<uint32_t>(std::clamp<uint64_t>(budget / matrixBytes, 1, 4096));
    copies_ = std::min(copies_, o.phases); // each phase its own matrix where they fit
    if (o.copies) copies_ = o.copies;
    weightsHost_ = randomHalfMatrices(o.n, copies_);
    weights_ = ctx.createBuffer(weightsHost_.size(), "sync weights");
    ctx.upload(weights_, 0, weightsHost_.data(), weightsHost_.size());
    vectors_ = ctx.createBuffer(uint64_t(o.n) * 8, "sync vectors");
    sync_ = ctx.createBuffer(16, "sync counter");
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    x0_.resize(o.n);
    for (float &v : x0_) v = uniform(rng);
  }

  // Median microseconds a phase over the repeats, and the last run's error against the host.
  std::pair<double, double> run(bool persistent) {
    std::string source = std::string("#define N ") + std::to_string(o_.n) + "u\n#define ROWS " +
                         std::to_string(rows_) + "u\n#define WORKGROUP " + std::to_string(o_.workgroupSize) +
                         "u\n#define SUBGROUP " + std::to_string(subgroup_) + "u\n#define EMPTY " +
                         (o_.empty ? "1" : "0") + "\n#define PERSISTENT " + (persistent ? "1" : "0") +
                         "\n#define VECTOR_QUALIFIER " + (persistent ? "coherent" : "") + "\n";
    // --define NAME=VALUE, then 0 for the diagnosis switches not given.
    for (const std::string &d : o_.defines) {
      size_t eq = d.find('=');
      source += "#define " + d.substr(0, eq) + " " + (eq == std::string::npos ? "1" : d.substr(eq + 1)) + "\n";
    }
    for (const char *name : {"SYNC_NO_W", "SYNC_NO_X", "SYNC_NO_STORE", "SYNC_NO_REDUCE", "SYNC_STORE_ONE",
                             "SYNC_GUARD_STORE", "SYNC_PREFETCH_NEXT", "SYNC_BDA", "SYNC_SKIP_PREFETCH",
                             "SYNC_SKIP_COMPUTE", "SYNC_CODE", "SYNC_CODE_UNROLLED"})
      if (source.find(std::string("#define ") + name + " ") == std::string::npos)
        source += std::string("#define ") + name + " 0\n";
    std::string glsl = kSyncKernel;
    glsl.insert(glsl.find('\n') + 1, source); // after #version
    vk::Pipeline pipeline =
        ctx_.createPipeline(compiler_.compile(glsl, "sync bench"), 3, sizeof(Push), "sync bench");
    // The driver's statistics of each way's kernel (where the context captures them: --statistics).
    for (const vk::PipelineStatistic &st : vk::pipelineStatistics(ctx_, pipeline))
      statistics_[std::string(persistent ? "persistent " : "dispatch ") + st.executable + ": " + st.name] =
          st.value;
    VkDescriptorSet set = ctx_.createDescriptorSet(pipeline, {{weights_.handle(), 0, weights_.size()},
                                                              {vectors_.handle(), 0, vectors_.size()},
                                                              {sync_.handle(), 0, sync_.size()}});
    std::vector<double> us;
    double error = 0;
    for (int r = -2; r < o_.repeats; ++r) { // two untimed runs first: clocks up, pipeline compiled
      ctx_.upload(vectors_, 0, x0_.data(), x0_.size() * 4);
      ctx_.fill(sync_, 0);
      VkCommandBuffer cmd = ctx_.beginCommands();
      ctx_.resetTimestamps(cmd, 2);
      ctx_.writeTimestamp(cmd, 0);
      if (persistent) {
        Push push = addressed({0, o_.phases, copies_});
        ctx_.dispatch(cmd, pipeline, set, &push, sizeof push, o_.workgroups, 1, 1);
      } else {
        for (uint32_t p = 0; p < o_.phases; ++p) {
          Push push = addressed({p, 1, copies_});
          ctx_.dispatch(cmd, pipeline, set, &push, sizeof push, o_.workgroups, 1, 1);
          ctx_.computeBarrier(cmd);
        }
      }
      ctx_.writeTimestamp(cmd, 1);
      ctx_.submitAndWait(cmd);
      std::vector<uint64_t> ns = ctx_.readTimestamps(2);
      uint32_t stalled = 0;
      ctx_.download(sync_, 4, &stalled, 4);
      if (stalled)
        throw std::runtime_error(
            "the persistent grid of " + std::to_string(o_.workgroups) +
            " workgroups left a grid barrier before all had arrived: the device does not "
            "keep them all resident (lower --workgroups), or it cut the wait short (lavapipe "
            "ends a loop after 65535 iterations)");
      if (r >= 0) us.push_back(static_cast<double>(ns[1] - ns[0]) / 1e3 / o_.phases);
      if (r == o_.repeats - 1 && checked()) error = maxError();
    }
    ctx_.resetDescriptorSets();
    std::sort(us.begin(), us.end());
    return {us[us.size() / 2], error};
  }

  // Whether the result is the chain's: with work, and no diagnosis define that leaves a read out.
  bool checked() const {
    auto diagnosis = [](const std::string &d) {
      return (d.rfind("SYNC_NO_", 0) == 0 || d.rfind("SYNC_STORE_ONE", 0) == 0 ||
              d.rfind("SYNC_GUARD_STORE", 0) == 0 || d.rfind("SYNC_SKIP_", 0) == 0) &&
             d.find("=0") == std::string::npos;
    };
    return !o_.empty && std::none_of(o_.defines.begin(), o_.defines.end(), diagnosis);
  }
  uint32_t rows() const { return rows_; }
  const nlohmann::json &statistics() const { return statistics_; }

  // `push` with the buffers' device addresses where the kernel takes them (SYNC_BDA).
  Push addressed(Push push) const {
    auto bda = [](const std::string &d) {
      return d.rfind("SYNC_BDA", 0) == 0 && d.find("=0") == std::string::npos;
    };
    if (std::none_of(o_.defines.begin(), o_.defines.end(), bda)) return push;
    push.weights = weights_.deviceAddress(), push.vectors = push.elements = vectors_.deviceAddress();
    push.sync = sync_.deviceAddress();
    return push;
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
  uint32_t subgroup_ = 0, warps_ = 0, rows_ = 0, copies_ = 0;
  std::vector<uint8_t> weightsHost_;
  std::vector<float> x0_, expected_;
  nlohmann::json statistics_ = nlohmann::json::object();
  vk::Buffer weights_, vectors_, sync_;
};

} // namespace

nlohmann::json runSyncBench(vk::Context &ctx, codegen::ShaderCompiler &compiler, const SyncOptions &options) {
  SyncRun run(ctx, compiler, options);
  auto [dispatchUs, dispatchError] = run.run(false);
  auto [persistentUs, persistentError] = run.run(true);
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
                        {"persistent_us", persistentUs}};
  out["checked"] = run.checked();
  if (options.statistics) out["statistics"] = run.statistics();
  if (!options.empty) {
    out["dispatch_gb_per_s"] = phaseBytes / (dispatchUs * 1e3);
    out["persistent_gb_per_s"] = phaseBytes / (persistentUs * 1e3);
    if (run.checked()) out["max_error"] = std::max(dispatchError, persistentError);
    if (std::max(dispatchError, persistentError) > 1e-3)
      throw std::runtime_error("the gemv chain's result differs from the host's (relative error " +
                               std::to_string(std::max(dispatchError, persistentError)) + ")");
  }
  return out;
}

} // namespace gerbil::bench
