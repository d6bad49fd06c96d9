// Internal to gerbil-vulkan: the state behind a Context, shared by Device.cpp (instance, device, commands,
// pipelines) and Buffers.cpp (buffers, their memory and the copies). Not part of the library's interface.
#pragma once

#include "runtime/vulkan/Device.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <vector>

namespace gerbil::vk::detail {

constexpr uint64_t kMiB = 1ull << 20;

inline std::string mebibytes(uint64_t bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%.1f MiB", double(bytes) / double(kMiB));
  return text;
}

inline void check(VkResult result, const std::string &call) {
  if (result != VK_SUCCESS) throw VulkanError(call, result);
}

// Orders every earlier compute and transfer write before every later compute and transfer access, in this
// command buffer and in later submissions (a barrier reaches back through the queue's submission order).
inline void allComputeAndTransferBarrier(VkCommandBuffer cmd) {
  VkMemoryBarrier barrier{};
  barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                          VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  vkCmdPipelineBarrier(cmd, stages, stages, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

// Compute shaders' writes before compute shaders' accesses, no transfer stages or accesses.
inline void computeOnlyBarrier(VkCommandBuffer cmd) {
  VkMemoryBarrier barrier{};
  barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                       &barrier, 0, nullptr, 0, nullptr);
}

// Storage-buffer writes of compute shaders before storage-buffer accesses of compute shaders after
// (synchronization2: the device must have enabled it).
inline void storageOnlyBarrier(VkCommandBuffer cmd) {
  VkMemoryBarrier2 barrier{};
  barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER_2;
  barrier.srcStageMask = VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT;
  barrier.srcAccessMask = VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT;
  barrier.dstStageMask = VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT;
  barrier.dstAccessMask = VK_ACCESS_2_SHADER_STORAGE_READ_BIT | VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT;
  VkDependencyInfo dependency{};
  dependency.sType = VK_STRUCTURE_TYPE_DEPENDENCY_INFO;
  dependency.memoryBarrierCount = 1;
  dependency.pMemoryBarriers = &barrier;
  vkCmdPipelineBarrier2(cmd, &dependency);
}

// Fence waits make device writes available but not visible to the host: mapped memory the host reads after
// a command buffer (a mapped buffer, the staging buffer of a download) needs this barrier at its end.
inline void barrierToHost(VkCommandBuffer cmd) {
  VkMemoryBarrier toHost{};
  toHost.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  toHost.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  toHost.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &toHost, 0, nullptr, 0, nullptr);
}

// The chunks a staged copy of `bytes` takes through a staging buffer of `stagingBytes`: one of all of it
// where it fits, else halves of it (16-byte aligned), the host working on one while the device copies the
// other.
inline uint64_t copyChunkBytes(uint64_t stagingBytes, uint64_t bytes) {
  return bytes <= stagingBytes ? stagingBytes : stagingBytes / 2 / 16 * 16;
}

// Throws VulkanError (naming `operation`) unless [offset, offset + bytes) lies within the live `buffer` and
// there is host memory (`data`) for a copy of any bytes.
void checkCopyRange(const char *operation, const Buffer &buffer, uint64_t offset, uint64_t bytes,
                    const void *data);
// Polls `fence` for up to spinMicroseconds, then blocks; throws if the GPU does not finish in time.
void waitForFence(VkDevice device, VkFence fence, uint32_t spinMicroseconds);
// Submits one command buffer, signalling `fence` (or none) when it completes.
VkResult submitOne(VkQueue queue, VkCommandBuffer cmd, VkFence fence);

struct InstanceHandles {
  VkInstance instance = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  bool validation = false;
};

} // namespace gerbil::vk::detail

