// gerbil-kernel-bench: GPU time of one kernel as codegen specialises it, on random inputs, to tune kernels on
// a device without compiling a model. Each run prints one JSON line: the kernel, its shape and variant, the
// median time of --repeats launches (timestamp queries, a compute barrier after each) and the rate it
// reached (TFLOP/s for matmuls, GB/s of weights and cache for the memory-bound kernels). Weights rotate over
// copies of at least 512 MiB in all, so that repeated launches read memory, not the L2 cache.
//   gerbil-kernel-bench matmul --tokens 512 --n 14336 --k 4096 --target nvidia:128x128x32:2x4
//   gerbil-kernel-bench gemv --n 4096 --k 14336
//   gerbil-kernel-bench attention-decode --heads 32 --kv-heads 8 --head-dim 128 --position 255
//   gerbil-kernel-bench sync --n 896 --phases 96 --workgroups 132   (SyncBench.h: what ordering costs)
//   gerbil-kernel-bench mlp --hidden 896 --inter 4864   (MlpBench.h: the decode MLP as one launch)
// --define NAME=VALUE adds a #define to the kernel (a variant the template reads with #ifndef defaults).
#include "compiler/codegen/AttentionKernel.h"
#include "compiler/codegen/GemvKernel.h"
#include "compiler/codegen/MatMulKernel.h"
#include "compiler/codegen/ShaderCompiler.h"
#include "compiler/frontend/Rope.h"
#include "runtime/plan/Plan.h"
#include "runtime/vulkan/Device.h"
#include "runtime/vulkan/PipelineStatistics.h"
#include "tools/CliHelpers.h"
#include "tools/gerbil-kernel-bench/Defines.h"
#include "tools/gerbil-kernel-bench/MlpBench.h"
#include "tools/gerbil-kernel-bench/StatisticsJson.h"
#include "tools/gerbil-kernel-bench/SyncBench.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <random>

using namespace gerbil;

namespace {

struct Options {
  int repeats = 50;
  int device = -1;
  std::vector<std::string> defines;
  plan::DType dtype = plan::DType::F16;
  bool statistics = false;
  // One copy of the weights and caches, so that repeated launches read them from the L2 (what a launch
  // gains when the one before has loaded its weights there).
  bool weightsInL2 = false;
  // The least bytes the rotated copies span (a model's weights span gigabytes: what a launch pays beyond
  // the L2 for addresses far apart, e.g. in address translation).
  uint64_t rotateBytes = 512ull << 20;
  // A rotated binding's copies packed into buffers (one allocation each) of up to packBytes at 2 MiB
  // steps, instead of a buffer each; oneBuffer: all of them in one.
  bool oneBuffer = false;
  uint64_t packBytes = 0;
  bool subgroupOps = true; // gemv and decode attention: reductions with subgroup operations
  // Buffers allocated so that their device addresses can be taken (sync's SYNC_BDA variant, or
  // --addressable-memory: through descriptors still, to tell the allocation's cost from the access's).
  bool bufferDeviceAddress = false;
  // matmul, gemv, attention: the kernel reaches its buffers by address (gerbilc --buffer-addresses).
  bool bufferAddresses = false;
  std::string allocation = vk::memoryAllocationName(vk::ContextOptions{}.allocation);
  vk::CompanionQueue companionQueue = vk::CompanionQueue::None; // sync's companion way: --companion-queue
  std::string queueFamily = vk::mainQueueFamilyName(vk::ContextOptions{}.mainQueueFamily); // --queue-family
  std::string dispatchBarrier =
      vk::dispatchBarrierName(vk::ContextOptions{}.dispatchBarrier); // --dispatch-barrier
};

// --prefetch BYTES[@STRIDE] (repeatable), as gerbil-prefetch-weights gives a launch's prefetch workers.
std::vector<codegen::PrefetchRange> parsePrefetch(const std::vector<std::string> &texts) {
  std::vector<codegen::PrefetchRange> ranges;
  for (const std::string &text : texts) {
    size_t at = text.find('@'), used = 0, usedStride = 0;
    codegen::PrefetchRange range;
    try {
      range.bytes = std::stoll(text.substr(0, at), &used);
      if (at != std::string::npos) range.stride = std::stoll(text.substr(at + 1), &usedStride);
    } catch (const std::exception &) {
      used = 0;
    }
    if (used != std::min(at, text.size()) || (at != std::string::npos && usedStride != text.size() - at - 1))
      throw std::runtime_error("--prefetch '" + text + "': not BYTES or BYTES@STRIDE");
    ranges.push_back(range);
  }
  return ranges;
}

nlohmann::json prefetchJson(const std::vector<codegen::PrefetchRange> &ranges) {
  nlohmann::json list = nlohmann::json::array();
  for (const codegen::PrefetchRange &r : ranges) list.push_back({r.bytes, r.stride});
  return list;
}

// Random f32 values, or 16-bit ones for f16 / bf16 buffers (finite, in [-1, 1]).
std::vector<uint8_t> randomBytes(size_t elements, plan::DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<uint8_t> bytes(elements * plan::byteSize(dtype));
  for (size_t i = 0; i < elements; ++i) {
    float v = uniform(rng);
    if (dtype == plan::DType::F32) {
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    } else if (dtype == plan::DType::F16) {
      _Float16 h = static_cast<_Float16>(v);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    } else {
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      uint16_t high = static_cast<uint16_t>(bits >> 16);
      std::memcpy(bytes.data() + 2 * i, &high, 2);
    }
  }
  return bytes;
}

// One buffer per binding; `rotated` bindings (weights, caches) get copies to cycle through.
struct BindingData {
  std::vector<uint8_t> bytes;
  bool rotated = false;
  bool zeroed = false; // scratch counters
};

class Bench {
public:
  explicit Bench(const Options &options) : options_(options) {
    vk::ContextOptions context;
    context.deviceIndex = options.device;
    context.extensions = {"VK_NV_cooperative_matrix", "VK_KHR_cooperative_matrix",
                          "VK_NV_cooperative_matrix2", "VK_EXT_shader_atomic_float"};
    context.pipelineStatistics = options.statistics;
    context.bufferDeviceAddress = options.bufferDeviceAddress || options.bufferAddresses;
    context.allocation = *vk::parseMemoryAllocation(options.allocation);
    context.companionQueue = options.companionQueue;
    context.mainQueueFamily = *vk::parseMainQueueFamily(options.queueFamily);
    context.dispatchBarrier = *vk::parseDispatchBarrier(options.dispatchBarrier);
    ctx_ = std::make_unique<vk::Context>(context);
  }

