#include "runtime/exec/Executor.h"

#include <string>

namespace gerbil::exec {

void checkDevice(const plan::Plan &plan, const vk::DeviceInfo &device) {
  const plan::Requirements &r = plan.requires_;
  if (r.maxStorageBufferRange > device.maxStorageBufferRange)
    throw RuntimeError("the plan binds " + std::to_string(r.maxStorageBufferRange) +
                       " bytes at once but " + device.name + " allows at most " +
                       std::to_string(device.maxStorageBufferRange) +
                       " (maxStorageBufferRange); compile with a smaller --prefill-chunk or --max-seq");
  if (r.shaderFloat16 && !device.shaderFloat16)
    throw RuntimeError("the plan needs shaderFloat16, which " + device.name + " lacks");
  if (r.storageBuffer16BitAccess && !device.storageBuffer16BitAccess)
    throw RuntimeError("the plan needs storageBuffer16BitAccess, which " + device.name + " lacks");
  if (r.maxSharedMemoryBytes > device.maxSharedMemoryBytes)
    throw RuntimeError("the plan's kernels need " + std::to_string(r.maxSharedMemoryBytes) +
                       " bytes of shared memory; " + device.name + " has " +
                       std::to_string(device.maxSharedMemoryBytes));
  for (const plan::Dispatch &d : plan.prefill)
    for (int i = 0; i < 3; ++i)
      if (d.grid[i].evaluate(plan.limits.prefillChunk) > device.maxWorkgroupCount[i])
        throw RuntimeError("dispatch '" + d.label + "' needs more workgroups than " + device.name +
                           " allows (maxComputeWorkGroupCount); compile with a smaller --prefill-chunk");
}

uint64_t deviceBytesNeeded(const plan::Plan &plan) {
  uint64_t bytes = plan.arenaBytes + plan.kvCache.bytes + plan.inputBytes;
  for (const plan::Weight &w : plan.weights) bytes += w.bytes();
  return bytes;
}

Executor::Executor(vk::Context &context, const plan::Plan &plan, LoadedWeights weights)
    : context_(context), plan_(plan), weights_(std::move(weights)) {
  if (weights_.buffers.size() != plan.weights.size())
    throw RuntimeError("the loaded weights do not belong to this plan");
  arena_ = context.createBuffer(plan.arenaBytes, "activation arena");
  kvCache_ = context.createBuffer(plan.kvCache.bytes, "KV cache");
  input_ = context.createBuffer(plan.inputBytes, "token ids");
  context.fill(kvCache_, 0);
  for (const plan::Kernel &k : plan.kernels)
    pipelines_.push_back(context.createPipeline(k.spirv, k.numBindings, plan::kPushConstantBytes, k.name));
  prefill_ = prepare(plan.prefill);
  decode_ = prepare(plan.decode);
}

vk::BufferRange Executor::range(const plan::Binding &b) const {
  switch (b.kind) {
  case plan::BufferKind::Weight: return {weights_.buffers[b.weight].handle(), 0, weights_.buffers[b.weight].size()};
  case plan::BufferKind::Arena: return {arena_.handle(), b.offset, b.size};
  case plan::BufferKind::KVCache: return {kvCache_.handle(), b.offset, b.size};
  case plan::BufferKind::Input: return {input_.handle(), b.offset, b.size};
  }
  throw RuntimeError("unknown buffer kind in the plan");
}

std::vector<Executor::PreparedDispatch> Executor::prepare(const std::vector<plan::Dispatch> &schedule) {
  std::vector<PreparedDispatch> prepared;
  for (const plan::Dispatch &d : schedule) {
    std::vector<vk::BufferRange> ranges;
    for (const plan::Binding &b : d.bindings) ranges.push_back(range(b));
    prepared.push_back({d.kernel, context_.createDescriptorSet(pipelines_[d.kernel], ranges), d.grid});
  }
  return prepared;
}

std::vector<float> Executor::step(const std::vector<int32_t> &tokens, bool allRows) {
  const uint32_t count = static_cast<uint32_t>(tokens.size());
  if (count == 0) throw RuntimeError("a step needs at least one token");
  if (count > plan_.limits.prefillChunk)
    throw RuntimeError("a step of " + std::to_string(count) + " tokens exceeds the plan's prefill chunk of " +
                       std::to_string(plan_.limits.prefillChunk));
  if (position_ + count > plan_.limits.maxSequence)
    throw RuntimeError("position " + std::to_string(position_ + count) + " exceeds the plan's --max-seq " +
                       std::to_string(plan_.limits.maxSequence) + ": recompile with a larger --max-seq");
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= plan_.model.vocabSize)
      throw RuntimeError("token id " + std::to_string(tokens[i]) + " is outside the vocabulary of " +
                         std::to_string(plan_.model.vocabSize));
  context_.upload(input_, 0, tokens.data(), count * sizeof(int32_t));

  const auto &schedule = count == 1 ? decode_ : prefill_;
  const uint32_t push[2] = {count, position_};
  VkCommandBuffer cmd = context_.beginCommands();
  bool timed = context_.info().timestamps;
  if (timed) {
    context_.resetTimestamps(cmd, 2);
    context_.writeTimestamp(cmd, 0);
  }
  context_.computeBarrier(cmd);  // the token upload happened in an earlier submission
  for (const PreparedDispatch &d : schedule) {
    context_.dispatch(cmd, pipelines_[d.kernel], d.set, push, sizeof push, d.grid[0].evaluate(count),
                      d.grid[1].evaluate(count), d.grid[2].evaluate(count));
    context_.computeBarrier(cmd);
  }
  if (timed) context_.writeTimestamp(cmd, 1);
  context_.submitAndWait(cmd);
  if (timed) {
    std::vector<uint64_t> ns = context_.readTimestamps(2);
    lastStepGpuMs_ = static_cast<double>(ns[1] - ns[0]) / 1e6;
  }
  position_ += count;

  const uint64_t vocab = static_cast<uint64_t>(plan_.model.vocabSize);
  const uint32_t firstRow = allRows ? 0 : count - 1;
  std::vector<float> logits((count - firstRow) * vocab);
  context_.download(arena_, plan_.logits.offset + firstRow * vocab * sizeof(float), logits.data(),
                    logits.size() * sizeof(float));
  return logits;
}

} // namespace gerbil::exec
