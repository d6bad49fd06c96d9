// Runs a plan on a device: owns the activation arena, the KV cache, the step state and the pipelines, and
// executes prefill and decode steps. A step writes its token ids and position, records every dispatch of
// its schedule with a barrier between them (a one-token step once, then replayed), submits once and reads
// back what it is asked for. Greedy and sampled decode replay a recorded command buffer of several steps:
// the plan's GPU argmax or sampler feeds each token to the next step, so the host reads 4 bytes a token
// and submits the next batch before it reads the last.
#pragma once

#include "runtime/exec/Sampler.h"
#include "runtime/exec/WeightLoader.h"

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <tuple>
#include <vector>

namespace gerbil::exec {

// The device features a plan needs, checked before anything is allocated; throws RuntimeError naming the
// missing feature.
void checkDevice(const plan::Plan &plan, const vk::DeviceInfo &device);

// The context a plan runs in: the device extensions it names, and buffer device addresses where its kernels
// reach buffers by address. The caller sets the device, validation, waits.
vk::ContextOptions contextOptionsFor(const plan::Plan &plan);

// Bytes of device memory a plan needs with its weights.
uint64_t deviceBytesNeeded(const plan::Plan &plan);

enum class Logits { None, Last, All };

class Executor {
public:
  Executor(vk::Context &context, const plan::Plan &plan, LoadedWeights weights);
  ~Executor();
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  // Processes `tokens` at positions [position(), position() + tokens.size()). Returns the logits asked
  // for: every row, the last row, or none (rows × vocab floats). Throws RuntimeError.
  std::vector<float> step(const std::vector<int32_t> &tokens, Logits wanted);
  std::vector<float> step(const std::vector<int32_t> &tokens, bool allRows) {
    return step(tokens, allRows ? Logits::All : Logits::Last);
  }

  // A prompt of any length from position(), in steps of the plan's prefill chunk (the last one shorter).
  // Returns the logits asked for: every row of the prompt, its last row, or none. afterStep, where given,
  // runs after each step (to read its lastStepGpuMs). Throws RuntimeError, for an empty prompt too.
  std::vector<float> prefill(std::span<const int32_t> prompt, Logits wanted,
                             const std::function<void()> &afterStep = {});

  // The GPU argmax's token after the last step (plans with gpuArgmax).
  int32_t greedyToken();
  // Greedy decoding on the GPU (needs plan().gpuArgmax) in batches submitted ahead, so that the GPU decodes
  // the next batch while the host reads one: beginGreedy feeds `token` at position(); submitBatch queues
  // `count` more steps (position() moves on at once; at most vk::Context::kRecordedInFlight batches unread);
  // nextBatchTokens waits for the oldest batch and returns its tokens, the last of which is not yet in the
  // KV cache (as with step). setPosition and reset drop the batches in flight without waiting (a stop
  // does not wait for a batch decoded past it); whatever touches the GPU's state next waits for them.
  void beginGreedy(int32_t token);
  void submitBatch(uint32_t count);
  std::vector<int32_t> nextBatchTokens();

  // Sampling on the GPU (plans with a sampler: plan().sampler): setSampling hands the GPU the options and
  // the tokens the repetition penalty sees (ids outside the vocabulary are left out); sampledToken draws the
  // token after the last step from its last logits row; beginSampling starts a run of batches like
  // beginGreedy's (submitBatch, nextBatchTokens) whose tokens are drawn. The draw for the token at
  // position n is Philox4x32-10 of n under the seed: a seed gives the same tokens however they are batched.
  // Throws RuntimeError.
  void setSampling(const SamplingOptions &options, std::span<const int32_t> seen);
  int32_t sampledToken();
  void beginSampling(int32_t token);

  const plan::Plan &plan() const { return plan_; }
  uint32_t position() const { return position_; }
  // Moves the position back (to drop tokens decoded past a stop); the cache beyond it is overwritten later.
  void setPosition(uint32_t position);
  void reset() {
    dropBatches();
    position_ = 0;
  }
  // The GPU's time of the last step, in ms; 0 after a one-token step that was not profiled (a replayed
  // command buffer without timestamps).
  double lastStepGpuMs() const { return lastStepGpuMs_; }
  // The host's time recording the last step's command buffer, in ms (what the GPU may wait on before it
  // starts); 0 where it was replayed.
  double lastStepRecordMs() const { return lastStepRecordMs_; }

  // A prefill step's command buffer is submitted in parts of this many dispatches, the GPU running each
  // while the host records the next; 0: one submission. On the H200 (cf21454, 512-token steps) parts of 48
  // took Qwen2.5-0.5B's step from 6.55 to 6.42 ms and Llama-3.2-1B's from 9.81 to 9.70 (Llama-3-8B's 56.6
  // either way); parts of 16 left the GPU waiting for the host.
  // firstPart, where not 0, is the first part's size instead: a small one starts the GPU sooner (with
  // polling waits, a first part of 8 took Qwen2.5-0.5B's step from 6.04 to 5.97 ms, 588c0b1).
  static constexpr uint32_t kDefaultPrefillSubmitDispatches = 48, kDefaultPrefillFirstPart = 8;
  void setPrefillSubmitDispatches(uint32_t dispatches, uint32_t firstPart = 0) {
    prefillSubmitDispatches_ = dispatches;
    prefillFirstPart_ = firstPart;
  }

