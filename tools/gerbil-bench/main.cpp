// gerbil-bench: prefill and decode speed of a plan on a Vulkan device, and per-kernel GPU times.
//   prefill: a --prefill-tokens prompt (default 512) in steps of the plan's prefill chunk, as generation runs
//            it, after --prefill-depth tokens already in the cache (default 0; llama-bench's -d)
//   decode:  --decode-tokens greedy tokens (default 128) after a --prompt-tokens prompt (default 128)
// Weights are read like gerbil-exec does; random ones (gerbil-random-weights) measure the same speed.
#include "runtime/exec/Executor.h"
#include "runtime/exec/Generation.h"
#include "runtime/plan/Plan.h"
#include "runtime/support/Clock.h"
#include "runtime/vulkan/Device.h"
#include "runtime/weights/Safetensors.h"
#include "tools/CliHelpers.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>

namespace {

using gerbil::support::Clock;
using gerbil::support::msSince;

std::vector<int32_t> promptOf(size_t n, int64_t vocab) {
  std::vector<int32_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((i * 7919 + 13) % static_cast<size_t>(vocab));
  return ids;
}

// Kernel family of a dispatch label: "layers.3.attn.q_proj" -> "attn.q_proj".
std::string family(const std::string &label) {
  if (label.rfind("layers.", 0) == 0) {
    size_t dot = label.find('.', 7);
    if (dot != std::string::npos) return label.substr(dot + 1);
  }
  return label;
}

// A profiled step's GPU time by kernel family, with the weight bytes its launches bind and the rate at which
// they read them (what a decode gemv is held to). The rate only where every launch is a projection (a
// linear or matmul kernel) that reads no token ids: the others read part of what they bind (the embedding
// its token's row, the attention's prefetch workers the next launch's first bytes).
nlohmann::json profile(gerbil::exec::Executor &executor, const gerbil::plan::Plan &plan,
                       const std::vector<gerbil::plan::Dispatch> &schedule, const std::vector<int32_t> &tokens) {
  executor.setProfiling(true);
  executor.step(tokens, gerbil::exec::Logits::None);
  executor.setProfiling(false);
  struct Family {
    double ms = 0;
    int dispatches = 0;
    uint64_t weightBytes = 0;
    bool readsPart = false; // a launch reads only part of the weights it binds
  };
  std::map<std::string, Family> byFamily;
  const auto &ms = executor.lastDispatchMs();
  for (size_t i = 0; i < ms.size() && i < schedule.size(); ++i) {
    Family &entry = byFamily[family(schedule[i].label)];
    entry.ms += ms[i];
    entry.dispatches += 1;
    const std::string &kernel = plan.kernels.at(schedule[i].kernel).name;
    entry.readsPart |= !kernel.starts_with("linear") && !kernel.starts_with("matmul");
    std::set<uint32_t> weights; // each bound weight once, however many bindings name it
    for (const gerbil::plan::Binding &b : schedule[i].bindings) {
      if (b.kind == gerbil::plan::BufferKind::Weight && weights.insert(b.weight).second)
        entry.weightBytes += plan.weights.at(b.weight).bytes();
      entry.readsPart |= b.kind == gerbil::plan::BufferKind::Input; // a gather by token id
    }
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const auto &[name, f] : byFamily) {
    nlohmann::json row = {
        {"kernel", name}, {"ms", f.ms}, {"dispatches", f.dispatches}, {"weight_bytes", f.weightBytes}};
    if (f.weightBytes > 0 && f.ms > 0 && !f.readsPart)
      row["weight_gb_per_s"] = double(f.weightBytes) / (f.ms * 1e6);
    rows.push_back(std::move(row));
  }
  std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) { return a["ms"] > b["ms"]; });
  return rows;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"gerbil-bench: prefill and decode speed of a gerbil plan on a Vulkan device."};
  std::string planPath, weightsDir;
  size_t prefillTokens = 512, prefillDepth = 0, promptTokens = 128, decodeTokens = 128;
  int repeats = 5, device = -1;
  uint32_t prefillSubmit = gerbil::exec::Executor::kDefaultPrefillSubmitDispatches,
           prefillFirstPart = gerbil::exec::Executor::kDefaultPrefillFirstPart;
  std::optional<uint32_t> spinWait;
  double warmUpMs = 1000;
  bool json = false, withProfile = false;
  app.add_option("plan", planPath, "The plan")->required();
  app.add_option("--weights", weightsDir, "Checkpoint folder (default: the compiled config's folder)");
  app.add_option("--prefill-tokens", prefillTokens,
                 "Prompt length of the prefill measurement (run in steps of the plan's prefill chunk)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--prefill-depth", prefillDepth,
                 "Tokens already in the KV cache before the measured prefill (its prompt starts there)")
      ->capture_default_str();
  app.add_option("--prompt-tokens", promptTokens, "Prompt length before the decode measurement");
  app.add_option("--decode-tokens", decodeTokens, "Tokens decoded in the decode measurement");
  app.add_option("--repeats", repeats, "Runs of each measurement (the best is reported)");
  app.add_option("--warm-up-ms", warmUpMs, "Prefill steps run for this long before measuring");
  app.add_option("--device", device, "Vulkan device index");
  app.add_option("--prefill-submit", prefillSubmit,
                 "Submit a prefill step in parts of this many dispatches (0: one submission)")
      ->capture_default_str();
  app.add_option("--prefill-first-part", prefillFirstPart,
                 "Dispatches in the first part of a prefill step (0: as many as the others)")
      ->capture_default_str();
  gerbil::cli::addSpinWaitOption(app, spinWait, gerbil::vk::kDefaultSpinWaitMicroseconds);
  uint64_t weightBlockMiB = 0;
  gerbil::cli::addWeightBlockOption(app, weightBlockMiB, gerbil::exec::kDefaultWeightBlockBytes >> 20);
  std::string allocation = gerbil::vk::memoryAllocationName(gerbil::vk::ContextOptions{}.allocation);
  app.add_option(
         "--allocation", allocation,
         "Developers: how buffers get their device memory (dedicated: an allocation of its own for each "
         "weight matrix and large buffer; plain: shared blocks as the weight block size allows; "
         "exportable, priority: other ways a driver may map differently)")
      ->check(CLI::IsMember(gerbil::vk::memoryAllocationNames()))
      ->capture_default_str();
  std::string queueFamily = gerbil::vk::mainQueueFamilyName(gerbil::vk::ContextOptions{}.mainQueueFamily);
  app.add_option(
         "--queue-family", queueFamily,
         "Developers: the queue family the model runs on (first: the first with compute and timestamps; "
         "compute-only: one without graphics, where the device has it)")
      ->check(CLI::IsMember(gerbil::vk::mainQueueFamilyNames()))
      ->capture_default_str();
  std::string dispatchBarrier = gerbil::vk::dispatchBarrierName(gerbil::vk::ContextOptions{}.dispatchBarrier);
  app.add_option("--dispatch-barrier", dispatchBarrier,
                 "Developers: the barrier between a step's dispatches (full: compute and transfers; compute: "
                 "compute shaders only; storage: their storage buffers only, through synchronization2)")
      ->check(CLI::IsMember(gerbil::vk::dispatchBarrierNames()))
      ->capture_default_str();
  uint32_t greedyInFlight = gerbil::exec::GenerationOptions{}.greedyBatchesInFlight;
  app.add_option("--greedy-in-flight", greedyInFlight,
                 "Developers: greedy decode batches submitted before the host reads the last (1: none ahead)")
      ->check(CLI::Range(1u, gerbil::vk::Context::kRecordedInFlight))
      ->capture_default_str();
  gerbil::exec::SamplingOptions sampling;
  app.add_option(
         "--temperature", sampling.temperature,
         "Decode sampling at this temperature instead of greedy (0): on the GPU in batches where the plan "
         "has a sampler, else (or with --host-sampling) a step, a logits read and a host draw a token")
      ->check(gerbil::cli::number(0, false))
      ->capture_default_str();
  app.add_option("--top-k", sampling.topK, "With --temperature: sample among the k most likely (0: all)")
      ->check(gerbil::cli::number(0, false));
  app.add_option("--top-p", sampling.topP, "With --temperature: sample within cumulative probability p")
      ->check(gerbil::cli::number(0, false, 1));
  bool hostSampling = false;
  app.add_flag("--host-sampling", hostSampling,
               "With --temperature: draw on the host from each step's logits, not with the GPU sampler");
  app.add_flag("--profile", withProfile, "Also report per-kernel GPU times (timestamp queries)");
  app.add_flag("--json", json, "Print one JSON object");
  if (std::optional<int> exitCode = gerbil::cli::parseCommandLine(app, argc, argv, "gerbil-bench"))
    return *exitCode;

  try {
    gerbil::plan::Plan plan = gerbil::plan::readFile(planPath);
    if (weightsDir.empty()) weightsDir = std::filesystem::path(plan.model.configPath).parent_path().string();
    auto checkpoint = gerbil::weights::Checkpoint::open(weightsDir);
    gerbil::exec::checkCheckpoint(plan, checkpoint);
    gerbil::vk::ContextOptions options = gerbil::exec::contextOptionsFor(plan);
    options.deviceIndex = device;
    options.spinWaitMicroseconds = spinWait;
    options.allocation = *gerbil::vk::parseMemoryAllocation(allocation);
    options.mainQueueFamily = *gerbil::vk::parseMainQueueFamily(queueFamily);
    options.dispatchBarrier = *gerbil::vk::parseDispatchBarrier(dispatchBarrier);
    gerbil::vk::Context context(options);
    gerbil::exec::checkDevice(plan, context.info());
    auto loadStart = Clock::now();
    auto weights = gerbil::exec::uploadWeights(context, plan, checkpoint, {}, weightBlockMiB << 20);
    double loadMs = msSince(loadStart), loadConvertMs = weights.convertMs, loadUploadMs = weights.uploadMs;
    uint64_t weightBytes = weights.bytes;
    gerbil::exec::Executor executor(context, plan, std::move(weights));
    executor.setPrefillSubmitDispatches(prefillSubmit, prefillFirstPart);
    const int64_t vocab = plan.model.vocabSize;
    const size_t chunk = plan.limits.prefillChunk, maxSequence = static_cast<size_t>(plan.limits.maxSequence);
    // The default prompt fits the plan (one compiled with a short --max-seq still measures); one asked for
    // must fit as asked.
    if (app.count("--prefill-tokens") == 0 && prefillDepth < maxSequence)
      prefillTokens = std::min(prefillTokens, maxSequence - prefillDepth);
    for (auto [name, tokens] :
         {std::pair<const char *, size_t>{"--prefill-depth + --prefill-tokens", prefillDepth + prefillTokens},
          {"--prompt-tokens + --decode-tokens", promptTokens + decodeTokens}})
      if (tokens > maxSequence)
        throw CLI::ValidationError(name, std::to_string(tokens) + " positions, more than the " +
                                             std::to_string(maxSequence) + " of " + planPath +
                                             " (gerbilc --max-seq)");

    // Prefill: the best of `repeats` prompts, each in steps of the prefill chunk after `prefillDepth` tokens
    // put into the cache untimed, after a second of warm-up (a GPU that has been idle runs its first tens of
    // milliseconds at low clocks: a cold first model measured 3x slow).
    const std::vector<int32_t> depthPrompt = promptOf(prefillDepth, vocab);
    const std::vector<int32_t> prefillPrompt = promptOf(prefillTokens, vocab);
    const std::vector<int32_t> firstStep(prefillPrompt.begin(),
                                         prefillPrompt.begin() + std::min(prefillTokens, chunk));
    auto startAtDepth = [&] {
      executor.reset();
      if (!depthPrompt.empty()) executor.prefill(depthPrompt, gerbil::exec::Logits::None);
    };
    for (auto warmStart = Clock::now(); msSince(warmStart) < warmUpMs;) {
      executor.reset();
      executor.step(firstStep, gerbil::exec::Logits::None);
    }
    double prefillMs = 1e30, prefillGpuMs = 1e30, prefillRecordMs = 1e30;
    for (int r = 0; r <= repeats; ++r) {
      startAtDepth();
      double gpuMs = 0, recordMs = 0;
      auto start = Clock::now();
      executor.prefill(prefillPrompt, gerbil::exec::Logits::None, [&] {
        gpuMs += executor.lastStepGpuMs();
        recordMs += executor.lastStepRecordMs();
      });
      double ms = msSince(start);
      if (r > 0) {
        prefillMs = std::min(prefillMs, ms);
        prefillGpuMs = std::min(prefillGpuMs, gpuMs);
        prefillRecordMs = std::min(prefillRecordMs, recordMs);
      }
    }

    // Decode: greedy tokens after a prompt through the generation loop users run (GPU argmax and replayed
    // command buffers where the plan has them); wall-clock time per token, host waits included.
    std::vector<int32_t> prompt = promptOf(promptTokens, vocab);
    double decodeMs = 1e30;
    for (int r = 0; r <= std::max(1, repeats - 1); ++r) {
      executor.reset();
      gerbil::exec::GenerationOptions generation;
      generation.maxNewTokens = static_cast<int64_t>(decodeTokens) + 1;  // the first comes from the prefill
      generation.greedyBatchesInFlight = greedyInFlight;
      generation.sampling = sampling;
      generation.sampling.onHost = hostSampling;
      gerbil::exec::GenerationResult out = gerbil::exec::generate(executor, prompt, generation);
      if (r > 0) decodeMs = std::min(decodeMs, out.decodeMs);
    }
    double msPerToken = decodeMs / decodeTokens;
    nlohmann::json result = {{"plan", planPath},
                             {"device", context.info().name},
                             {"driver", context.info().driver},
                             {"architecture", plan.model.architecture},
                             {"weight_bytes", weightBytes},
                             {"load_ms", loadMs},
                             {"load_convert_ms", loadConvertMs},
                             {"load_upload_ms", loadUploadMs},
                             {"dispatches_per_decode_token", plan.decode.size()},
                             {"prefill",
                              {{"tokens", prefillTokens},
                               {"depth", prefillDepth},
                               {"steps", (prefillTokens + chunk - 1) / chunk},
                               {"ms", prefillMs},
                               {"gpu_ms", prefillGpuMs},
                               {"record_ms", prefillRecordMs},
                               {"tokens_per_s", prefillTokens / (prefillMs / 1000)}}},
                             {"decode",
                              {{"prompt_tokens", promptTokens},
                               {"tokens", decodeTokens},
                               {"ms_per_token", msPerToken},
                               {"tokens_per_s", 1000.0 / msPerToken},
                               {"weight_gb_per_s", weightBytes / (msPerToken / 1000) / 1e9}}}};
    result["allocation"] = allocation;
    result["dispatch_barrier"] = gerbil::vk::dispatchBarrierName(context.dispatchBarrierKind());
    result["queue_family"] = {{"index", context.queueFamily()},
                              {"graphics", context.queueFamilyHasGraphics()}};
    result["greedy_batches_in_flight"] = greedyInFlight;
    // Which loop the decode figures are of: the GPU's greedy or sampled batches, or a step and a host draw
    // a token.
    result["decode"]["loop"] = sampling.plainArgmax() && plan.gpuArgmax ? "gpu-greedy"
                               : !hostSampling && !plan.sampler.empty() ? "gpu-sampling"
                                                                        : "host-sampling";
    if (!sampling.plainArgmax())
      result["decode"]["sampling"] = {
          {"temperature", sampling.temperature}, {"top_k", sampling.topK}, {"top_p", sampling.topP}};
    if (weightBlockMiB != gerbil::exec::kDefaultWeightBlockBytes >> 20)
      result["weight_block_mib"] = weightBlockMiB;
    if (withProfile) {
      // A prefill step's profile: the measured prompt's first step, at its depth.
      startAtDepth();
      result["profile_prefill"] = profile(executor, plan, plan.prefill, firstStep);
      executor.reset();
      executor.prefill(prompt, gerbil::exec::Logits::None);
      result["profile_decode"] = profile(executor, plan, plan.decode, {1});
    }
    if (json) {
      std::cout << result.dump(1) << "\n";
    } else {
      std::printf("%s on %s\n", plan.model.architecture.c_str(), context.info().name.c_str());
      std::printf("weights: %.2f GB loaded in %.0f ms (%.0f converting, %.0f copying to the device)\n",
                  weightBytes / 1e9, loadMs, loadConvertMs, loadUploadMs);
      std::printf("prefill %zu tokens%s: %.2f ms (%.0f tokens/s)\n", prefillTokens,
                  prefillDepth ? (" after " + std::to_string(prefillDepth)).c_str() : "", prefillMs,
                  prefillTokens / (prefillMs / 1000));
      std::printf("decode %zu tokens after %zu (%s): %.3f ms/token, %.1f tokens/s, %.0f GB/s of weights\n",
                  decodeTokens, promptTokens, result["decode"]["loop"].get<std::string>().c_str(), msPerToken,
                  1000.0 / msPerToken, weightBytes / (msPerToken / 1000) / 1e9);
      if (withProfile)
        for (const char *key : {"profile_decode", "profile_prefill"}) {
          std::printf("%s:\n", key);
          for (const auto &row : result[key]) {
            const int dispatches = row["dispatches"].get<int>();
            std::printf("  %-28s %8.3f ms  (%d dispatch%s", row["kernel"].get<std::string>().c_str(),
                        row["ms"].get<double>(), dispatches, dispatches == 1 ? "" : "es");
            if (row.contains("weight_gb_per_s"))
              std::printf(", %.2f MB of weights at %.1f GB/s", row["weight_bytes"].get<double>() / 1e6,
                          row["weight_gb_per_s"].get<double>());
            std::printf(")\n");
          }
        }
    }
    return 0;
  } catch (const std::exception &e) {
    using gerbil::cli::ErrorTypes;
    return gerbil::cli::reportError(
        "gerbil-bench", e,
        ErrorTypes<gerbil::plan::PlanError, gerbil::weights::WeightError, gerbil::exec::RuntimeError>{},
        ErrorTypes<gerbil::vk::VulkanError>{});
  }
}
