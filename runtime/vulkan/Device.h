// A thin Vulkan compute layer without any surface: instance, device choice, buffers, pipelines, command
// recording. Errors are VulkanError exceptions naming the call that failed and its VkResult.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <vulkan/vulkan.h>

namespace gerbil::vk {

class VulkanError : public std::runtime_error {
public:
  VulkanError(const std::string &what, VkResult result);
  explicit VulkanError(const std::string &what);
  VkResult result() const { return result_; }

private:
  VkResult result_ = VK_ERROR_UNKNOWN;
};

// The enumerator's name ("VK_ERROR_DEVICE_LOST"), or "VkResult(<number>)" for one this file doesn't know.
const char *resultName(VkResult result);

// Thrown when no Vulkan driver or no device is present (tests turn it into a skip).
class NoDeviceError : public VulkanError {
public:
  using VulkanError::VulkanError;
};

struct DeviceInfo {
  uint32_t index = 0;
  std::string name;
  uint32_t vendorId = 0; // PCI vendor (0x10de: NVIDIA)
  std::string type; // discrete, integrated, virtual, cpu, other
  std::string driver;
  uint32_t apiVersion = 0;
  uint64_t deviceLocalBytes = 0;
  uint32_t subgroupSize = 0;
  // The smallest subgroup a compute pipeline may get (Vulkan 1.3 subgroup size control; else subgroupSize).
  uint32_t minSubgroupSize = 0;
  // Compute shaders may use the subgroup arithmetic operations (subgroupAdd, subgroupMax, ...) and shuffles
  // (subgroupShuffleXor: the decode attention's scores); gerbil's kernels use both or neither.
  bool subgroupArithmetic = false;
  bool shaderFloat16 = false;
  bool storageBuffer16BitAccess = false;
  bool vulkanMemoryModel = false; // what glslang's cooperative-matrix SPIR-V declares
  bool cooperativeMatrix = false; // VK_KHR_cooperative_matrix
  // VK_NV_cooperative_matrix: the shapes it runs, as "MxNxK A*B+C->D" with component types
  // ("16x16x16 f16*f16+f32->f32"), subgroup scope only.
  std::vector<std::string> cooperativeMatrixNVShapes;
  std::vector<std::string> cooperativeMatrixKHRShapes; // the same for VK_KHR_cooperative_matrix
  // VK_NV_cooperative_matrix2's workgroup-scope matrices (cooperativeMatrixWorkgroupScope and
  // cooperativeMatrixFlexibleDimensions both): the granularities of their flexible dimensions and the
  // workgroup size they need, "MxNxK A*B+C->D @N" (M, N, K the granularities, N after @ the invocations).
  std::vector<std::string> cooperativeMatrixWorkgroupShapes;
  uint32_t cooperativeMatrixWorkgroupMaxInvocations = 0; // cooperativeMatrixWorkgroupScopeMaxWorkgroupSize
  uint32_t cooperativeMatrixFlexibleMaxDimension = 0;    // cooperativeMatrixFlexibleDimensionsMaxDimension
  uint32_t cooperativeMatrixWorkgroupSharedBytes = 0;    // ...WorkgroupScopeReservedSharedMemory
  uint32_t maxSubgroupSize = 0;        // the largest (Vulkan 1.3 subgroup size control; else subgroupSize)
  std::vector<std::string> extensions; // every device extension, sorted
  bool hasExtension(const std::string &name) const;
  uint64_t maxStorageBufferRange = 0;
  uint32_t maxSharedMemoryBytes = 0;
  uint32_t maxPushConstantsBytes = 0;
  // Shaders may reach buffers by their device addresses (Vulkan 1.2 bufferDeviceAddress); in a Context's
  // info: only where ContextOptions::bufferDeviceAddress asked for them.
  bool bufferDeviceAddress = false;
  uint32_t maxWorkgroupCount[3] = {0, 0, 0};
  bool timestamps = false;
  double timestampPeriodNs = 0;
};

inline constexpr uint32_t kDefaultSpinWaitMicroseconds = 20000;

// How device-local buffers get their memory (ContextOptions::allocation). The driver alone decides how it
// maps an allocation (its page size among others); these are the ways Vulkan has of asking for memory that
// a driver may treat differently. On an H100 (sweep cm, docs/decode-latency.md) the 8B's decode gemvs over
// 16 GiB of weights lost 3-4 us each to missed address translations in plain allocations, whether one a
// buffer or shared, and none in dedicated ones (as if mapped with larger pages): Llama-3-8B decoded at
// 174.4 -> 180.6 tok/s and prefilled in 33.02 -> 32.27 ms.
// A queue beside the main one, for work that none of the main queue's barriers may hold (gerbil-kernel-bench
// sync's companion prefetcher): none, a second queue of the main queue's family, or a queue of another
// family with compute (an "async compute" family), whose use makes every buffer shared by the two families.
enum class CompanionQueue { None, SameFamily, OtherFamily };

// The main queue's family: the first with compute and timestamps (on NVIDIA the one with graphics too), or
// one with compute and timestamps but no graphics first (an "async compute" family), where the device has it.
enum class MainQueueFamily { First, ComputeOnly };
inline constexpr MainQueueFamily kMainQueueFamilies[] = {MainQueueFamily::First,
                                                         MainQueueFamily::ComputeOnly};
// "first", "compute-only" (for command lines); nullopt for another name.
std::optional<MainQueueFamily> parseMainQueueFamily(const std::string &name);
const char *mainQueueFamilyName(MainQueueFamily family);
std::vector<std::string> mainQueueFamilyNames();

// The barrier between two dispatches of a step (Context::dispatchBarrier): the compute-and-transfer one
// that orders everything else (computeBarrier), compute → compute shader accesses, or storage-buffer
// accesses alone through VK_KHR_synchronization2 (core in 1.3; the compute one where the device lacks it).
enum class DispatchBarrier { Full, Compute, Storage };
inline constexpr DispatchBarrier kDispatchBarriers[] = {DispatchBarrier::Full, DispatchBarrier::Compute,
                                                        DispatchBarrier::Storage};
// "full", "compute", "storage" (for command lines); nullopt for another name.
std::optional<DispatchBarrier> parseDispatchBarrier(const std::string &name);
const char *dispatchBarrierName(DispatchBarrier barrier);
std::vector<std::string> dispatchBarrierNames();

enum class MemoryAllocation {
  Plain,      // vkAllocateMemory alone
  Dedicated,  // an allocation made for its one buffer (VkMemoryDedicatedAllocateInfo)
  Exportable, // dedicated and exportable as a file descriptor (VK_KHR_external_memory_fd), as interop is
  Priority,   // at the highest priority (VK_EXT_memory_priority)
};
// Where allocations are dedicated, createBuffers gives buffers of at least this many bytes (a large page's)
// allocations of their own: the weight matrices, whose reads gain from the dedicated mapping; the small
// ones (norm weights, biases) still share blocks.
inline constexpr uint64_t kOwnAllocationBytes = 2ull << 20;
inline constexpr MemoryAllocation kMemoryAllocations[] = {
    MemoryAllocation::Plain, MemoryAllocation::Dedicated, MemoryAllocation::Exportable,
    MemoryAllocation::Priority};
// Whether buffers made alone get allocations dedicated to them (Dedicated, and Exportable, which is too).
inline bool dedicates(MemoryAllocation allocation) {
  return allocation == MemoryAllocation::Dedicated || allocation == MemoryAllocation::Exportable;
}
// "plain", "dedicated", "exportable", "priority" (kMemoryAllocations' names, for command lines); nullopt
// for another name.
std::optional<MemoryAllocation> parseMemoryAllocation(const std::string &name);
const char *memoryAllocationName(MemoryAllocation allocation);
std::vector<std::string> memoryAllocationNames();

struct ContextOptions {
  int deviceIndex = -1;      // -1: the first discrete GPU, else the first device
  bool validation = false;   // VK_LAYER_KHRONOS_validation (also turned on by GERBIL_VK_VALIDATION=1)
  bool enableFloat16 = true; // enable shaderFloat16 / 16-bit storage when the device has them
  // Device extensions to enable where the device has them (with their features: cooperativeMatrix of
  // VK_NV_cooperative_matrix and of VK_KHR_cooperative_matrix); a plan's Requirements name them, and
  // checking them is the caller's part.
  std::vector<std::string> extensions;
  // Tests: copy through the staging buffer even where device memory is mapped (as it must be on a discrete
  // GPU), and the size of one staging copy, so that a small test crosses chunk boundaries.
  bool forceStaging = false;
  uint64_t stagingChunkBytes = 64ull << 20;
  // Pipelines keep the driver's statistics of their compiled code (registers, spills, ...) where the device
  // has VK_KHR_pipeline_executable_properties: see PipelineStatistics.h.
  bool pipelineStatistics = false;
  // Buffers whose device addresses shaders may take (Vulkan 1.2 bufferDeviceAddress), where the device has
  // them: Buffer::deviceAddress. Off by default (plans bind descriptors).
  bool bufferDeviceAddress = false;
  // Waits for the GPU poll the fence for up to this many microseconds before they block in
  // vkWaitForFences: a blocked host thread can wake well after the GPU has finished a short step (H200,
  // 588c0b1: Qwen2.5-0.5B's 512-token prefill 6.14 -> 6.04 ms, decode 0.810 -> 0.801 ms a token). Unset:
  // kDefaultSpinWaitMicroseconds, except on CPU devices, whose threads a polling host would slow.
  std::optional<uint32_t> spinWaitMicroseconds;
  // How device-local buffers get their memory; the extension a way needs is enabled, and a device without
  // it refused (VulkanError naming it). Buffers that share a block (createBuffers) are never dedicated, nor
  // exported.
  MemoryAllocation allocation = MemoryAllocation::Dedicated;
  // Tests: the allocations createBuffers may make (default: the device's maxMemoryAllocationCount).
  std::optional<uint32_t> maxAllocations;
  // Where the device has such a queue; hasCompanionQueue() says whether it got one.
  CompanionQueue companionQueue = CompanionQueue::None;
  MainQueueFamily mainQueueFamily = MainQueueFamily::First;
  // What dispatchBarrier records. Whether a narrower barrier than the full one is cheaper between decode's
  // dependent launches is a measurement (gerbil-bench --dispatch-barrier), so they are opt-in.
  DispatchBarrier dispatchBarrier = DispatchBarrier::Full;
};

class Context;

// A device-local storage buffer (on devices where all memory is host-visible it is also mapped).
// size() is the allocated size: the request rounded up to a multiple of 4 (so that fill covers it all), and
// 16 bytes for an empty request. A Buffer still alive when its Context is destroyed is freed and
// emptied then.
class Buffer {
public:
  Buffer() = default;
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  Buffer(Buffer &&o) noexcept;
  Buffer &operator=(Buffer &&o) noexcept;
  ~Buffer();
  VkBuffer handle() const { return buffer_; }
  uint64_t size() const { return size_; }
  // The host mapping of a host-visible buffer, else nullptr.
  void *mappedData() const { return mapped_; }
  // The allocation it lies in (its own, or a block it shares with others: Context::createBuffers).
  VkDeviceMemory memory() const;
  // The buffer's device address, for a context made with bufferDeviceAddress on a device that has it;
  // throws VulkanError otherwise.
  uint64_t deviceAddress() const;

private:
  friend class Context;
  friend class UploadStream;
  Context *ctx_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  uint64_t size_ = 0;
  void *mapped_ = nullptr; // set when the memory is host-visible and coherent: copies bypass staging
  // A block of memory that this buffer shares with others (Context::createBuffers); memory_ is then null.
  struct SharedMemory;
  std::shared_ptr<const SharedMemory> sharedMemory_;
  void release();
};

struct Pipeline {
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkDescriptorSetLayout setLayout = VK_NULL_HANDLE;
  uint32_t numBindings = 0;
  uint32_t pushConstantBytes = 0;
};

struct BufferRange {
  VkBuffer buffer = VK_NULL_HANDLE;
  uint64_t offset = 0;
  uint64_t size = 0; // VK_WHOLE_SIZE allowed
};

struct BufferRequest {
  uint64_t bytes = 0;
  std::string what; // named in errors
};

class Context {
public:
  static std::vector<DeviceInfo> listDevices(); // throws NoDeviceError when there is no driver at all
  explicit Context(const ContextOptions &options);
  ~Context();
  Context(const Context &) = delete;
  Context &operator=(const Context &) = delete;

