// Runs a plan on a device: owns the activation arena, the KV cache and the pipelines, and executes
// prefill and decode steps. A step uploads its token ids, records every dispatch of the schedule with a
// barrier between them, submits once and reads back the logits it is asked for.
#pragma once

#include "runtime/exec/WeightLoader.h"

#include <cstdint>
#include <vector>

namespace gerbil::exec {

// The device features a plan needs, checked before anything is allocated; throws RuntimeError naming the
// missing feature.
void checkDevice(const plan::Plan &plan, const vk::DeviceInfo &device);

// Bytes of device memory a plan needs with its weights.
uint64_t deviceBytesNeeded(const plan::Plan &plan);

class Executor {
public:
  Executor(vk::Context &context, const plan::Plan &plan, LoadedWeights weights);

  // Processes `tokens` at positions [position(), position() + tokens.size()). Returns the logits of every
  // token when allRows, else of the last one only: rows × vocab floats. Throws RuntimeError.
  std::vector<float> step(const std::vector<int32_t> &tokens, bool allRows);

  const plan::Plan &plan() const { return plan_; }
  uint32_t position() const { return position_; }
  void reset() { position_ = 0; }
  double lastStepGpuMs() const { return lastStepGpuMs_; }

private:
  struct PreparedDispatch {
    uint32_t kernel;
    VkDescriptorSet set;
    std::array<plan::GridDim, 3> grid;
  };
  std::vector<PreparedDispatch> prepare(const std::vector<plan::Dispatch> &schedule);
  vk::BufferRange range(const plan::Binding &binding) const;

  vk::Context &context_;
  const plan::Plan &plan_;
  LoadedWeights weights_;
  vk::Buffer arena_, kvCache_, input_;
  std::vector<vk::Pipeline> pipelines_;
  std::vector<PreparedDispatch> prefill_, decode_;
  uint32_t position_ = 0;
  double lastStepGpuMs_ = 0;
};

} // namespace gerbil::exec
