#include "tools/gerbil-exec/LoadedModel.h"

#include "tools/gerbil-exec/Common.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>

namespace gerbil::tool {

std::string weightsFolder(const plan::Plan &plan, const std::string &weightsOption) {
  if (!weightsOption.empty()) return weightsOption;
  return std::filesystem::path(plan.model.configPath).parent_path().string();
}

LoadedModel::LoadedModel(const plan::Plan &plan, const std::string &weightsDir, const Options &options,
                         bool showProgress) {
  weights::Checkpoint checkpoint = weights::Checkpoint::open(weightsDir);
  for (const std::string &name : exec::checkCheckpoint(plan, checkpoint))
    std::cerr << "gerbil-exec: warning: tensor '" << name << "' of the checkpoint is not used by the plan\n";

  vk::ContextOptions contextOptions = exec::contextOptionsFor(plan);
  contextOptions.deviceIndex = options.device;
  contextOptions.validation = options.validation;
  contextOptions.spinWaitMicroseconds = options.spinWaitMicroseconds;
  context_ = std::make_unique<vk::Context>(contextOptions);
  exec::checkDevice(plan, context_->info());
  uint64_t needed = exec::deviceBytesNeeded(plan);
  const vk::DeviceInfo &info = context_->info();
  // --dtype f16 would halve the matrices (norms and biases stay f32 either way).
  const bool f32Matrices = std::any_of(plan.weights.begin(), plan.weights.end(), [](const plan::Weight &w) {
    return w.shape.size() == 2 && w.deviceDType == plan::DType::F32;
  });
  if (info.deviceLocalBytes && needed > info.deviceLocalBytes)
    throw exec::RuntimeError(
        "the model needs " + std::to_string(needed >> 20) + " MiB of device memory; " + info.name + " has " +
        std::to_string(info.deviceLocalBytes >> 20) + " MiB. Of it the KV cache takes " +
        std::to_string(plan.kvCache.bytes >> 20) + " MiB (" + plan::toString(plan.kvCache.dtype) + ", " +
        std::to_string(plan.limits.maxSequence) + " positions): recompile with a smaller --max-seq" +
        (plan.kvCache.dtype == plan::DType::F32 ? " or --kv-dtype f16" : "") +
        (f32Matrices ? ", or --dtype f16" : ""));
  auto loadStart = Clock::now();
  exec::LoadedWeights weights = exec::uploadWeights(
      *context_, plan, checkpoint,
      [&](uint64_t done, uint64_t total) {
        if (showProgress)
          std::fprintf(stderr, "\rloading weights %5.1f%% (%.1f / %.1f MiB)",
                       100.0 * done / std::max<uint64_t>(total, 1), done / 1048576.0, total / 1048576.0);
      },
      options.weightBlockMiB << 20);
  if (showProgress) std::fprintf(stderr, "\n");
  loadMs_ = msSince(loadStart);
  executor_ = std::make_unique<exec::Executor>(*context_, plan, std::move(weights));
}

} // namespace gerbil::tool