  // For a Context, shaderFloat16 and storageBuffer16BitAccess say what was enabled, not only supported.
  const DeviceInfo &info() const { return info_; }
  VkDevice device() const { return device_; }
  // Whether pipelines are created with their statistics (ContextOptions::pipelineStatistics, where the
  // device has them).
  bool capturesPipelineStatistics() const { return pipelineStatistics_; }
  // Whether buffers have device addresses (ContextOptions::bufferDeviceAddress, where the device has them).
  bool hasBufferDeviceAddresses() const { return bufferDeviceAddress_; }
  // Whether kernels may atomicAdd floats in storage buffers (VK_EXT_shader_atomic_float requested in
  // ContextOptions::extensions, where the device has it and its shaderBufferFloat32AtomicAdd).
  bool hasBufferFloatAtomicAdd() const { return bufferFloatAtomicAdd_; }

  // hostVisible: memory the host maps (small per-step inputs written without a staging copy); device-local
  // host-visible memory is preferred where the device has it.
  Buffer createBuffer(uint64_t bytes, const std::string &what, bool hostVisible = false);
  // Device-local buffers that share allocations of at most blockBytes each, in request order (a buffer
  // larger than that has one of its own, and so has one of kOwnAllocationBytes or more where allocations
  // are dedicated; blockBytes 0: every buffer its own, as createBuffer). A model of many small tensors then
  // needs few allocations, of which drivers may allow as few as 4096 (maxMemoryAllocationCount): where the
  // large buffers alone would take more than half of them, they share blocks too.
  std::vector<Buffer> createBuffers(std::span<const BufferRequest> requests, uint64_t blockBytes);
  // Host <-> device copies through a staging buffer; they wait until done. Many uploads in a row (a model's
  // weights) go faster through one UploadStream (UploadStream.h), which upload itself uses.
  void upload(Buffer &dst, uint64_t offset, const void *data, uint64_t bytes);
  void download(const Buffer &src, uint64_t offset, void *data, uint64_t bytes);
  void fill(Buffer &dst, uint32_t value);

