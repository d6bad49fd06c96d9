#include "runtime/vulkan/UploadStream.h"
#include "runtime/vulkan/ContextImpl.h"

#include <algorithm>
#include <utility>

namespace gerbil::vk {

using detail::allComputeAndTransferBarrier;
using detail::check;

UploadStream::UploadStream(Context &context, uint64_t expectedBytes) : context_(context) {
  Context::Impl &s = *context_.impl_;
  if (s.uploadStreamOpen) throw VulkanError("upload: another upload stream of this context is still open");
  // The staging buffer ensureStaging will give it, allocated at the first staged piece (a device whose
  // buffers are all mapped needs none). Where one copy holds everything the halves would only halve it; else
  // the host fills one half while the device copies the other out.
  stagingBytes_ =
      std::max(s.stagingBytes, std::min(std::max<uint64_t>(expectedBytes, 16), s.stagingChunkBytes));
  halfBytes_ = detail::copyChunkBytes(stagingBytes_, expectedBytes);
  halves_ = halfBytes_ == stagingBytes_ ? 1 : 2;
  s.uploadStreamOpen = true;
}

UploadStream::~UploadStream() {
  Context::Impl &s = *context_.impl_;
  if (inFlight_[0] || inFlight_[1]) {
    vkQueueWaitIdle(s.queue); // nothing may still read the staging buffer when it is reused or freed
    for (VkCommandBuffer &slot : inFlight_) s.recycle(std::exchange(slot, VK_NULL_HANDLE));
  }
  s.uploadStreamOpen = false;
}

void UploadStream::write(Buffer &dst, uint64_t offset, uint64_t bytes, uint64_t granule,
                         const UploadFill &fill) {
  detail::checkCopyRange("upload", dst, offset, bytes, fill ? &fill : nullptr);
  if (dst.ctx_ != &context_) throw VulkanError("upload: the buffer belongs to another context");
  if (bytes == 0) return;
  // Host writes before vkQueueSubmit are visible to the device without a barrier, so mapped memory is simply
  // written (what may be in flight: the context's waited-for submissions, and this stream's copies, which
  // write staged buffers only).
  if (dst.mapped_) {
    fill(0, bytes, static_cast<char *>(dst.mapped_) + offset);
    copiedBytes_ += bytes;
    return;
  }
  granule = std::max<uint64_t>(granule, 1);
  if (granule > halfBytes_)
    throw VulkanError("upload: runs of " + std::to_string(granule) +
                      " bytes do not fit the staging buffer's " + std::to_string(halfBytes_) +
                      "-byte halves");
  Context::Impl &s = *context_.impl_;
  s.ensureStaging(stagingBytes_); // nothing in flight reads a staging buffer it would replace
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t left = bytes - done, room = halfBytes_ - used_;
    const uint64_t run = left <= room ? left : room / granule * granule;
    if (run == 0) {
      submitHalf();
      continue;
    }
    const uint64_t at = uint64_t(half_) * halfBytes_ + used_;
    fill(done, run, static_cast<char *>(s.stagingMapped) + at);
    regions_.push_back({dst.buffer_, VkBufferCopy{at, offset + done, run}});
    done += run;
    used_ = std::min(halfBytes_, (used_ + run + 15) / 16 * 16); // the next piece starts 16-byte aligned
  }
}

void UploadStream::submitHalf() {
  if (regions_.empty()) return;
  Context::Impl &s = *context_.impl_;
  for (const Region &r : regions_) // a buffer freed after its piece was queued: an error, not a crash
    if (!s.liveBuffers.count(r.dst))
      throw VulkanError("upload: a buffer was freed before the stream copied into it");
  VkCommandBuffer cmd = context_.beginCommands();
  try {
    allComputeAndTransferBarrier(cmd); // earlier dispatches reading or writing the buffers finish first
    for (const Region &r : regions_) vkCmdCopyBuffer(cmd, s.staging, r.dst, 1, &r.copy);
    allComputeAndTransferBarrier(cmd); // later dispatches see the copies
    s.submitCopy(cmd, half_);
  } catch (...) {
    s.recycle(cmd);
    throw;
  }
  inFlight_[half_] = cmd;
  inFlightBytes_[half_] = 0;
  for (const Region &r : regions_) inFlightBytes_[half_] += r.copy.size;
  regions_.clear();
  half_ = (half_ + 1) % halves_;
  used_ = 0;
  waitForHalf(half_); // its earlier copy has read it out
}

void UploadStream::waitForHalf(int half) {
  VkCommandBuffer cmd = inFlight_[half];
  if (!cmd) return;
  Context::Impl &s = *context_.impl_;
  s.waitForCopy(half);
  inFlight_[half] = VK_NULL_HANDLE;
  copiedBytes_ += std::exchange(inFlightBytes_[half], 0);
  s.recycle(cmd);
}

void UploadStream::finish() {
  submitHalf();
  waitForHalf(0);
  waitForHalf(1);
  context_.impl_->recycleSubmitted(); // the first copy's barrier waited for them
}

} // namespace gerbil::vk
