// Buffers, the device memory behind them, and the copies between them and the host.
#include "runtime/vulkan/ContextImpl.h"
#include "runtime/vulkan/UploadStream.h"

#include "runtime/support/Parallel.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>

namespace gerbil::vk {

using detail::allComputeAndTransferBarrier;
using detail::barrierToHost;
using detail::check;
using detail::checkCopyRange;
using detail::mebibytes;

struct Buffer::SharedMemory {
  VkDevice device = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  SharedMemory(VkDevice d, VkDeviceMemory m) : device(d), memory(m) {}
  SharedMemory(const SharedMemory &) = delete;
  SharedMemory &operator=(const SharedMemory &) = delete;
  ~SharedMemory() { vkFreeMemory(device, memory, nullptr); } // unmaps too
};

// ---------------------------------------------------------------------------------------------------------
// Buffer

VkDeviceMemory Buffer::memory() const {
  return sharedMemory_ ? sharedMemory_->memory : memory_;
}

Buffer::Buffer(Buffer &&o) noexcept {
  *this = std::move(o); // this one is empty: nothing to release first
}

Buffer &Buffer::operator=(Buffer &&o) noexcept {
  if (this == &o) return *this;
  release();
  ctx_ = o.ctx_;
  buffer_ = o.buffer_;
  memory_ = o.memory_;
  size_ = o.size_;
  mapped_ = o.mapped_;
  sharedMemory_ = std::move(o.sharedMemory_);
  if (ctx_ && buffer_) ctx_->impl_->liveBuffers[buffer_] = this;
  o.ctx_ = nullptr;
  o.buffer_ = VK_NULL_HANDLE;
  o.memory_ = VK_NULL_HANDLE;
  o.size_ = 0;
  o.mapped_ = nullptr;
  return *this;
}

Buffer::~Buffer() {
  release();
}

void Buffer::release() {
  if (ctx_) {
    VkDevice device = ctx_->impl_->device;
    if (buffer_) {
      ctx_->impl_->liveBuffers.erase(buffer_);
      vkDestroyBuffer(device, buffer_, nullptr);
    }
    if (memory_) vkFreeMemory(device, memory_, nullptr); // unmaps too
  }
  sharedMemory_.reset(); // frees the block after its last buffer
  ctx_ = nullptr;
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  size_ = 0;
  mapped_ = nullptr;
}

uint64_t Buffer::deviceAddress() const {
  if (!ctx_ || !buffer_ || !ctx_->hasBufferDeviceAddresses())
    throw VulkanError("a buffer's device address asked of a context without buffer device addresses");
  VkBufferDeviceAddressInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO;
  info.buffer = buffer_;
  return vkGetBufferDeviceAddress(ctx_->device(), &info);
}

// ---------------------------------------------------------------------------------------------------------
// Creating buffers

namespace {

constexpr uint64_t kEmptyBufferBytes = 16;
constexpr VkMemoryPropertyFlags kMappable =
    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;

// Memory types to try for a buffer, best first. Device-local types first, in the driver's order: the spec
// orders a type without HOST_VISIBLE before one with it, so a discrete GPU gets VRAM rather than its small
// BAR window, and a UMA device its only type. Each is tried in turn, since a second device-local heap may
// still have room.
std::vector<uint32_t> memoryTypeCandidates(const VkPhysicalDeviceMemoryProperties &memory, uint32_t typeBits,
                                           bool hostVisible) {
  std::vector<uint32_t> candidates;
  auto add = [&](VkMemoryPropertyFlags required) {
    for (uint32_t i = 0; i < memory.memoryTypeCount; ++i)
      if ((typeBits & (1u << i)) && (memory.memoryTypes[i].propertyFlags & required) == required &&
          std::find(candidates.begin(), candidates.end(), i) == candidates.end())
        candidates.push_back(i);
  };
  if (hostVisible) {
    add(kMappable | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    add(kMappable);
  }
  add(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (candidates.empty()) add(0);
  return candidates;
}

// The first memory type allowed by typeBits that has all of `required`, preferring more of `preferred` and
// none of `avoided`. Returns UINT32_MAX when none has `required`.
uint32_t findMemoryType(const VkPhysicalDeviceMemoryProperties &memory, uint32_t typeBits,
                        VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred,
                        VkMemoryPropertyFlags avoided) {
  uint32_t best = UINT32_MAX;
  int bestScore = -1;
  for (uint32_t i = 0; i < memory.memoryTypeCount; ++i) {
    VkMemoryPropertyFlags flags = memory.memoryTypes[i].propertyFlags;
    if (!(typeBits & (1u << i)) || (flags & required) != required) continue;
    int score = 2 * std::popcount(flags & preferred) + (flags & avoided ? 0 : 1);
    if (score > bestScore) best = i, bestScore = score;
  }
  return best;
}

uint64_t alignUp(uint64_t value, uint64_t alignment) {
  return alignment > 1 ? (value + alignment - 1) / alignment * alignment : value;
}

} // namespace

uint64_t Context::checkedBufferSize(uint64_t bytes, const std::string &what) const {
  const Impl &s = *impl_;
  if (bytes > UINT64_MAX - 3)
    throw VulkanError("buffer '" + what + "' of " + std::to_string(bytes) + " bytes is too large");
  uint64_t size = bytes == 0 ? kEmptyBufferBytes : (bytes + 3) / 4 * 4;
  if (info_.deviceLocalBytes > 0 && size > info_.deviceLocalBytes) throw outOfMemory(what, size);
  if (size > s.maxBufferBytes)
    throw VulkanError("buffer '" + what + "' (" + mebibytes(size) +
                      ") is larger than the device's largest buffer (" + mebibytes(s.maxBufferBytes) + ")");
  if (size > s.maxAllocationBytes)
    throw VulkanError("buffer '" + what + "' (" + mebibytes(size) +
                      ") is larger than the device's largest allocation (" + mebibytes(s.maxAllocationBytes) +
                      ")");
  return size;
}

VulkanError Context::outOfMemory(const std::string &what, uint64_t bytes) const {
  return VulkanError("out of device memory allocating '" + what + "' (" + mebibytes(bytes) +
                     "); the device has " + mebibytes(info_.deviceLocalBytes));
}

VkMemoryRequirements Context::createHandle(Buffer &buffer, uint64_t size, const std::string &what,
                                           bool hostVisible) {
  Impl &s = *impl_;
  buffer.ctx_ = this;
  buffer.size_ = size;
  VkBufferCreateInfo bufferInfo{};
  bufferInfo.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bufferInfo.size = size;
  bufferInfo.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                     VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  if (bufferDeviceAddress_) bufferInfo.usage |= VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  bufferInfo.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  const uint32_t families[2] = {s.queueFamily, s.companionFamily};
  if (s.companionPool) { // a companion queue of another family reads the buffers too
    bufferInfo.sharingMode = VK_SHARING_MODE_CONCURRENT;
    bufferInfo.queueFamilyIndexCount = 2;
    bufferInfo.pQueueFamilyIndices = families;
  }
  VkExternalMemoryBufferCreateInfo external{};
  external.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO;
  external.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
  if (s.allocation == MemoryAllocation::Exportable && !hostVisible) bufferInfo.pNext = &external;
  VkResult result = vkCreateBuffer(s.device, &bufferInfo, nullptr, &buffer.buffer_);
  if (result == VK_ERROR_OUT_OF_DEVICE_MEMORY || result == VK_ERROR_OUT_OF_HOST_MEMORY)
    throw outOfMemory(what, size);
  check(result, "vkCreateBuffer for '" + what + "' (" + mebibytes(size) + ")");
  s.liveBuffers[buffer.buffer_] = &buffer;
  VkMemoryRequirements requirements{};
  vkGetBufferMemoryRequirements(s.device, buffer.buffer_, &requirements);
  return requirements;
}

VkDeviceMemory Context::allocateMemory(uint64_t bytes, uint32_t typeBits, bool hostVisible,
                                       const std::string &what, bool &mappable, VkBuffer dedicatedTo) {
  Impl &s = *impl_;
  // The structures ContextOptions::allocation chains in (host-visible buffers are allocated plainly).
  const MemoryAllocation way = hostVisible ? MemoryAllocation::Plain : s.allocation;
  VkMemoryAllocateFlagsInfo addressable{};
  addressable.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO;
  addressable.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryDedicatedAllocateInfo dedicated{};
  dedicated.sType = VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO;
  dedicated.buffer = dedicatedTo;
  VkExportMemoryAllocateInfo exported{};
  exported.sType = VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO;
  exported.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
  VkMemoryPriorityAllocateInfoEXT priority{};
  priority.sType = VK_STRUCTURE_TYPE_MEMORY_PRIORITY_ALLOCATE_INFO_EXT;
  priority.priority = 1.0f;
  const void *chain = nullptr;
  auto link = [&chain](auto &info) {
    info.pNext = const_cast<void *>(chain);
    chain = &info;
  };
  if (bufferDeviceAddress_) link(addressable);
  // Exported memory is dedicated: drivers may export nothing else (externalMemoryFeatures' dedicated-only).
  if (dedicates(way) && dedicatedTo) {
    link(dedicated);
    if (way == MemoryAllocation::Exportable) link(exported);
  }
  if (way == MemoryAllocation::Priority) link(priority);
  for (uint32_t type : memoryTypeCandidates(s.memory, typeBits, hostVisible && !s.forceStaging)) {
    VkMemoryAllocateInfo allocateInfo{};
    allocateInfo.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    allocateInfo.allocationSize = bytes;
    allocateInfo.memoryTypeIndex = type;
    allocateInfo.pNext = chain;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    VkResult result = vkAllocateMemory(s.device, &allocateInfo, nullptr, &memory);
    if (result == VK_ERROR_OUT_OF_DEVICE_MEMORY || result == VK_ERROR_OUT_OF_HOST_MEMORY) continue;
    check(result, "vkAllocateMemory for '" + what + "' (" + mebibytes(bytes) + ")");
    mappable = (s.memory.memoryTypes[type].propertyFlags & kMappable) == kMappable && !s.forceStaging;
    return memory;
  }
  throw outOfMemory(what, bytes);
}

Buffer Context::createBuffer(uint64_t bytes, const std::string &what, bool hostVisible) {
  Impl &s = *impl_;
  uint64_t size = checkedBufferSize(bytes, what);
  // Filled in step by step so that its destructor cleans up whatever was made if a later step throws.
  Buffer buffer;
  VkMemoryRequirements requirements = createHandle(buffer, size, what, hostVisible);
  bool mappable = false;
  buffer.memory_ = allocateMemory(requirements.size, requirements.memoryTypeBits, hostVisible, what, mappable,
                                  buffer.buffer_);
  check(vkBindBufferMemory(s.device, buffer.buffer_, buffer.memory_, 0),
        "vkBindBufferMemory for '" + what + "'");
  if (mappable)
    check(vkMapMemory(s.device, buffer.memory_, 0, VK_WHOLE_SIZE, 0, &buffer.mapped_),
          "vkMapMemory for '" + what + "'");
  return buffer; // the move constructor re-registers the new address in liveBuffers
}

std::vector<Buffer> Context::createBuffers(std::span<const BufferRequest> requests, uint64_t blockBytes) {
  Impl &s = *impl_;
  std::vector<Buffer> buffers(requests.size());
  if (blockBytes == 0) {
    for (size_t i = 0; i < requests.size(); ++i)
      buffers[i] = createBuffer(requests[i].bytes, requests[i].what);
    return buffers;
  }
  blockBytes = std::min(blockBytes, s.maxAllocationBytes);
  std::vector<VkMemoryRequirements> requirements(requests.size());
  for (size_t i = 0; i < requests.size(); ++i)
    requirements[i] = createHandle(buffers[i], checkedBufferSize(requests[i].bytes, requests[i].what),
                                   requests[i].what, false);
  // Blocks of consecutive buffers: each takes buffers while they fit (and share a memory type); where
  // allocations are dedicated, a large buffer is a block of its own, and its allocation dedicated to it,
  // unless the large buffers would take more than half of the allocations the device allows.
  const size_t large = static_cast<size_t>(
      std::count_if(requirements.begin(), requirements.end(),
                    [](const VkMemoryRequirements &r) { return r.size >= kOwnAllocationBytes; }));
  const bool dedicating = dedicates(s.allocation) && large <= s.maxAllocations / 2;
  auto alone = [&](size_t i) { return dedicating && requirements[i].size >= kOwnAllocationBytes; };
  for (size_t first = 0; first < buffers.size();) {
    std::vector<uint64_t> offsets;
    uint64_t end = 0;
    uint32_t typeBits = ~0u;
    size_t last = first;
    for (; last < buffers.size(); ++last) {
      uint64_t offset = alignUp(end, requirements[last].alignment);
      uint32_t bits = typeBits & requirements[last].memoryTypeBits;
      if (last > first &&
          (bits == 0 || offset + requirements[last].size > blockBytes || alone(first) || alone(last)))
        break;
      typeBits = bits;
      offsets.push_back(offset);
      end = offset + requirements[last].size;
    }
    std::string what =
        last - first == 1 ? requests[first].what : requests[first].what + " to " + requests[last - 1].what;
    bool mappable = false;
    // A block of one buffer is that buffer's alone, and may be dedicated to it.
    VkDeviceMemory memory = allocateMemory(end, typeBits, false, what, mappable,
                                           last - first == 1 ? buffers[first].buffer_ : VK_NULL_HANDLE);
    auto shared = std::make_shared<const Buffer::SharedMemory>(s.device, memory);
    void *mapped = nullptr;
    if (mappable)
      check(vkMapMemory(s.device, memory, 0, VK_WHOLE_SIZE, 0, &mapped), "vkMapMemory for '" + what + "'");
    for (size_t i = first; i < last; ++i) {
      Buffer &buffer = buffers[i];
      buffer.sharedMemory_ = shared;
      check(vkBindBufferMemory(s.device, buffer.buffer_, memory, offsets[i - first]),
            "vkBindBufferMemory for '" + requests[i].what + "'");
      if (mapped) buffer.mapped_ = static_cast<char *>(mapped) + offsets[i - first];
    }
    first = last;
  }
  return buffers;
}

// ---------------------------------------------------------------------------------------------------------
// Copies

// The staging buffer that copies to and from memory the host cannot map go through.
void Context::Impl::destroyStaging() {
  if (staging) vkDestroyBuffer(device, staging, nullptr);
  if (stagingMemory) vkFreeMemory(device, stagingMemory, nullptr); // unmaps too
  staging = VK_NULL_HANDLE;
  stagingMemory = VK_NULL_HANDLE;
  stagingMapped = nullptr;
  stagingBytes = 0;
}

void Context::Impl::ensureStaging(uint64_t bytes) {
  bytes = std::min(bytes, stagingChunkBytes);
  if (stagingBytes >= bytes) return;
  destroyStaging();
  VkBufferCreateInfo bufferInfo{};
  bufferInfo.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bufferInfo.size = bytes;
  bufferInfo.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bufferInfo.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(vkCreateBuffer(device, &bufferInfo, nullptr, &staging), "vkCreateBuffer (staging)");
  VkMemoryRequirements requirements{};
  vkGetBufferMemoryRequirements(device, staging, &requirements);
  // Cached memory makes downloads fast to read; device-local host-visible memory (a PCIe BAR) is small.
  uint32_t type = findMemoryType(memory, requirements.memoryTypeBits,
                                 VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                                 VK_MEMORY_PROPERTY_HOST_CACHED_BIT, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (type == UINT32_MAX) throw VulkanError("the device has no host-visible coherent memory for staging");
  VkMemoryAllocateInfo allocateInfo{};
  allocateInfo.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  allocateInfo.allocationSize = requirements.size;
  allocateInfo.memoryTypeIndex = type;
  check(vkAllocateMemory(device, &allocateInfo, nullptr, &stagingMemory),
        "vkAllocateMemory (staging, " + mebibytes(bytes) + ")");
  check(vkBindBufferMemory(device, staging, stagingMemory, 0), "vkBindBufferMemory (staging)");
  check(vkMapMemory(device, stagingMemory, 0, VK_WHOLE_SIZE, 0, &stagingMapped), "vkMapMemory (staging)");
  stagingBytes = bytes;
}

namespace detail {

void checkCopyRange(const char *operation, const Buffer &buffer, uint64_t offset, uint64_t bytes,
                    const void *data) {
  if (!buffer.handle())
    throw VulkanError(std::string(operation) + ": the buffer is empty (moved from or freed)");
  if (offset > buffer.size() || bytes > buffer.size() - offset)
    throw VulkanError(std::string(operation) + " of " + std::to_string(bytes) + " bytes at offset " +
                      std::to_string(offset) + " is outside the buffer of " + std::to_string(buffer.size()) +
                      " bytes");
  if (bytes > 0 && !data) throw VulkanError(std::string(operation) + ": no host memory given");
}

} // namespace detail

void Context::upload(Buffer &dst, uint64_t offset, const void *data, uint64_t bytes) {
  checkCopyRange("upload", dst, offset, bytes, data);
  if (bytes == 0) return;
  UploadStream stream(*this, bytes);
  stream.write(dst, offset, bytes, 1, [data](uint64_t at, uint64_t count, void *into) {
    support::copyInParallel(into, static_cast<const char *>(data) + at, count);
  });
  stream.finish();
}

void Context::download(const Buffer &src, uint64_t offset, void *data, uint64_t bytes) {
  checkCopyRange("download", src, offset, bytes, data);
  if (src.ctx_ != this) throw VulkanError("download: the buffer belongs to another context");
  if (bytes == 0) return;
  if (impl_->uploadStreamOpen) throw VulkanError("download: an upload stream of this context is open");
  // submitAndWait ends every command buffer with a barrier to the host, so mapped memory is up to date.
  if (src.mapped_) {
    std::memcpy(data, static_cast<const char *>(src.mapped_) + offset, bytes);
    return;
  }
  Impl &s = *impl_;
  s.ensureStaging(bytes);
  char *destination = static_cast<char *>(data);
  // A download longer than the staging buffer alternates between its halves: the device copies the next
  // chunk into one while the host copies the last one out of the other.
  const uint64_t chunkBytes = detail::copyChunkBytes(s.stagingBytes, bytes);
  VkCommandBuffer inFlight[2] = {VK_NULL_HANDLE, VK_NULL_HANDLE};
  auto idle = [&](int half) { s.recycle(std::exchange(inFlight[half], VK_NULL_HANDLE)); };
  auto copyChunk = [&](uint64_t done, int half) {
    inFlight[half] = beginCommands();
    VkCommandBuffer cmd = inFlight[half];
    allComputeAndTransferBarrier(cmd); // earlier dispatches writing src finish first
    VkBufferCopy region{offset + done, half * chunkBytes, std::min(bytes - done, chunkBytes)};
    vkCmdCopyBuffer(cmd, src.buffer_, s.staging, 1, &region);
    barrierToHost(cmd);
    s.submitCopy(cmd, half);
  };
  try {
    copyChunk(0, 0);
    int half = 0;
    for (uint64_t done = 0; done < bytes; done += chunkBytes, half ^= 1) {
      if (done + chunkBytes < bytes) copyChunk(done + chunkBytes, half ^ 1); // its half was copied out
      s.waitForCopy(half);
      idle(half);
      std::memcpy(destination + done, static_cast<const char *>(s.stagingMapped) + half * chunkBytes,
                  std::min(bytes - done, chunkBytes));
    }
    s.recycleSubmitted(); // the first copy's barrier waited for them
  } catch (...) {
    vkQueueWaitIdle(s.queue); // nothing may still write the staging buffer when it is reused or freed
    idle(0);
    idle(1);
    throw;
  }
}

void Context::fill(Buffer &dst, uint32_t value) {
  if (!dst.buffer_) throw VulkanError("fill: the buffer is empty (moved from or freed)");
  if (dst.ctx_ != this) throw VulkanError("fill: the buffer belongs to another context");
  VkCommandBuffer cmd = beginCommands();
  allComputeAndTransferBarrier(cmd);
  vkCmdFillBuffer(cmd, dst.buffer_, 0, VK_WHOLE_SIZE, value); // size() is a multiple of 4: all of it
  allComputeAndTransferBarrier(cmd);
  submitAndWait(cmd);
}

} // namespace gerbil::vk
