// Uploads through the staging buffer in a stream: its two halves alternate, the host filling one while the
// device copies the other out, and a half holds as many pieces as fit (a model's small norm weights share
// one copy). Each piece's bytes are written by a callback straight into the staging buffer, so that a weight
// converted to its device dtype is converted there instead of into memory of its own and then copied.
#pragma once

#include "runtime/vulkan/Device.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace gerbil::vk {

// Writes bytes [at, at + count) of a piece into `into` (host memory the device copies from). It may throw:
// the stream then copies nothing more.
using UploadFill = std::function<void(uint64_t at, uint64_t count, void *into)>;

class UploadStream {
public:
  // expectedBytes sizes the staging buffer (up to ContextOptions::stagingChunkBytes). One stream a context
  // at a time; while it is open, the context's upload and download throw.
  UploadStream(Context &context, uint64_t expectedBytes);
  // Waits for the copies in flight; what was filled but not yet copied is dropped (finish() copies it).
  ~UploadStream();
  UploadStream(const UploadStream &) = delete;
  UploadStream &operator=(const UploadStream &) = delete;

  // Queues bytes [offset, offset + bytes) of dst, filled in runs of whole `granule`s (the last run may be
  // shorter where bytes is no multiple of it); a granule larger than granuleLimit() is refused. dst must
  // outlive finish() (one freed before its copy is submitted is an error). A host-visible dst is filled in
  // place, at once.
  void write(Buffer &dst, uint64_t offset, uint64_t bytes, uint64_t granule, const UploadFill &fill);
  // The largest granule write takes: half of the staging buffer (all of it where one copy holds the
  // expected bytes).
  uint64_t granuleLimit() const { return halfBytes_; }
  // Copies what is queued and waits until every copy is done; the stream may be written again after.
  void finish();
  // Bytes written whose copies are done (pieces of host-visible buffers: at once), for progress reports.
  uint64_t copiedBytes() const { return copiedBytes_; }

private:
  struct Region {
    VkBuffer dst;
    VkBufferCopy copy;
  };
  void submitHalf();          // copies the current half's regions out and moves to the other half
  void waitForHalf(int half); // its copy done, its command buffer idle again
  Context &context_;
  uint64_t stagingBytes_ = 0;
  uint64_t halfBytes_ = 0;
  int halves_ = 1;
  int half_ = 0;      // the half being filled
  uint64_t used_ = 0; // bytes of it filled
  uint64_t inFlightBytes_[2] = {0, 0}; // the bytes each half's submitted copy writes
  uint64_t copiedBytes_ = 0;
  std::vector<Region> regions_;
  VkCommandBuffer inFlight_[2] = {VK_NULL_HANDLE, VK_NULL_HANDLE};
};

} // namespace gerbil::vk