  const vk::DeviceInfo &info() const { return ctx_->info(); }
  bool hasBufferDeviceAddresses() const { return ctx_->hasBufferDeviceAddresses(); }
  vk::Context &context() { return *ctx_; }
  codegen::ShaderCompiler &compiler() { return compiler_; }

  // The profile of a --target this device can run; throws naming an unknown target or the missing extension
  // (unless the kernel timed needs none of them: `withExtensions` false).
  mlir::gerbil::TargetProfile target(const std::string &spec, bool withExtensions = true) const {
    std::optional<mlir::gerbil::TargetProfile> profile = mlir::gerbil::parseTarget(spec);
    if (!profile) throw std::runtime_error("unknown target '" + spec + "'");
    if (withExtensions)
      for (const std::string &extension : profile->deviceExtensions)
        if (!info().hasExtension(extension))
          throw std::runtime_error(info().name + " has no " + extension + " (target '" + spec + "')");
    return *profile;
  }

  // Median GPU milliseconds of one launch of `source` over `grid`.
  double time(codegen::KernelSource source, const std::vector<BindingData> &data,
              std::array<uint32_t, 3> grid, uint32_t tokens) {
    // A --define of a name codegen defines replaces codegen's value (a second #define would not compile).
    for (const auto &[name, value] : bench::parseDefines(options_.defines))
      codegen::setDefine(source, name, value);
    source.byAddress = options_.bufferAddresses;
    std::vector<uint32_t> spirv = compiler_.compile(source, "benchmarked kernel");
    uint64_t rotatedBytes = 0;
    for (const BindingData &b : data)
      if (b.rotated) rotatedBytes += b.bytes.size();
    const uint64_t minimum = options_.rotateBytes;
    size_t copies = rotatedBytes == 0 || options_.weightsInL2
                        ? 1
                        : std::clamp<size_t>((minimum + rotatedBytes - 1) / rotatedBytes, 1, 4096);

    // Each binding's buffers: `copies` of a rotated one, one of any other; packed (oneBuffer or
    // packBytes), a rotated binding's copies lie `perBuffer` to a buffer, `stride` apart.
    std::vector<std::vector<vk::Buffer>> buffers(data.size());
    std::vector<uint64_t> stride(data.size(), 0);
    std::vector<size_t> perBuffer(data.size(), 1);
    for (size_t i = 0; i < data.size(); ++i) {
      if ((options_.oneBuffer || options_.packBytes) && data[i].rotated && copies > 1) {
        const uint64_t align = 2ull << 20;
        stride[i] = (std::max<uint64_t>(data[i].bytes.size(), 16) + align - 1) / align * align;
        perBuffer[i] = options_.oneBuffer ? copies : std::max<size_t>(1, options_.packBytes / stride[i]);
        for (size_t first = 0; first < copies; first += perBuffer[i]) {
          const size_t count = std::min(perBuffer[i], copies - first);
          vk::Buffer b = ctx_->createBuffer(stride[i] * count, source.bindings[i].name);
          for (size_t c = 0; c < count; ++c)
            ctx_->upload(b, c * stride[i], data[i].bytes.data(), data[i].bytes.size());
          buffers[i].push_back(std::move(b));
        }
        continue;
      }
      for (size_t c = 0; c < (data[i].rotated ? copies : 1); ++c) {
        vk::Buffer b =
            ctx_->createBuffer(std::max<size_t>(data[i].bytes.size(), 16), source.bindings[i].name);
        if (data[i].zeroed)
          ctx_->fill(b, 0);
        else
          ctx_->upload(b, 0, data[i].bytes.data(), data[i].bytes.size());
        buffers[i].push_back(std::move(b));
      }
    }
    std::vector<uint32_t> state(64, 0);
    state[0] = statePosition_;
    vk::Buffer stateBuffer = ctx_->createBuffer(state.size() * 4, "state");
    ctx_->upload(stateBuffer, 0, state.data(), state.size() * 4);

    // By address: no bindings, and the push constants { tokens, firstRow } then each binding's address.
    const plan::Kernel kernel{"benchmarked kernel", {}, static_cast<uint32_t>(data.size() + 1), {}};
    const plan::BufferAccess access =
        options_.bufferAddresses ? plan::BufferAccess::Addresses : plan::BufferAccess::Descriptors;
    vk::Pipeline pipeline =
        ctx_->createPipeline(spirv, options_.bufferAddresses ? 0 : kernel.numBindings,
                             plan::pushConstantBytes(access, kernel), "benchmarked kernel");
    statistics_ = vk::pipelineStatistics(*ctx_, pipeline);
    std::vector<VkDescriptorSet> sets;
    std::vector<std::vector<uint32_t>> pushes; // each copy's push constants
    for (size_t c = 0; c < copies; ++c) {
      std::vector<vk::BufferRange> ranges;
      std::vector<const vk::Buffer *> bound; // the buffer of each range, for its address
      for (size_t i = 0; i < buffers.size(); ++i) {
        if (stride[i]) {
          bound.push_back(&buffers[i][c / perBuffer[i]]);
          ranges.push_back({bound.back()->handle(), c % perBuffer[i] * stride[i],
                            std::max<uint64_t>(data[i].bytes.size(), 16)});
          continue;
        }
        bound.push_back(&buffers[i][c % buffers[i].size()]);
        ranges.push_back({bound.back()->handle(), 0, bound.back()->size()});
      }
      bound.push_back(&stateBuffer);
      ranges.push_back({stateBuffer.handle(), 0, stateBuffer.size()});
      std::vector<uint32_t> push = {tokens, 0};
      if (options_.bufferAddresses) {
        for (size_t i = 0; i < ranges.size(); ++i)
          plan::appendAddress(push, bound[i]->deviceAddress() + ranges[i].offset);
        sets.push_back(VK_NULL_HANDLE);
      } else {
        sets.push_back(ctx_->createDescriptorSet(pipeline, ranges));
      }
      pushes.push_back(std::move(push));
    }

    auto record = [&](int launches, bool stamps) {
      VkCommandBuffer cmd = ctx_->beginCommands();
      if (stamps) ctx_->resetTimestamps(cmd, 2 * launches);
      for (int r = 0; r < launches; ++r) {
        if (stamps) ctx_->writeTimestamp(cmd, 2 * r);
        const std::vector<uint32_t> &push = pushes[r % pushes.size()];
        ctx_->dispatch(cmd, pipeline, sets[r % sets.size()], push.data(),
                       static_cast<uint32_t>(push.size() * sizeof(uint32_t)), grid[0], grid[1], grid[2]);
        ctx_->computeBarrier(cmd);
        if (stamps) ctx_->writeTimestamp(cmd, 2 * r + 1);
      }
      ctx_->submitAndWait(cmd);
    };
    // Warm-up: clocks up and the pipeline compiled by the driver.
    auto start = std::chrono::steady_clock::now();
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 0.3)
      record(20, false);
    record(options_.repeats, true);
    std::vector<uint64_t> ns = ctx_->readTimestamps(2 * options_.repeats);
    std::vector<double> ms;
    for (int r = 0; r < options_.repeats; ++r) ms.push_back((ns[2 * r + 1] - ns[2 * r]) / 1e6);
    std::sort(ms.begin(), ms.end());
    ctx_->resetDescriptorSets();
    return ms[ms.size() / 2];
  }