  // With profiling on, every dispatch of a step is timed on the GPU (timestamp queries).
  void setProfiling(bool on) { profiling_ = on; }
  // GPU milliseconds of each dispatch of the last profiled step, in schedule order.
  const std::vector<double> &lastDispatchMs() const { return lastDispatchMs_; }

private:
  struct PreparedDispatch {
    uint32_t kernel;
    VkDescriptorSet set; // BufferAccess::Descriptors
    std::array<plan::GridDim, 3> grid;
    // The push constants after { tokens, firstRow }: each binding's device address, as two u32
    // (BufferAccess::Addresses; empty otherwise).
    std::vector<uint32_t> addresses;
    bool overlapsNext = false; // plan::Dispatch::overlapsNext: no barrier after it
  };
  std::vector<PreparedDispatch> prepare(const std::vector<plan::Dispatch> &schedule);
  const vk::Buffer &buffer(const plan::Binding &binding) const;
  vk::BufferRange range(const plan::Binding &binding) const;
  uint64_t address(const plan::Binding &binding) const;
  void checkStep(uint32_t tokens) const;
  void writeHost(vk::Buffer &buffer, const void *data, uint64_t bytes, uint64_t offset = 0);
  void readHost(const vk::Buffer &buffer, uint64_t offset, void *data, uint64_t bytes);
  void writeState(uint32_t position);
  // step's two ways: a one-token step replays a recorded command buffer; a longer or profiled one is
  // recorded as it runs (with timestamps where the device has them) and waited for.
  void replayDecodeStep();
  // step(), but a one-token step is replayed (untimed: lastStepGpuMs 0) only where `replayable`.
  std::vector<float> runStep(const std::vector<int32_t> &tokens, Logits wanted, bool replayable);
  // `count` decode steps back to back, each followed by the sampler's launches of `samplerStages` (a bit
  // for each plan::SamplerStage; 0: greedy), recorded once for each (count, slot, samplerStages).
  VkCommandBuffer recordedDecodeSteps(uint32_t count, uint32_t slot, uint32_t samplerStages = 0);
  // The sampler's launches of `stages` over row tokens - 1 of the logits.
  void recordSampler(VkCommandBuffer cmd, uint32_t tokens, uint32_t stages);
  void beginRun(int32_t token, bool sampled);
  // The sampler's kAdvances word: whether the steps it follows ran without their argmax launch.
  void setSamplerAdvances(bool advances);
  void recordAndRunStep(uint32_t count, Logits wanted);
  // Ends the greedy or sampled run: its batches in flight are no longer read; finishBatches also waits for
  // them (before anything the host writes for the GPU).
  void dropBatches();
  void finishBatches();
  // lastRowLogits: a prefill step that needs only the last logits row (Plan::lastRowLogits). With
  // submitEvery, `cmd` is submitted after each submitEvery dispatches (the first time after firstPart, if
  // not 0) and replaced by a new one.
  void recordSchedule(VkCommandBuffer &cmd, std::span<const PreparedDispatch> schedule, uint32_t tokens,
                      bool timestamps, bool lastRowLogits, uint32_t submitEvery = 0, uint32_t firstPart = 0);

  vk::Context &context_;
  const plan::Plan &plan_;
  LoadedWeights weights_;
  vk::Buffer arena_, kvCache_, input_, state_, scratch_;
  std::vector<vk::Pipeline> pipelines_;
  std::vector<PreparedDispatch> prefill_, decode_, sampler_;
  // Batched decode: a command buffer per (steps per submit, slot, sampler stages), recorded once; batches in
  // flight use different slots, so that none is submitted again while it runs.
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, VkCommandBuffer> recordedDecode_;
  static constexpr uint32_t kSingleStepSlot = vk::Context::kRecordedInFlight; // step()'s, never in flight
  struct DecodeBatch {
    uint32_t ticket, firstToken, count; // the batch's tokens: the state's token list [firstToken, + count)
  };
  std::vector<DecodeBatch> batchesInFlight_; // oldest first
  std::vector<uint32_t> droppedBatches_;     // tickets of batches dropped but maybe still running
  bool runStarted_ = false;                  // a run begun, not yet ended by a step, setPosition or reset
  bool runSampled_ = false;                  // the run began with beginSampling
  uint32_t samplerStages_ = 0;              // the launches setSampling's options need (0: not set)
  uint32_t lastStepTokens_ = 0;             // the last step's T (0: none yet)
  uint32_t runTokensQueued_ = 0;            // steps submitted since beginGreedy or beginSampling
  uint32_t batchSubmissions_ = 0;           // picks the slot
  uint32_t position_ = 0;
  double lastStepGpuMs_ = 0, lastStepRecordMs_ = 0;
  uint32_t prefillSubmitDispatches_ = kDefaultPrefillSubmitDispatches,
           prefillFirstPart_ = kDefaultPrefillFirstPart;
  bool profiling_ = false;
  std::vector<double> lastDispatchMs_;
};

} // namespace gerbil::exec