  // pushConstantBytes must match the shader's push constant block.
  Pipeline createPipeline(const std::vector<uint32_t> &spirv, uint32_t numBindings,
                          uint32_t pushConstantBytes, const std::string &name);
  // A descriptor set for one dispatch: ranges[i] is bound to binding i.
  VkDescriptorSet createDescriptorSet(const Pipeline &pipeline, const std::vector<BufferRange> &ranges);
  // Frees every descriptor set created so far, for reuse of their pools; none of them may be in use.
  void resetDescriptorSets();

  // Command recording: begin, any number of dispatch/barrier/timestamp, then submit (waits for completion).
  VkCommandBuffer beginCommands();
  void dispatch(VkCommandBuffer cmd, const Pipeline &p, VkDescriptorSet set, const void *pushConstants,
                uint32_t pushBytes, uint32_t gx, uint32_t gy, uint32_t gz);
  void computeBarrier(VkCommandBuffer cmd);
  // Between two dispatches, the second of which reads or writes only what dispatches wrote (not transfers,
  // not the host): ContextOptions::dispatchBarrier's.
  void dispatchBarrier(VkCommandBuffer cmd);
  // The barrier dispatchBarrier records: the option's, or Compute for Storage on a device without
  // synchronization2.
  DispatchBarrier dispatchBarrierKind() const;
  void submitAndWait(VkCommandBuffer cmd);
  // The companion queue (ContextOptions::companionQueue), where the device has the one asked for: what is
  // submitted there runs beside the main queue's work, ordered with it through memory alone
  // (gerbil-kernel-bench sync's companion prefetcher). beginCompanionCommands begins a command buffer for
  // it; submitWithCompanionAndWait submits `companion` there first, then `cmd` as submitAndWait does, and
  // waits for both.
  bool hasCompanionQueue() const;
  // The main queue's family, and whether that family has graphics too (ContextOptions::mainQueueFamily).
  uint32_t queueFamily() const;
  bool queueFamilyHasGraphics() const;
  VkCommandBuffer beginCompanionCommands();
  void submitWithCompanionAndWait(VkCommandBuffer cmd, VkCommandBuffer companion);
  // Submits without waiting, so that the GPU starts on it while the host records more. What follows must be
  // ordered after it by a barrier (as between dispatches) and end in a submitAndWait, whose wait covers it.
  void submit(VkCommandBuffer cmd);