namespace gerbil::vk {

struct Context::Impl {
  std::atomic<uint32_t> validationErrors{0}; // first: the debug messenger points at it until the end
  detail::InstanceHandles instance;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkPhysicalDeviceMemoryProperties memory{};
  VkPhysicalDeviceLimits limits{};
  uint64_t maxAllocationBytes = UINT64_MAX;
  uint64_t maxBufferBytes = UINT64_MAX;
  uint32_t queueFamily = 0;
  bool queueFamilyGraphics = false;
  uint32_t timestampValidBits = 0;
  VkQueue queue = VK_NULL_HANDLE;
  VkQueue companionQueue = VK_NULL_HANDLE; // ContextOptions::companionQueue, where the device has it
  uint32_t companionFamily = 0;
  // Where the companion's family is not the main one: its command pool, and every buffer is shared by both.
  VkCommandPool companionPool = VK_NULL_HANDLE;
  VkFence companionFence = VK_NULL_HANDLE;
  VkCommandPool commandPool = VK_NULL_HANDLE;
  std::vector<VkCommandBuffer> idleCommandBuffers; // reset and ready to begin again
  // Submitted by submit() without a wait; idle again once a later submitAndWait's fence has signalled.
  std::vector<VkCommandBuffer> submittedCommandBuffers;
  VkFence fence = VK_NULL_HANDLE;
  // submitRecordedAsync's fences, and which of them a submission signals that nobody has waited for yet.
  VkFence recordedFences[Context::kRecordedInFlight] = {};
  bool recordedPending[Context::kRecordedInFlight] = {};
  bool forceStaging = false;
  MemoryAllocation allocation = MemoryAllocation::Dedicated; // ContextOptions::allocation
  uint32_t maxAllocations = 0; // ContextOptions::maxAllocations, else the device's limit
  uint64_t stagingChunkBytes = 64 * detail::kMiB;
  uint32_t spinWaitMicroseconds = 0;
  DispatchBarrier dispatchBarrier = DispatchBarrier::Full; // ContextOptions::dispatchBarrier, as enabled

  // Buffers alive, by handle: descriptor ranges are checked against their sizes, and ~Context frees any left.
  std::unordered_map<VkBuffer, Buffer *> liveBuffers;

  struct DescriptorPool {
    VkDescriptorPool pool = VK_NULL_HANDLE;
    uint32_t sets = 0, descriptors = 0;         // capacity
    uint32_t setsLeft = 0, descriptorsLeft = 0; // what remains until the next reset
  };
  std::vector<DescriptorPool> descriptorPools;
  size_t currentDescriptorPool = 0;

  std::vector<VkPipeline> pipelines;
  std::vector<VkPipelineLayout> pipelineLayouts;
  std::vector<VkDescriptorSetLayout> setLayouts;

  VkQueryPool timestampPool = VK_NULL_HANDLE;
  uint32_t timestampSlots = 0;
  // Outgrown pools stay until the end: a command buffer being recorded may still name one.
  std::vector<VkQueryPool> retiredTimestampPools;

  // One host-visible buffer, reused by every staged upload and download (each waits until done). Uploads go
  // through an UploadStream, one at a time; uploads and downloads longer than it alternate between its
  // halves, each half's copies signalling its fence.
  VkFence copyFences[2] = {VK_NULL_HANDLE, VK_NULL_HANDLE};
  VkBuffer staging = VK_NULL_HANDLE;
  VkDeviceMemory stagingMemory = VK_NULL_HANDLE;
  void *stagingMapped = nullptr;
  uint64_t stagingBytes = 0;
  bool uploadStreamOpen = false;

  ~Impl();
  void destroyStaging();
  void ensureStaging(uint64_t bytes);
  // Resets a command buffer that is no longer running and returns it to the idle list (null: nothing).
  void recycle(VkCommandBuffer cmd);
  // A companion command buffer, to its own pool where its family is not the main one.
  void recycleCompanion(VkCommandBuffer cmd);
  // Ends a recorded staging copy and submits it to signal copyFences[half]; waits for that fence. (The
  // upload stream's and the download's halves.)
  void submitCopy(VkCommandBuffer cmd, int half);
  void waitForCopy(int half);
  // Returns the command buffers submit() left to the idle list, once a later submission that waited for
  // them (a barrier) has signalled its fence.
  void recycleSubmitted();
  VkDescriptorPool addDescriptorPool(uint32_t descriptors);
  VkDescriptorSet allocateDescriptorSet(VkDescriptorSetLayout layout, uint32_t descriptors);
};

} // namespace gerbil::vk
