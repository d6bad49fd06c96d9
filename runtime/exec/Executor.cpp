#include "runtime/exec/Executor.h"

#include "runtime/exec/SamplingWords.h"

#include "runtime/support/Clock.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

namespace gerbil::exec {

namespace {

// Every dispatch of `schedule` at `tokens` within the device's maxComputeWorkGroupCount; `what` names such a
// dispatch and `wayOut` says how to compile a plan that fits.
void checkGrids(const std::vector<plan::Dispatch> &schedule, uint32_t tokens, const vk::DeviceInfo &device,
                const std::string &what, const std::string &wayOut) {
  for (const plan::Dispatch &d : schedule)
    for (int i = 0; i < 3; ++i)
      if (uint32_t count = d.grid[i].evaluate(tokens); count > device.maxWorkgroupCount[i])
        throw RuntimeError(what + " '" + d.label + "' needs " + std::to_string(count) + " workgroups along " +
                           "xyz"[i] + ", more than " + device.name + " allows (maxComputeWorkGroupCount); " +
                           wayOut);
}

} // namespace

// What to compile instead for a device that lacks what a target's kernels need: the NV way where an nvidia
// plan's KHR matrices are missing but the driver has the NV extension, else the kernels that run anywhere.
std::string otherTarget(const plan::Plan &plan, const vk::DeviceInfo &device) {
  const std::string where = "compiled for --target " + plan.target + "; ";
  if (plan.target.rfind("nvidia", 0) == 0 && plan.target.rfind("nvidia-nv", 0) != 0 &&
      device.hasExtension("VK_NV_cooperative_matrix") && device.vulkanMemoryModel &&
      device.subgroupSize == 32)
    return where + "compile with --target nvidia-nv, the same kernels through VK_NV_cooperative_matrix, or "
                   "--target generic";
  return where + "compile with --target generic";
}

void checkDevice(const plan::Plan &plan, const vk::DeviceInfo &device) {
  const plan::Requirements &r = plan.requires_;
  if (r.maxStorageBufferRange > device.maxStorageBufferRange)
    throw RuntimeError(
        "the plan binds " + std::to_string(r.maxStorageBufferRange) + " bytes at once but " + device.name +
        " allows at most " + std::to_string(device.maxStorageBufferRange) +
        " (maxStorageBufferRange); compile with --buffer-addresses (kernels that reach buffers by address "
        "bind none), or a smaller --prefill-chunk or --max-seq where it is an activation or the cache");
  if (r.shaderFloat16 && !device.shaderFloat16)
    throw RuntimeError("the plan needs shaderFloat16, which " + device.name + " lacks");
  if (r.storageBuffer16BitAccess && !device.storageBuffer16BitAccess)
    throw RuntimeError("the plan needs storageBuffer16BitAccess, which " + device.name + " lacks");
  for (const std::string &extension : r.deviceExtensions)
    if (!device.hasExtension(extension))
      throw RuntimeError("the plan needs the Vulkan extension " + extension + ", which " + device.name +
                         " lacks (" + otherTarget(plan, device) + ")");
  for (const std::string &shape : r.cooperativeMatrixShapes)
    if (std::find(device.cooperativeMatrixKHRShapes.begin(), device.cooperativeMatrixKHRShapes.end(),
                  shape) == device.cooperativeMatrixKHRShapes.end())
      throw RuntimeError("the plan's kernels multiply cooperative matrices of " + shape + ", which " +
                         device.name + " does not list for VK_KHR_cooperative_matrix (" +
                         otherTarget(plan, device) + ")");
  if (r.vulkanMemoryModel && !device.vulkanMemoryModel)
    throw RuntimeError("the plan needs vulkanMemoryModel, which " + device.name +
                       " lacks (compiled for --target " + plan.target + "; compile with --target generic)");
  if (r.subgroupSize && r.subgroupSize != device.subgroupSize)
    throw RuntimeError("the plan's kernels assume subgroups of " + std::to_string(r.subgroupSize) +
                       " invocations; " + device.name + " has " + std::to_string(device.subgroupSize) +
                       " (compiled for --target " + plan.target + "; compile with --target generic)");
  if (r.maxSharedMemoryBytes > device.maxSharedMemoryBytes)
    throw RuntimeError("the plan's kernels need " + std::to_string(r.maxSharedMemoryBytes) +
                       " bytes of shared memory; " + device.name + " has " +
                       std::to_string(device.maxSharedMemoryBytes));
  if (r.subgroupArithmetic && !device.subgroupArithmetic)
    throw RuntimeError("the plan's kernels use subgroup arithmetic and shuffles in compute shaders, which " +
                       device.name + " lacks; compile with gerbilc --no-subgroup-ops");
  if (r.bufferDeviceAddress && !device.bufferDeviceAddress)
    throw RuntimeError(
        "the plan's kernels reach their buffers by address (gerbilc --buffer-addresses), which "
        "needs bufferDeviceAddress; " +
        device.name + " lacks it (or the context was made without it): compile without --buffer-addresses");
  if (r.pushConstantBytes > device.maxPushConstantsBytes)
    throw RuntimeError("the plan's kernels take " + std::to_string(r.pushConstantBytes) +
                       " bytes of push constants; " + device.name + " allows " +
                       std::to_string(device.maxPushConstantsBytes) +
                       " (maxPushConstantsSize): compile without --buffer-addresses");
  if (r.subgroupArithmetic && device.minSubgroupSize < r.minSubgroupSize)
    throw RuntimeError("the plan's kernels need subgroups of at least " + std::to_string(r.minSubgroupSize) +
                       " invocations; " + device.name + " may use " + std::to_string(device.minSubgroupSize) +
                       "; compile with gerbilc --no-subgroup-ops");
  // Prefill grids at the plan's chunk; decode grids are fixed, but a decode attention's grows with the
  // weights it prefetches.
  checkGrids(plan.prefill, plan.limits.prefillChunk, device, "dispatch",
             "compile with a smaller --prefill-chunk");
  checkGrids(plan.decode, 1, device, "decode dispatch",
             "a decode attention's grid grows with gerbilc --prefetch-bytes and --prefetch-page-bytes");
}

vk::ContextOptions contextOptionsFor(const plan::Plan &plan) {
  vk::ContextOptions options;
  options.extensions = plan.requires_.deviceExtensions;
  options.bufferDeviceAddress = plan.requires_.bufferDeviceAddress;
  return options;
}

uint64_t deviceBytesNeeded(const plan::Plan &plan) {
  uint64_t bytes =
      plan.arenaBytes + plan.kvCache.bytes + plan.inputBytes + plan.stateBytes + plan.scratchBytes;
  for (const plan::Weight &w : plan.weights) bytes += w.bytes();
  return bytes;
}

Executor::Executor(vk::Context &context, const plan::Plan &plan, LoadedWeights weights)
    : context_(context), plan_(plan), weights_(std::move(weights)) {
  if (weights_.buffers.size() != plan.weights.size())
    throw RuntimeError("the loaded weights do not belong to this plan");
  arena_ = context.createBuffer(plan.arenaBytes, "activation arena");
  kvCache_ = context.createBuffer(plan.kvCache.bytes, "KV cache");
  // Written by the host before every step: host-visible, so no staging copy (and no extra submit) is needed.
  input_ = context.createBuffer(plan.inputBytes, "token ids", true);
  state_ = context.createBuffer(std::max<uint64_t>(plan.stateBytes, 16), "step state", true);
  context.fill(kvCache_, 0);
  scratch_ = context.createBuffer(std::max<uint64_t>(plan.scratchBytes, 16), "scratch");
  context.fill(scratch_, 0);
  const bool byAddress = plan.bufferAccess == plan::BufferAccess::Addresses;
  if (byAddress && !context.hasBufferDeviceAddresses())
    throw RuntimeError("the plan's kernels reach their buffers by address: its context needs "
                       "bufferDeviceAddress (exec::contextOptionsFor)");
  for (const plan::Kernel &k : plan.kernels)
    pipelines_.push_back(context.createPipeline(k.spirv, byAddress ? 0 : k.numBindings,
                                                plan::pushConstantBytes(plan.bufferAccess, k), k.name));
  prefill_ = prepare(plan.prefill);
  decode_ = prepare(plan.decode);
  sampler_ = prepare(plan.sampler);
}

Executor::~Executor() {
  try {
    finishBatches();
  } catch (const std::exception &) {
    // A GPU that timed out: the context's destructor waits for the device before it frees anything.
  }
  for (auto &[key, cmd] : recordedDecode_) context_.freeCommands(cmd);
}

const vk::Buffer &Executor::buffer(const plan::Binding &b) const {
  switch (b.kind) {
  case plan::BufferKind::Weight:
    return weights_.buffers[b.weight];
  case plan::BufferKind::Arena:
    return arena_;
  case plan::BufferKind::KVCache:
    return kvCache_;
  case plan::BufferKind::Input:
    return input_;
  case plan::BufferKind::State:
    return state_;
  case plan::BufferKind::Scratch:
    return scratch_;
  }
  throw RuntimeError("unknown buffer kind in the plan");
}

// A weight binding is the whole weight; the others are byte ranges.
vk::BufferRange Executor::range(const plan::Binding &b) const {
  const vk::Buffer &whole = buffer(b);
  if (b.kind == plan::BufferKind::Weight) return {whole.handle(), 0, whole.size()};
  return {whole.handle(), b.offset, b.size};
}

uint64_t Executor::address(const plan::Binding &b) const {
  return buffer(b).deviceAddress() + range(b).offset;
}

std::vector<Executor::PreparedDispatch> Executor::prepare(const std::vector<plan::Dispatch> &schedule) {
  std::vector<PreparedDispatch> prepared;
  for (const plan::Dispatch &d : schedule) {
    if (plan_.bufferAccess == plan::BufferAccess::Addresses) {
      std::vector<uint32_t> addresses;
      for (const plan::Binding &b : d.bindings) plan::appendAddress(addresses, address(b));
      prepared.push_back({d.kernel, VK_NULL_HANDLE, d.grid, std::move(addresses), d.overlapsNext});
      continue;
    }
    std::vector<vk::BufferRange> ranges;
    for (const plan::Binding &b : d.bindings) ranges.push_back(range(b));
    prepared.push_back(
        {d.kernel, context_.createDescriptorSet(pipelines_[d.kernel], ranges), d.grid, {}, d.overlapsNext});
  }
  return prepared;
}

void Executor::setPosition(uint32_t position) {
  dropBatches();
  if (position > position_) throw RuntimeError("setPosition can only move back");
  position_ = position;
}

void Executor::checkStep(uint32_t count) const {
  if (count == 0) throw RuntimeError("a step needs at least one token");
  if (count > plan_.limits.prefillChunk)
    throw RuntimeError("a step of " + std::to_string(count) + " tokens exceeds the plan's prefill chunk of " +
                       std::to_string(plan_.limits.prefillChunk));
  if (position_ + count > plan_.limits.maxSequence)
    throw RuntimeError("position " + std::to_string(position_ + count) + " exceeds the plan's --max-seq " +
                       std::to_string(plan_.limits.maxSequence) + ": recompile with a larger --max-seq");
}

void Executor::writeHost(vk::Buffer &buffer, const void *data, uint64_t bytes, uint64_t offset) {
  if (void *mapped = buffer.mappedData())
    std::memcpy(static_cast<uint8_t *>(mapped) + offset, data, bytes);
  else
    context_.upload(buffer, offset, data, bytes);
}

void Executor::readHost(const vk::Buffer &buffer, uint64_t offset, void *data, uint64_t bytes) {
  if (const void *mapped = buffer.mappedData())
    std::memcpy(data, static_cast<const uint8_t *>(mapped) + offset, bytes);
  else
    context_.download(buffer, offset, data, bytes);
}

void Executor::writeState(uint32_t position) {
  const uint32_t header[plan::kStateHeaderWords] = {position, 0};
  writeHost(state_, header, sizeof header);
}

void Executor::recordSchedule(VkCommandBuffer &cmd, std::span<const PreparedDispatch> schedule,
                              uint32_t count, bool timestamps, bool lastRowLogits, uint32_t submitEvery,
                              uint32_t firstPart) {
  size_t nextSubmit = submitEvery ? (firstPart ? firstPart : submitEvery) : schedule.size();
  size_t standsInUntil = 0; // prefill dispatches the one-row logits dispatch took the place of
  std::vector<uint32_t> push; // { tokens, firstRow } and the bindings' addresses
  for (size_t i = 0; i < schedule.size(); ++i) {
    // The logits of row count - 1 alone: the decode schedule's one-row dispatch, whose bindings extend the
    // prefill one's; where it also picks the token, the prefill's argmax after it is left out.
    const bool oneRow = lastRowLogits && static_cast<int64_t>(i) == plan_.lastRowLogits.prefill;
    if (oneRow) standsInUntil = i + static_cast<size_t>(plan_.lastRowLogits.prefillDispatches);
    if (oneRow || i >= standsInUntil) {
      const PreparedDispatch &d =
          oneRow ? decode_[static_cast<size_t>(plan_.lastRowLogits.decode)] : schedule[i];
      const uint32_t tokens = oneRow ? 1 : count;
      push.assign({tokens, oneRow ? count - 1 : 0});
      push.insert(push.end(), d.addresses.begin(), d.addresses.end());
      context_.dispatch(cmd, pipelines_[d.kernel], d.set, push.data(),
                        static_cast<uint32_t>(push.size() * sizeof(uint32_t)), d.grid[0].evaluate(tokens),
                        d.grid[1].evaluate(tokens), d.grid[2].evaluate(tokens));
      // A dispatch that overlaps the next one: that one reads nothing it writes. The last one's barrier also
      // orders the transfers (downloads) that may follow.
      if (i + 1 == schedule.size())
        context_.computeBarrier(cmd);
      else if (!d.overlapsNext)
        context_.dispatchBarrier(cmd);
    }
    if (timestamps) context_.writeTimestamp(cmd, static_cast<uint32_t>(i) + 1);
    if (i + 1 == nextSubmit && i + 1 < schedule.size()) {
      context_.submit(cmd); // the barrier above orders what follows after it
      cmd = context_.beginCommands();
      nextSubmit += submitEvery;
    }
  }
}

std::vector<float> Executor::step(const std::vector<int32_t> &tokens, Logits wanted) {
  return runStep(tokens, wanted, true);
}

std::vector<float> Executor::runStep(const std::vector<int32_t> &tokens, Logits wanted, bool replayable) {
  finishBatches();
  const uint32_t count = static_cast<uint32_t>(tokens.size());
  checkStep(count);
  for (int32_t id : tokens)
    if (id < 0 || id >= plan_.model.vocabSize)
      throw RuntimeError("token id " + std::to_string(id) + " is outside the vocabulary of " +
                         std::to_string(plan_.model.vocabSize));
  writeHost(input_, tokens.data(), count * sizeof(int32_t));
  writeState(position_);

  if (count == 1 && replayable && !profiling_) {
    replayDecodeStep();
  } else {
    recordAndRunStep(count, wanted);
  }
  position_ += count;
  lastStepTokens_ = count;

  if (wanted == Logits::None) return {};
  const uint64_t vocab = static_cast<uint64_t>(plan_.model.vocabSize);
  const uint32_t firstRow = wanted == Logits::All ? 0 : count - 1;
  std::vector<float> logits((count - firstRow) * vocab);
  context_.download(arena_, plan_.logits.offset + firstRow * vocab * sizeof(float), logits.data(),
                    logits.size() * sizeof(float));
  return logits;
}

std::vector<float> Executor::prefill(std::span<const int32_t> prompt, Logits wanted,
                                     const std::function<void()> &afterStep) {
  if (prompt.empty()) throw RuntimeError("the prompt is empty");
  const size_t chunk = plan_.limits.prefillChunk;
  std::vector<float> logits;
  for (size_t begin = 0; begin < prompt.size(); begin += chunk) {
    const size_t end = std::min(prompt.size(), begin + chunk);
    // Only the last step's last row matters for Logits::Last: the steps before it compute none.
    const Logits stepWanted = wanted == Logits::Last && end < prompt.size() ? Logits::None : wanted;
    // Recorded even when one token long (a prompt one past a chunk): the replayed step has no timestamps,
    // and gerbil-bench adds up the steps' lastStepGpuMs.
    std::vector<float> rows =
        runStep(std::vector<int32_t>(prompt.begin() + begin, prompt.begin() + end), stepWanted, false);
    logits.insert(logits.end(), rows.begin(), rows.end());
    if (afterStep) afterStep();
  }
  return logits;
}

VkCommandBuffer Executor::recordedDecodeSteps(uint32_t count, uint32_t slot, uint32_t samplerStages) {
  VkCommandBuffer &cmd = recordedDecode_[{count, slot, samplerStages}];
  if (!cmd) {
    cmd = context_.beginReusableCommands();
    context_.computeBarrier(cmd); // host writes and earlier submissions come first
    const std::span<const PreparedDispatch> schedule(decode_);
    // Sampled steps leave out decode's argmax launch where it is one of its own (the sampler appends and
    // advances instead); sampling needs the plan's sampler (setSampling).
    const bool withoutArgmax = samplerStages != 0 && plan_.decodeArgmaxLaunch;
    for (uint32_t i = 0; i < count; ++i) {
      recordSchedule(cmd, withoutArgmax ? schedule.first(schedule.size() - 1) : schedule, 1, false, false);
      recordSampler(cmd, 1, samplerStages);
    }
    context_.endCommands(cmd);
  }
  return cmd;
}

void Executor::recordSampler(VkCommandBuffer cmd, uint32_t tokens, uint32_t stages) {
  std::vector<uint32_t> push;
  for (size_t stage = 0; stage < sampler_.size(); ++stage) {
    if (!(stages >> stage & 1)) continue;
    const PreparedDispatch &d = sampler_[stage];
    push.assign({tokens, tokens - 1});
    push.insert(push.end(), d.addresses.begin(), d.addresses.end());
    context_.dispatch(cmd, pipelines_[d.kernel], d.set, push.data(),
                      static_cast<uint32_t>(push.size() * sizeof(uint32_t)), d.grid[0].evaluate(tokens),
                      d.grid[1].evaluate(tokens), d.grid[2].evaluate(tokens));
    context_.computeBarrier(cmd);
  }
}

void Executor::setSampling(const SamplingOptions &options, std::span<const int32_t> seen) {
  if (plan_.sampler.empty())
    throw RuntimeError("the plan has no GPU sampler (compiled without a GPU argmax): sample on the host");
  Sampler checked(options); // throws on an option out of range
  finishBatches();          // batches in flight read and set the penalty's bits
  const int64_t vocab = plan_.model.vocabSize;
  std::vector<uint32_t> words = samplingParamWords(options, vocab);
  words.resize(plan::samplingWords(vocab), 0);
  for (int32_t id : seen)
    if (id >= 0 && id < vocab) words[plan::kSamplingParamWords + size_t(id) / 32] |= 1u << (id % 32);
  writeHost(state_, words.data(), words.size() * 4, plan_.samplingOffset);
  // The launches these options need: stage 0 alone picks a greedy token; the histograms only for cuts.
  using namespace plan;
  const bool topK = options.topK > 0 && options.topK < vocab, topP = options.topP < 1.0;
  samplerStages_ = 1u << kSamplerMaximum;
  if (options.temperature > 0) samplerStages_ |= 1u << kSamplerDraw;
  if (options.temperature > 0 && (topK || topP))
    samplerStages_ |= 1u << kSamplerHighBytes | 1u << kSamplerLowBytes;
  if (options.temperature > 0 && topK && topP) samplerStages_ |= 1u << kSamplerTopPLowBytes;
}

int32_t Executor::sampledToken() {
  if (!samplerStages_) throw RuntimeError("sampledToken: setSampling first");
  if (lastStepTokens_ == 0) throw RuntimeError("sampledToken: no step has run");
  finishBatches();
  setSamplerAdvances(false); // the step ran its argmax launch
  VkCommandBuffer cmd = context_.beginCommands();
  context_.computeBarrier(cmd);
  recordSampler(cmd, lastStepTokens_, samplerStages_);
  context_.submitAndWait(cmd);
  return greedyToken();
}

void Executor::replayDecodeStep() {
  // Recorded once, as the greedy batches are (a sampling loop re-recorded every launch of every token:
  // ~0.1-0.4 ms of host time a token, as long as the prefill's recordMs, while the GPU waited).
  context_.submitRecorded(recordedDecodeSteps(1, kSingleStepSlot));
  lastStepGpuMs_ = lastStepRecordMs_ = 0;
}

void Executor::recordAndRunStep(uint32_t count, Logits wanted) {
  const auto &schedule = count == 1 ? decode_ : prefill_;
  const auto recordStart = support::Clock::now();
  VkCommandBuffer cmd = context_.beginCommands();
  const bool timed = context_.info().timestamps;
  const uint32_t slots = profiling_ ? static_cast<uint32_t>(schedule.size()) + 1 : 2;
  if (timed) {
    context_.resetTimestamps(cmd, slots);
    context_.writeTimestamp(cmd, 0);
  }
  context_.computeBarrier(cmd); // host writes and earlier submissions come first
  const bool lastRowLogits = count > 1 && wanted != Logits::All && plan_.lastRowLogits.prefill >= 0;
  recordSchedule(cmd, schedule, count, timed && profiling_, lastRowLogits,
                 count > 1 ? prefillSubmitDispatches_ : 0, prefillFirstPart_);
  if (timed && !profiling_) context_.writeTimestamp(cmd, 1);
  lastStepRecordMs_ = support::msSince(recordStart);
  context_.submitAndWait(cmd);
  if (timed) {
    std::vector<uint64_t> ns = context_.readTimestamps(slots);
    lastStepGpuMs_ = static_cast<double>(ns.back() - ns.front()) / 1e6;
    lastDispatchMs_.clear();
    if (profiling_)
      for (size_t i = 1; i < ns.size(); ++i)
        lastDispatchMs_.push_back(static_cast<double>(ns[i] - ns[i - 1]) / 1e6);
  }
}

int32_t Executor::greedyToken() {
  if (!plan_.gpuArgmax) throw RuntimeError("the plan has no GPU argmax");
  finishBatches();
  uint32_t token = 0;
  readHost(state_, plan::kStateHeaderWords * 4, &token, 4);
  return static_cast<int32_t>(token);
}

void Executor::beginGreedy(int32_t token) {
  beginRun(token, false);
}

void Executor::beginSampling(int32_t token) {
  if (!samplerStages_) throw RuntimeError("beginSampling: setSampling first");
  beginRun(token, true);
  setSamplerAdvances(plan_.decodeArgmaxLaunch);
}

void Executor::setSamplerAdvances(bool advances) {
  const uint32_t word = advances ? 1 : 0;
  writeHost(state_, &word, 4, plan_.samplingOffset + plan::kAdvances * 4);
}

void Executor::beginRun(int32_t token, bool sampled) {
  if (!plan_.gpuArgmax) throw RuntimeError("the plan has no GPU argmax");
  if (token < 0 || token >= plan_.model.vocabSize)
    throw RuntimeError("token id " + std::to_string(token) + " is outside the vocabulary");
  finishBatches();
  writeHost(input_, &token, sizeof token);
  writeState(position_); // the token list starts again
  runTokensQueued_ = 0;
  runStarted_ = true;
  runSampled_ = sampled;
}

void Executor::submitBatch(uint32_t count) {
  if (!plan_.gpuArgmax) throw RuntimeError("the plan has no GPU argmax");
  if (!runStarted_)
    throw RuntimeError("submitBatch: no run of batches (beginGreedy or beginSampling starts one; a step, "
                       "setPosition or reset ends it)");
  if (count == 0) throw RuntimeError("a batch needs at least one step");
  if (position_ + count > plan_.limits.maxSequence)
    throw RuntimeError("position " + std::to_string(position_ + count) + " exceeds the plan's --max-seq " +
                       std::to_string(plan_.limits.maxSequence));
  if (batchesInFlight_.size() >= vk::Context::kRecordedInFlight)
    throw RuntimeError("submitBatch: " + std::to_string(batchesInFlight_.size()) +
                       " batches are in flight already; read one first");
  // Each step takes its token and position from the state the last one left on the GPU: the host writes
  // nothing between batches.
  const uint32_t slot = batchSubmissions_++ % vk::Context::kRecordedInFlight;
  batchesInFlight_.push_back(
      {context_.submitRecordedAsync(recordedDecodeSteps(count, slot, runSampled_ ? samplerStages_ : 0)),
       runTokensQueued_, count});
  runTokensQueued_ += count;
  position_ += count;
}

std::vector<int32_t> Executor::nextBatchTokens() {
  if (batchesInFlight_.empty()) throw RuntimeError("nextBatchTokens: no batch is in flight");
  const DecodeBatch batch = batchesInFlight_.front();
  batchesInFlight_.erase(batchesInFlight_.begin());
  context_.waitRecorded(batch.ticket);
  std::vector<int32_t> tokens(batch.count);
  readHost(state_, (plan::kStateHeaderWords + batch.firstToken) * 4, tokens.data(),
           batch.count * sizeof(int32_t));
  return tokens;
}

void Executor::dropBatches() {
  for (const DecodeBatch &batch : batchesInFlight_) droppedBatches_.push_back(batch.ticket);
  batchesInFlight_.clear();
  runStarted_ = false;
}

void Executor::finishBatches() {
  dropBatches();
  // Cleared first: a wait that throws (a GPU that timed out) is not repeated.
  for (uint32_t ticket : std::exchange(droppedBatches_, {})) context_.waitRecorded(ticket);
}

} // namespace gerbil::exec