  void setPosition(uint32_t position) { statePosition_ = position; }
  // The driver's statistics of the last kernel timed (--statistics), as {"executable: name": value}.
  nlohmann::json statistics() const {
    nlohmann::json out = nlohmann::json::object();
    bench::addStatistics(out, statistics_);
    return out;
  }

private:
  Options options_;
  std::unique_ptr<vk::Context> ctx_;
  codegen::ShaderCompiler compiler_;
  uint32_t statePosition_ = 0;
  std::vector<vk::PipelineStatistic> statistics_;
};

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"gerbil-kernel-bench: GPU time of one kernel, as codegen specialises it, on random inputs."};
  app.require_subcommand(1);
  app.fallthrough(); // the common options may follow the subcommand
  Options options;
  std::string dtype = "f16";
  app.add_option("--repeats", options.repeats, "Timed launches (the median is reported)")
      ->check(CLI::Range(1, 10000));
  app.add_option("--device", options.device, "Vulkan device index");
  app.add_option(
      "--define", options.defines,
      "NAME=VALUE added to the kernel's #defines, or replacing codegen's value of NAME (repeatable)");
  app.add_flag("--statistics", options.statistics,
               "Add the driver's statistics of the compiled kernel (registers, spills...) where it has "
               "VK_KHR_pipeline_executable_properties");
  CLI::Option *inL2 = app.add_flag(
      "--weights-in-l2", options.weightsInL2,
      "matmul, gemv, attention: one copy of the weights and caches (read from the L2 after the first "
      "launch) instead of copies rotated past it");
  uint64_t rotateMib = options.rotateBytes >> 20;
  app.add_option("--rotate-mib", rotateMib,
                 "matmul, gemv, attention: the least MiB the rotated copies of the weights and caches span "
                 "(default 512)")
      ->check(CLI::Range(1, 1 << 20))
      ->excludes(inL2);
  CLI::Option *oneBuffer =
      app.add_flag("--one-buffer", options.oneBuffer,
                   "matmul, gemv, attention: a rotated binding's copies in one buffer (one allocation, 2 MiB "
                   "apart) instead of a buffer each")
          ->excludes(inL2);
  uint64_t packMib = 0;
  app.add_option("--pack-mib", packMib,
                 "matmul, gemv, attention: a rotated binding's copies packed into buffers (one allocation "
                 "each) of up to N MiB, 2 MiB apart, instead of a buffer each")
      ->check(CLI::Range(1, 1 << 20))
      ->excludes(inL2)
      ->excludes(oneBuffer);
  app.add_flag(
      "--no-subgroup-ops", [&](int64_t) { options.subgroupOps = false; },
      "gemv, attention-decode: reductions through shared memory only (gerbilc --no-subgroup-ops)");
  app.add_option("--dtype", dtype, "Weight type")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  app.add_flag("--buffer-addresses", options.bufferAddresses,
               "matmul, gemv, attention: the kernel reaches its buffers through device addresses in push "
               "constants instead of a descriptor set (gerbilc --buffer-addresses)");

  app.add_option(
         "--allocation", options.allocation,
         "How buffers get their device memory: dedicated (the default, as gerbil-exec: an allocation "
         "dedicated to its buffer), plain, exportable (dedicated, as a file descriptor could export), "
         "priority (VK_EXT_memory_priority's highest): ways a driver may map differently (with "
         "--one-buffer or --pack-mib each buffer of copies is one allocation, made the same way)")
      ->check(CLI::IsMember(vk::memoryAllocationNames()));
  app.add_option("--queue-family", options.queueFamily,
                 "The queue family the kernels run on: first (the first with compute and timestamps, as "
                 "gerbil-exec), compute-only (one without graphics, where the device has it)")
      ->check(CLI::IsMember(vk::mainQueueFamilyNames()));
  app.add_option("--dispatch-barrier", options.dispatchBarrier,
                 "sync: the barrier between the dispatched phases (full: compute and transfers, as "
                 "computeBarrier; compute: compute shaders only; storage: their storage buffers only)")
      ->check(CLI::IsMember(vk::dispatchBarrierNames()));
  app.add_flag("--addressable-memory", options.bufferDeviceAddress,
               "Allocate every buffer with device addresses (as plans by address do) but bind them through "
               "descriptors: what the allocation alone costs");

  int64_t tokens = 512, n = 4096, k = 4096;
  std::string target = "nvidia";
  bool norm = false, residual = false, halfInput = false, gateUpMatMul = false, workgroupScope = false;
  CLI::App *matmul =
      app.add_subcommand("matmul", "Prefill matmul (tiled, or cooperative-matrix for a coop target)");
  matmul->add_option("--tokens", tokens, "T");
  matmul->add_option("--n", n, "Outputs");
  matmul->add_option("--k", k, "Reduction width");
  matmul->add_option("--target", target, "generic, or nvidia|khr[:TxNxK:WTxWN[:S[:P]]] (tensor cores)");
  matmul->add_flag("--norm", norm, "RMSNorm prologue");
  matmul->add_flag("--half-input", halfInput,
                   "On a coop target without --norm: x as f16 rows, as a norm launch before (not timed) "
                   "writes them for the grouped projections");
  matmul->add_flag("--gate-up", gateUpMatMul,
                   "On a coop target: the grouped gate/up projection, n outputs of silu(gate) * up from 2n "
                   "weight rows, tiled as the catalog tiles it");
  matmul->add_flag("--residual", residual, "Residual epilogue");
  matmul->add_flag(
      "--workgroup-scope", workgroupScope,
      "Experimental: workgroup-scope matrices of a whole tile (VK_NV_cooperative_matrix2), loaded "
      "from memory as they are (matmul_coop_workgroup.glsl)");
  int64_t qkvKvRows = 0;
  matmul
      ->add_option("--qkv", qkvKvRows,
                   "On a coop target: the grouped q/k/v projection, n rows of q and this many of each of k "
                   "and v, tiled as the catalog tiles it")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->excludes("--gate-up")
      ->excludes("--residual");

  CLI::App *gemv = app.add_subcommand("gemv", "Decode's one-token matmul");
  gemv->add_option("--n", n, "Outputs");
  gemv->add_option("--k", k, "Reduction width");
  int64_t split = 0;
  gemv->add_option("--split", split, "Teams per pair of rows (default: the catalog's)");
  int64_t gemvWorkgroup = 0;
  gemv->add_option("--workgroup", gemvWorkgroup,
                   "Invocations a workgroup at least, more pairs of rows each (default: the catalog's, 128 "
                   "or one pair's teams)")
      ->check(CLI::Range(int64_t{32}, int64_t{1024}));
  CLI::Option *gemvNorm = gemv->add_flag("--norm", norm, "RMSNorm prologue");
  bool normFolded = false;
  gemv->add_flag("--norm-folded", normFolded,
                 "With --norm: its weight folded into the matrix (gerbil-fold-norm-weights), not loaded")
      ->needs(gemvNorm);
  gemv->add_flag("--residual", residual, "Residual epilogue");
  bool gateUp = false;
  CLI::Option *gemvGateUp =
      gemv->add_flag("--gate-up", gateUp, "Gate/up pairs: n outputs of silu(gate) * up, 2n weight rows");
  bool argmax = false;
  CLI::Option *gemvArgmax =
      gemv->add_flag("--argmax", argmax,
                     "The logits projection that also picks the greedy token (gerbilc --fuse-logits-argmax)")
          ->excludes(gemvGateUp);
  int64_t qkvKv = 0, qkvHeadDim = 0;
  bool qkvBias = false;
  CLI::Option *gemvQkv =
      gemv->add_option("--qkv", qkvKv,
                       "The grouped q/k/v projection as decode runs it: n rows of q, this many of k and of v")
          ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
          ->excludes(gemvGateUp)
          ->excludes(gemvArgmax)
          ->excludes("--residual")
          ->excludes("--split");
  gemv->add_option("--qkv-head-dim", qkvHeadDim,
                   "With --qkv: heads of this many dims, q and k rotated (RoPE, Llama-3's theta) and k, v "
                   "written into a KV cache of 1024 positions (at 191), as the model's q/k/v")
      ->check(CLI::Range(int64_t{2}, int64_t{1024}))
      ->needs(gemvQkv);
  gemv->add_flag("--qkv-bias", qkvBias, "With --qkv: biases on q, k and v (Qwen2's)")->needs(gemvQkv);

  int64_t heads = 32, kvHeads = 8, headDim = 128, position = 255, sequence = 4096;
  CLI::App *attention = app.add_subcommand("attention-decode", "Decode's split attention of one query");
  attention->add_option("--heads", heads);
  attention->add_option("--kv-heads", kvHeads);
  attention->add_option("--head-dim", headDim);
  attention->add_option("--position", position, "The query's position (keys 0..position)");
  attention->add_option("--seq", sequence, "KV cache positions");
  std::string decodeTarget = "nvidia";
  attention
      ->add_option("--target", decodeTarget,
                   "The target profile that chooses the shape, as gerbilc's does (its aim for long "
                   "contexts sets the splits; its @decode-... parts apply)")
      ->capture_default_str();
  mlir::gerbil::DecodeAttentionChoice decodeChoice;
  attention->add_option(
      "--query-heads", decodeChoice.queryHeads,
      "Query heads a workgroup (a divisor of heads / kv-heads; default: the --target's choice)");
  attention
      ->add_option("--warps", decodeChoice.warps,
                   "Warps of 32 a workgroup: 1, 2, 4, 8 or 16 (default: the --target's choice)")
      ->check(CLI::IsMember({1, 2, 4, 8, 16}));
  attention
      ->add_option(
          "--splits", decodeChoice.splits,
          "The most workgroups a kv head's cached positions are cut between (default: the --target's choice)")
      ->check(CLI::Range(1, 64));
  int64_t scoreLanes = 0;
  attention
      ->add_option("--score-lanes", scoreLanes,
                   "Lanes that share a key's scores: 1, 2, 4, 8, 16 or 32 (default: the codegen's)")
      ->check(CLI::IsMember({1, 2, 4, 8, 16, 32}));
  std::vector<std::string> prefetch;
  const char *prefetchHelp =
      "BYTES[@STRIDE]: also read BYTES of a weight (every STRIDE bytes; default 16, every "
      "word) in workgroups of their own, as gerbil-prefetch-weights has it (repeatable, up "
      "to 8)";
  attention->add_option("--prefetch", prefetch, prefetchHelp);
  gemv->add_option("--prefetch", prefetch, prefetchHelp);

  std::string kvDtype = "f32";
  gemv->add_option("--kv-dtype", kvDtype, "With --qkv-head-dim: what the KV cache holds (gerbilc --kv-dtype)")
      ->check(CLI::IsMember({"f32", "f16"}));
  attention->add_option("--kv-dtype", kvDtype, "What the KV cache holds (gerbilc --kv-dtype)")
      ->check(CLI::IsMember({"f32", "f16"}));

  int64_t firstPosition = 0;
  CLI::App *prefillAttention = app.add_subcommand(
      "attention-prefill", "Prefill's causal attention of --tokens queries against the cache");
  prefillAttention->add_option("--heads", heads);
  prefillAttention->add_option("--kv-heads", kvHeads);
  prefillAttention->add_option("--head-dim", headDim);
  prefillAttention->add_option("--tokens", tokens, "T, the step's queries");
  prefillAttention->add_option("--position", firstPosition,
                               "Position of the first query (cached keys before it)");
  prefillAttention->add_option("--seq", sequence, "KV cache positions");
  prefillAttention->add_option("--target", target, "generic (tiled f32), nvidia or khr (tensor cores)");
  int64_t keySplits = 0, keyTile = 0;
  bool halfResult = false;
  prefillAttention->add_flag("--half-result", halfResult,
                             "Tensor cores: the result in f16, as for an o projection that reads f16 rows");
  prefillAttention
      ->add_option("--key-splits", keySplits,
                   "Workgroups a query tile's keys are split between (tensor cores; default: the catalog's)")
      ->check(CLI::Range(1, 8));
  prefillAttention->add_option("--key-tile", keyTile,
                               "Keys staged at a time (tensor cores; default: the catalog's)");
  prefillAttention->add_option("--kv-dtype", kvDtype, "What the KV cache holds (gerbilc --kv-dtype)")
      ->check(CLI::IsMember({"f32", "f16"}));

  bench::SyncOptions sync;
  CLI::App *syncCommand = app.add_subcommand(
      "sync", "A chain of dependent square gemvs: a dispatch and a barrier each, one persistent dispatch "
              "with grid barriers, a dispatch each ordered by an arrival counter instead of barriers, or the "
              "dispatches with a prefetcher beside them on a second queue");
  syncCommand->add_option("--n", sync.n, "Rows and columns of each phase's f16 matrix");
  syncCommand->add_option("--phases", sync.phases, "Dependent phases a run chains")
      ->check(CLI::Range(1, 100000));
  syncCommand
      ->add_option("--workgroups", sync.workgroups,
                   "Workgroups of every way (the persistent grid must all be resident at once)")
      ->check(CLI::Range(1, 65535));
  syncCommand->add_option("--workgroup-size", sync.workgroupSize, "Invocations a workgroup");
  syncCommand->add_flag("--empty", sync.empty, "No gemv: the cost of the ordering alone");
  syncCommand->add_option(
      "--copies", sync.copies,
      "Weight matrices the phases rotate over (default: up to 256 MiB of them; 1: in L2)");
  syncCommand
      ->add_option("--companion-workgroups", sync.companionWorkgroups,
                   "Workgroups of the prefetcher on the second queue (the companion way)")
      ->check(CLI::Range(1, 65535));
  syncCommand
      ->add_option("--companion-ahead", sync.companionAhead,
                   "The prefetcher loads phase p + this many's weights while phase p runs")
      ->check(CLI::Range(1, 16));
  std::string companionQueue = "same";
  syncCommand
      ->add_option(
          "--companion-queue", companionQueue,
          "The prefetcher's queue: a second one of the main queue's family (same), or one of another "
          "family with compute (other)")
      ->check(CLI::IsMember({"same", "other"}));
  bench::MlpOptions mlp;
  CLI::App *mlpCommand = app.add_subcommand(
      "mlp", "A decode step's MLP (norm, gate/up, down with the residual) as one launch, with float atomics, "
             "chained over phases");
  mlpCommand->add_option("--hidden", mlp.hidden, "Hidden size (a multiple of 8)");
  mlpCommand->add_option("--inter", mlp.inter, "Intermediate size");
  mlpCommand->add_option("--slice", mlp.slice, "Intermediate rows a workgroup")->check(CLI::Range(1, 1024));
  mlpCommand->add_option("--workgroup-size", mlp.workgroupSize, "Invocations a workgroup");
  mlpCommand->add_option("--phases", mlp.phases, "Dependent phases a run chains")
      ->check(CLI::Range(1, 100000));
  mlpCommand->add_option("--copies", mlp.copies,
                         "Weight sets the phases rotate over (default: up to 256 MiB of them; 1: in L2)");
  if (std::optional<int> exitCode = gerbil::cli::parseCommandLine(app, argc, argv, "gerbil-kernel-bench"))
    return *exitCode;
  options.rotateBytes = rotateMib << 20;
  options.packBytes = packMib << 20;
  options.dtype = dtype == "f32" ? plan::DType::F32 : dtype == "bf16" ? plan::DType::BF16 : plan::DType::F16;
  const plan::DType cacheType = kvDtype == "f16" ? plan::DType::F16 : plan::DType::F32;

  try {
    // Only sync's SYNC_BDA variant (and --addressable-memory) allocates for addresses: the other ways and
    // subcommands allocate as plans through descriptors do.
    options.bufferDeviceAddress |=
        syncCommand->parsed() && bench::syncTakesAddresses(bench::parseDefines(options.defines));
    if (syncCommand->parsed())
      options.companionQueue =
          companionQueue == "other" ? vk::CompanionQueue::OtherFamily : vk::CompanionQueue::SameFamily;
    Bench bench(options);
    nlohmann::json out = {{"device", bench.info().name},
                          {"defines", options.defines},
                          {"dtype", dtype},
                          {"weights_in_l2", options.weightsInL2},
                          {"rotate_mib", options.rotateBytes >> 20},
                          {"one_buffer", options.oneBuffer},
                          {"pack_mib", options.packBytes >> 20}};
    if (!options.subgroupOps) out["subgroup_ops"] = false;
    if (options.bufferAddresses) out["buffer_addresses"] = true;
    if (bench.hasBufferDeviceAddresses()) out["addressable_memory"] = true;
    out["dispatch_barrier"] = vk::dispatchBarrierName(bench.context().dispatchBarrierKind());
    out["allocation"] = options.allocation;
    out["queue_family"] = {{"index", bench.context().queueFamily()},
                           {"graphics", bench.context().queueFamilyHasGraphics()}};
    if (mlpCommand->parsed()) {
      mlp.repeats = std::min(options.repeats, 200);
      mlp.defines = bench::parseDefines(options.defines);
      mlp.statistics = options.statistics;
      out.update(bench::runMlpBench(bench.context(), bench.compiler(), mlp));
    } else if (syncCommand->parsed()) {
      sync.repeats = std::min(options.repeats, 200);
      sync.defines = bench::parseDefines(options.defines);
      sync.statistics = options.statistics;
      out.update(bench::runSyncBench(bench.context(), bench.compiler(), sync));
      out["companion_queue"] = companionQueue;
    } else if (matmul->parsed()) {
      const mlir::gerbil::TargetProfile profile = bench.target(target);
      codegen::MatMulSpec spec;
      spec.k = k, spec.n = n, spec.weight = options.dtype, spec.norm = norm, spec.residual = residual,
      spec.eps = 1e-5, spec.halfInput = halfInput;
      spec.variant = profile.cooperativeMatrix ? codegen::MatMulVariant::Coop : codegen::MatMulVariant::Tiled;
      spec.coopTiling = mlir::gerbil::coopTilingFor(profile, n, k);
      if (gateUpMatMul) { // tiled as plans tile it
        spec.mode = codegen::MatMulMode::GateUp;
        spec.coopTiling = mlir::gerbil::groupPrefillTiling(profile, true, k, n);
      }
      if (qkvKvRows > 0) {
        spec.mode = codegen::MatMulMode::QKV;
        spec.nK = spec.nV = qkvKvRows;
        spec.coopTiling = mlir::gerbil::groupPrefillTiling(profile, false, k, n, qkvKvRows, qkvKvRows);
      }
      if (workgroupScope) {
        if (profile.cooperativeMatrixApi != mlir::gerbil::CooperativeMatrixApi::KHR ||
            tokens % spec.coopTiling.tileT != 0)
          throw CLI::ValidationError("--workgroup-scope", "needs a khr or nvidia target and whole tiles");
        if (bench.info().cooperativeMatrixWorkgroupShapes.empty())
          throw std::runtime_error(bench.info().name + " has no workgroup-scope cooperative matrices");
        spec.workgroupScope = true;
      }
      codegen::KernelSource source = codegen::matmulKernel(spec);
      if (profile.cooperativeMatrixApi == mlir::gerbil::CooperativeMatrixApi::KHR)
        codegen::useKhrCooperativeMatrix(source);
      const codegen::SplitKScratch split = codegen::splitKScratch(spec, tokens);
      std::vector<BindingData> data;
      for (const codegen::KernelBinding &b : source.bindings) {
        if (b.name == "counters") {
          data.push_back({std::vector<uint8_t>(split.counterBytes), false, true});
          continue;
        }
        const bool weight = b.name.rfind("w", 0) == 0;
        // Rows of this binding's part: k and v's of a q/k/v projection, else n.
        const int64_t rows =
            b.name == "w_k" || b.name == "w_v" || b.name == "result_k" || b.name == "result_v" ? qkvKvRows
                                                                                               : n;
        size_t elements = b.name == "x"         ? tokens * k
                          : weight              ? rows * k
                          : b.name == "g"       ? k
                          : b.name == "partial" ? split.partialBytes / 4
                                                : tokens * rows;
        const plan::DType type = weight                       ? options.dtype
                                 : b.name == "x" && halfInput ? plan::DType::F16
                                                              : plan::DType::F32;
        data.push_back({randomBytes(elements, type, 7), weight});
      }
      double ms = bench.time(source, data, codegen::matmulGrid(spec, static_cast<uint32_t>(tokens)),
                             static_cast<uint32_t>(tokens));
      const auto &t = spec.coopTiling;
      out.update({{"kernel", "matmul"},
                  {"tokens", tokens},
                  {"n", n},
                  {"k", k},
                  {"target", target},
                  {"tiling", profile.cooperativeMatrix
                                 ? std::to_string(t.tileT) + "x" + std::to_string(t.tileN) + "x" +
                                       std::to_string(t.tileK) + ":" + std::to_string(t.warpsT) + "x" +
                                       std::to_string(t.warpsN) + ":" + std::to_string(t.stages) + ":" +
                                       std::to_string(t.splitK)
                                 : "tiled"},
                  {"gate_up", gateUpMatMul},
                  {"qkv_kv_rows", qkvKvRows},
                  {"half_input", halfInput},
                  {"workgroup_scope", workgroupScope},
                  {"ms", ms},
                  {"tflops", 2.0 * tokens * (gateUpMatMul ? 2 * n : n + 2 * qkvKvRows) * k / (ms * 1e9)}});
    } else if (gemv->parsed()) {
      codegen::GemvSpec spec;
      spec.k = k, spec.n = n, spec.weight = options.dtype, spec.norm = norm, spec.residual = residual,
      spec.eps = 1e-5;
      spec.split = split, spec.workgroup = gemvWorkgroup;
      spec.gateUp = gateUp;
      spec.normWeighted = !normFolded;
      spec.subgroupOps = options.subgroupOps;
      if (gateUp && residual) throw CLI::ValidationError("--gate-up", "has no residual epilogue");
      if (argmax && (residual || split || gemvWorkgroup))
        throw CLI::ValidationError("--argmax", "takes neither --residual, --split nor --workgroup");
      spec.argmax = spec.rowFromPush = argmax;
      spec.maxSequence = 32; // the bench's state buffer holds 64 words
      spec.prefetch = parsePrefetch(prefetch);
      // --qkv: the grouped projection (MODE_QKV) instead, its caches in --kv-dtype.
      codegen::GroupedGemvSpec qkv;
      constexpr int64_t kQkvCachePositions = 1024;
      if (qkvKv > 0) {
        if (!spec.prefetch.empty()) throw CLI::ValidationError("--qkv", "has no prefetch workers");
        qkv.qkv = true, qkv.k = k, qkv.nq = n, qkv.nk = qkv.nv = qkvKv, qkv.weight = options.dtype;
        qkv.norm = norm, qkv.normWeighted = !normFolded, qkv.eps = 1e-5,
        qkv.subgroupOps = options.subgroupOps, qkv.workgroup = gemvWorkgroup;
        qkv.biases = {qkvBias, qkvBias, qkvBias};
        if (qkvHeadDim > 0) {
          if (n % qkvHeadDim != 0 || qkvKv % qkvHeadDim != 0 || qkvHeadDim % 2 != 0)
            throw CLI::ValidationError("--qkv-head-dim", "must be even and divide --n and --qkv");
          constexpr double kLlama3RopeTheta = 500000.0;
          codegen::RotarySpec rotary;
          rotary.headDim = rotary.rotaryDim = qkvHeadDim;
          rotary.invFreq = defaultInvFreq(kLlama3RopeTheta, qkvHeadDim);
          qkv.rope = rotary;
          qkv.cacheHeadDim = qkvHeadDim, qkv.maxSequence = kQkvCachePositions;
          bench.setPosition(191);
        }
      }
      codegen::KernelSource source = qkvKv > 0 ? codegen::groupedGemvKernel(qkv) : codegen::gemvKernel(spec);
      if (qkvKv > 0 && cacheType == plan::DType::F16) codegen::holdCacheInHalf(source);
      const codegen::GemvScratch scratch = codegen::gemvScratch(spec);
      // The elements of a q/k/v binding: q's n rows, k's and v's qkvKv (a cache: kQkvCachePositions of them).
      auto qkvElements = [&](const std::string &name) -> size_t {
        const char part = name.back();
        const int64_t rows = part == 'q' ? n : qkvKv;
        if (name.ends_with("_cache")) return static_cast<size_t>(qkvKv * kQkvCachePositions);
        return static_cast<size_t>(name.starts_with("w_") ? rows * k : rows);
      };
      std::vector<BindingData> data;
      for (const codegen::KernelBinding &b : source.bindings) {
        const bool weight = b.name.rfind("w", 0) == 0;
        if (qkvKv > 0 && b.name != "x" && b.name != "g") {
          const plan::DType type = b.name.ends_with("_cache") ? cacheType
                                   : weight                   ? options.dtype
                                                              : plan::DType::F32;
          data.push_back({randomBytes(qkvElements(b.name), type, 7), weight});
          continue;
        }
        if (b.name == "partial" || b.name == "counters" || b.name == "token" || b.name == "ids") {
          // the argmax's scratch and token: zeroed, as the plan's scratch is (its counters start at 0)
          const uint64_t bytes = b.name == "partial"    ? scratch.partialBytes
                                 : b.name == "counters" ? scratch.counterBytes
                                                        : 4;
          data.push_back({std::vector<uint8_t>(bytes), false, true});
          continue;
        }
        if (b.name.rfind("prefetch", 0) == 0) { // the next launch's weights, not yet in the L2
          const codegen::PrefetchRange &range = spec.prefetch[std::stoul(b.name.substr(8))];
          data.push_back({randomBytes(range.bytes / 2, plan::DType::F16, 11), true});
          continue;
        }
        size_t elements = b.name == "x" || b.name == "g" ? k : weight ? n * k : n;
        data.push_back({randomBytes(elements, weight ? options.dtype : plan::DType::F32, 7), weight});
      }
      double ms =
          bench.time(source, data, qkvKv > 0 ? codegen::groupedGemvGrid(qkv) : codegen::gemvGrid(spec), 1);
      double bytes = (gateUp ? 2.0 * n : double(n + 2 * qkvKv)) * k * plan::byteSize(options.dtype);
      out.update({{"kernel", "gemv"},
                  {"n", n},
                  {"k", k},
                  {"split", split},
                  {"workgroup", source.workgroup[0]},
                  {"gate_up", gateUp},
                  {"argmax", argmax},
                  {"qkv_kv_rows", qkvKv},
                  {"qkv_head_dim", qkvHeadDim},
                  {"qkv_bias", qkvBias},
                  {"prefetch", prefetchJson(spec.prefetch)},
                  {"ms", ms},
                  {"gb_per_s", bytes / (ms * 1e6)}});
    } else if (prefillAttention->parsed()) {
      const mlir::gerbil::TargetProfile profile = bench.target(target);
      const bool coop = profile.cooperativeMatrix;
      if (firstPosition + tokens > sequence)
        throw CLI::ValidationError("--position", "the step's last query lies past --seq");
      codegen::AttentionSpec spec{heads, kvHeads, headDim, sequence, 1.0 / std::sqrt(double(headDim)), 0};
      spec.keySplits = keySplits;
      spec.keyTile = keyTile;
      spec.halfResult = halfResult;
      codegen::KernelSource source = codegen::attentionKernel(spec, coop);
      if (profile.cooperativeMatrixApi == mlir::gerbil::CooperativeMatrixApi::KHR)
        codegen::useKhrCooperativeMatrix(source);
      if (cacheType == plan::DType::F16) codegen::holdCacheInHalf(source);
      const size_t cache = static_cast<size_t>(kvHeads * sequence * headDim);
      const size_t rows = static_cast<size_t>(tokens * heads * headDim);
      std::vector<BindingData> data = {{randomBytes(rows, plan::DType::F32, 1)},
                                       {randomBytes(cache, cacheType, 2), true},
                                       {randomBytes(cache, cacheType, 3), true},
                                       {std::vector<uint8_t>(rows * 4)}};
      if (coop) { // the key splits' scratch, counters zeroed
        const codegen::AttentionScratch scratch = codegen::coopAttentionScratch(spec, tokens);
        data.push_back({std::vector<uint8_t>(scratch.partialBytes)});
        data.push_back({std::vector<uint8_t>(scratch.counterBytes)});
      }
      bench.setPosition(static_cast<uint32_t>(firstPosition));
      double ms = bench.time(source, data, codegen::attentionGrid(spec, static_cast<uint32_t>(tokens), coop),
                             static_cast<uint32_t>(tokens));
      // Causal: query t sees firstPosition + t + 1 keys; a key costs 2 · headDim flops for the score and as
      // many for the value (masked keys are not counted).
      double keys = double(tokens) * double(firstPosition) + double(tokens) * double(tokens + 1) / 2.0;
      out.update({{"kernel", "attention-prefill"},
                  {"heads", heads},
                  {"kv_heads", kvHeads},
                  {"head_dim", headDim},
                  {"tokens", tokens},
                  {"position", firstPosition},
                  {"target", target},
                  {"key_splits", coop ? codegen::attentionGrid(spec, 1, true)[2] : 1u},
                  {"half_result", halfResult},
                  {"key_tile", keyTile},
                  {"kv_dtype", kvDtype},
                  {"ms", ms},
                  {"tflops", 4.0 * keys * double(headDim) * double(heads) / (ms * 1e9)}});
    } else {
      codegen::AttentionSpec spec{heads, kvHeads, headDim, sequence, 1.0 / std::sqrt(double(headDim)), 0};
      spec.halfCache = cacheType == plan::DType::F16; // the model's shape for its cache
      if (decodeChoice.queryHeads > 0 && (heads / kvHeads) % decodeChoice.queryHeads != 0)
        throw std::runtime_error("--query-heads must divide heads / kv-heads (" +
                                 std::to_string(heads / kvHeads) + ")");
      const std::vector<codegen::PrefetchRange> ranges = parsePrefetch(prefetch);
      if (scoreLanes > static_cast<int64_t>(bench.info().minSubgroupSize))
        throw std::runtime_error("--score-lanes " + std::to_string(scoreLanes) +
                                 ": the device's subgroups may hold " +
                                 std::to_string(bench.info().minSubgroupSize) + " lanes");
      // The profile's choice (as gerbilc makes it for that target; the decode attention needs none of its
      // extensions), with what the options give in its place.
      mlir::gerbil::DecodeAttentionChoice choice = bench.target(decodeTarget, false).decodeAttention;
      for (auto [given, slot] : {std::pair{decodeChoice.queryHeads, &choice.queryHeads},
                                 {decodeChoice.warps, &choice.warps},
                                 {decodeChoice.splits, &choice.splits}})
        if (given > 0) *slot = given;
      codegen::DecodeAttentionKernel kernel =
          codegen::decodeAttentionKernel(spec, options.subgroupOps, choice, ranges, scoreLanes);
      if (cacheType == plan::DType::F16) codegen::holdCacheInHalf(kernel.source);
      if (kernel.source.sharedMemoryBytes > bench.info().maxSharedMemoryBytes)
        throw std::runtime_error("the kernel's " + std::to_string(kernel.source.sharedMemoryBytes) +
                                 " bytes of shared memory exceed the device's " +
                                 std::to_string(bench.info().maxSharedMemoryBytes) + " (fewer --warps)");
      const size_t cache = static_cast<size_t>(kvHeads * sequence * headDim);
      std::vector<BindingData> data = {{randomBytes(heads * headDim, plan::DType::F32, 1)},
                                       {randomBytes(cache, cacheType, 2), true},
                                       {randomBytes(cache, cacheType, 3), true},
                                       {std::vector<uint8_t>(heads * headDim * 4)},
                                       {std::vector<uint8_t>(kernel.scratchPartialBytes)},
                                       {std::vector<uint8_t>(kernel.scratchCounterBytes), false, true}};
      for (size_t i = 0; i < ranges.size(); ++i) // weights not yet in the L2, as in a model
        data.push_back(
            {randomBytes(ranges[i].bytes / 2, plan::DType::F16, 4 + static_cast<uint32_t>(i)), true});
      bench.setPosition(static_cast<uint32_t>(position));
      double ms = bench.time(kernel.source, data, kernel.grid, 1);
      double bytes = 2.0 * kvHeads * (position + 1) * headDim * plan::byteSize(cacheType);
      out.update(
          {{"kernel", "attention-decode"},
           {"heads", heads},
           {"kv_heads", kvHeads},
           {"head_dim", headDim},
           {"position", position},
           {"query_heads", kernel.shape.queryHeads}, // a workgroup's: the target's, or --query-heads
           {"warps", kernel.shape.warps},
           {"splits", kernel.shape.splits}, // the most a kv head is cut between: the target's, or --splits
           {"target", decodeTarget},
           {"workgroup_size", kernel.source.workgroup[0]},
           {"workgroups", kernel.grid[0] * kernel.grid[1]},
           {"score_lanes", scoreLanes ? scoreLanes : codegen::decodeScoreLanes(spec, options.subgroupOps)},
           {"prefetch", prefetchJson(ranges)},
           {"kv_dtype", kvDtype},
           {"ms", ms},
           {"gb_per_s", bytes / (ms * 1e6)}});
    }
    // sync and mlp report their own kernels' statistics.
    if (options.statistics && !syncCommand->parsed() && !mlpCommand->parsed())
      out["statistics"] = bench.statistics();
    std::cout << out.dump() << std::endl;
    return 0;
  } catch (const std::exception &e) {
    // Everything but the device is the command line's: a kernel a --define breaks, a target or shape the
    // kernels do not take.
    using gerbil::cli::ErrorTypes;
    return gerbil::cli::reportError("gerbil-kernel-bench", e,
                                    ErrorTypes<std::runtime_error, std::logic_error>{},
                                    ErrorTypes<gerbil::vk::VulkanError>{});
  }
}