  // A command buffer recorded once and submitted many times (decode steps): begin, record, end once; then
  // submitRecorded as often as needed; freeCommands when done.
  VkCommandBuffer beginReusableCommands();
  void endCommands(VkCommandBuffer cmd);
  void submitRecorded(VkCommandBuffer cmd);
  // Submits a recorded command buffer without waiting, so that the GPU runs it while the host reads what an
  // earlier one wrote (greedy decode batches); returns a ticket for waitRecorded, which must follow. At most
  // kRecordedInFlight are in flight; a command buffer may be in only one of them.
  static constexpr uint32_t kRecordedInFlight = 2;
  uint32_t submitRecordedAsync(VkCommandBuffer cmd);
  void waitRecorded(uint32_t ticket);
  void freeCommands(VkCommandBuffer cmd);

  // Timestamps: a query pool of `count` slots, reset it in a command buffer, write, read after submit.
  void resetTimestamps(VkCommandBuffer cmd, uint32_t count);
  void writeTimestamp(VkCommandBuffer cmd, uint32_t slot);
  std::vector<uint64_t> readTimestamps(uint32_t count); // nanoseconds

  // Validation layer (ContextOptions::validation or GERBIL_VK_VALIDATION=1): whether it is on, and how many
  // errors it reported for this context, or in the whole process (including those reported while a context
  // was being destroyed, such as leaked objects).
  bool validationEnabled() const;
  uint32_t validationErrors() const;
  static uint32_t validationErrorsInProcess();

private:
  friend class Buffer;
  friend class UploadStream;
  // Buffers.cpp: the steps createBuffer and createBuffers share.
  uint64_t checkedBufferSize(uint64_t bytes, const std::string &what) const;
  VulkanError outOfMemory(const std::string &what, uint64_t bytes) const;
  VkMemoryRequirements createHandle(Buffer &buffer, uint64_t size, const std::string &what, bool hostVisible);
  // dedicatedTo: the buffer the allocation is for alone (ContextOptions::allocation), or VK_NULL_HANDLE.
  VkDeviceMemory allocateMemory(uint64_t bytes, uint32_t typeBits, bool hostVisible, const std::string &what,
                                bool &mappable, VkBuffer dedicatedTo);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  DeviceInfo info_;
  VkDevice device_ = VK_NULL_HANDLE;
  bool pipelineStatistics_ = false;
  bool bufferDeviceAddress_ = false;
  bool bufferFloatAtomicAdd_ = false;
};

// Throws VulkanError("vulkan validation reported N errors") when the validation layer was on for `ctx` and
// reported errors for it (gerbil-exec turns that into exit code 4). Call it once the work is done, while the
// context is alive; the overload without a context checks every context of the process, including what was
// reported while one was destroyed (leaked objects), and is the one to call after the last context is gone.
void throwIfValidationFailed(const Context &ctx);
void throwIfValidationFailed();

} // namespace gerbil::vk
