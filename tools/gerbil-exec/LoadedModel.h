// A plan on a Vulkan device with its weights uploaded: the executor every mode generates with.
#pragma once

#include "runtime/exec/Executor.h"
#include "tools/gerbil-exec/Options.h"

#include <memory>
#include <string>

namespace gerbil::tool {

class LoadedModel {
public:
  // Opens the checkpoint in `weightsDir` and checks it against the plan (warning about unused tensors),
  // creates the device context, checks the device and its memory and uploads the weights, showing progress on
  // a terminal. Throws WeightError, RuntimeError or VulkanError.
  // The device is options' --device, with --validation and --spin-wait.
  LoadedModel(const plan::Plan &plan, const std::string &weightsDir, const Options &options,
              bool showProgress);

  exec::Executor &executor() { return *executor_; }
  const vk::DeviceInfo &device() const { return context_->info(); }
  double loadMs() const { return loadMs_; }

private:
  std::unique_ptr<vk::Context> context_;
  std::unique_ptr<exec::Executor> executor_;
  double loadMs_ = 0;
};

// --weights, or the folder of the config.json the plan was compiled from.
std::string weightsFolder(const plan::Plan &plan, const std::string &weightsOption);

} // namespace gerbil::tool
