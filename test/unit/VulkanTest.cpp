// Tests of the Vulkan compute layer. They run on whatever driver the loader finds (lavapipe in CI, via
// VK_DRIVER_FILES set by ctest) and skip, not fail, when there is no Vulkan driver at all.
#include "runtime/vulkan/Device.h"
#include "runtime/vulkan/PipelineStatistics.h"
#include "runtime/vulkan/UploadStream.h"

#include "double_plus_start.spv.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <numeric>

using namespace gerbil::vk;

namespace {

const std::vector<uint32_t> kDoublePlusStart(std::begin(kDoublePlusStartSpirv),
                                             std::end(kDoublePlusStartSpirv));
constexpr uint32_t kWorkgroupSize = 64; // local_size_x of double_plus_start.comp

// The shader's push constant block.
struct DoublePlusStartParams {
  uint32_t tokens;
  uint32_t start;
};

uint32_t groupsFor(uint32_t elements) {
  return (elements + kWorkgroupSize - 1) / kWorkgroupSize;
}

// Declares `name` as a Context made with `options`, or skips the test when there is no Vulkan device.
#define CONTEXT_OR_SKIP(name, options)                                                                       \
  std::unique_ptr<Context> name;                                                                             \
  try {                                                                                                      \
    name = std::make_unique<Context>(options);                                                               \
  } catch (const NoDeviceError &e) {                                                                         \
    GTEST_SKIP() << e.what();                                                                                \
  }

std::vector<float> ramp(size_t n) {
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = float(i % 4099) * 0.5f - 7.0f;
  return values;
}

std::vector<uint8_t> bytePattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> bytes(n);
  uint32_t state = seed;
  for (auto &b : bytes) {
    state = state * 1664525u + 1013904223u;
    b = uint8_t(state >> 24);
  }
  return bytes;
}

// Copies through the staging buffer (the only way on a discrete GPU), forced on, in chunks of chunkBytes.
ContextOptions stagedOptions(uint64_t chunkBytes = ContextOptions{}.stagingChunkBytes) {
  ContextOptions options;
  options.forceStaging = true;
  options.stagingChunkBytes = chunkBytes;
  return options;
}

// Records one dispatch of double_plus_start over `tokens` elements: out = 2 * in + start.
void recordDoublePlusStart(Context &ctx, VkCommandBuffer cmd, const Pipeline &pipeline, VkDescriptorSet set,
                           uint32_t tokens, uint32_t start) {
  DoublePlusStartParams params{tokens, start};
  ctx.dispatch(cmd, pipeline, set, &params, sizeof params, groupsFor(tokens), 1, 1);
}

// Uploads, dispatches twice with a barrier, fills, times and downloads: the work a validation run checks.
void runWorkload(Context &ctx) {
  constexpr uint32_t n = 10000;
  Pipeline pipeline =
      ctx.createPipeline(kDoublePlusStart, 2, sizeof(DoublePlusStartParams), "double_plus_start");
  Buffer x = ctx.createBuffer(n * sizeof(float), "x");
  Buffer y = ctx.createBuffer(n * sizeof(float), "y");
  Buffer z = ctx.createBuffer(n * sizeof(float), "z");
  std::vector<float> input = ramp(n);
  ctx.upload(x, 0, input.data(), n * sizeof(float));
  ctx.fill(z, 0);
  VkDescriptorSet first = ctx.createDescriptorSet(pipeline, {{x.handle(), 0, 0}, {y.handle(), 0, 0}});
  VkDescriptorSet second = ctx.createDescriptorSet(pipeline, {{y.handle(), 0, 0}, {z.handle(), 0, 0}});
  VkCommandBuffer cmd = ctx.beginCommands();
  bool timed = ctx.info().timestamps;
  if (timed) {
    ctx.resetTimestamps(cmd, 2);
    ctx.writeTimestamp(cmd, 0);
  }
  recordDoublePlusStart(ctx, cmd, pipeline, first, n, 1);
  ctx.computeBarrier(cmd);
  recordDoublePlusStart(ctx, cmd, pipeline, second, n, 5);
  if (timed) ctx.writeTimestamp(cmd, 1);
  ctx.submitAndWait(cmd);
  if (timed) ctx.readTimestamps(2);
  std::vector<float> output(n);
  ctx.download(z, 0, output.data(), n * sizeof(float));
  for (uint32_t i = 0; i < n; ++i)
    ASSERT_EQ(output[i], 2.0f * (2.0f * input[i] + 1.0f) + 5.0f) << "element " << i;
  ctx.resetDescriptorSets();
}

} // namespace

TEST(VulkanDevices, ListFindsAtLeastOneDevice) {
  std::vector<DeviceInfo> devices;
  try {
    devices = Context::listDevices();
  } catch (const NoDeviceError &e) {
    GTEST_SKIP() << e.what();
  }
  ASSERT_GE(devices.size(), 1u);
  for (size_t i = 0; i < devices.size(); ++i) {
    const DeviceInfo &d = devices[i];
    EXPECT_EQ(d.index, i);
    EXPECT_FALSE(d.name.empty());
    EXPECT_TRUE(d.type == "discrete" || d.type == "integrated" || d.type == "virtual" || d.type == "cpu" ||
                d.type == "other")
        << d.type;
    if (d.apiVersion < VK_API_VERSION_1_2) continue; // listed, but no Context will use it
    EXPECT_FALSE(d.driver.empty());
    EXPECT_GT(d.subgroupSize, 0u);
    EXPECT_GT(d.deviceLocalBytes, 0u);
    EXPECT_GT(d.maxStorageBufferRange, 0u);
    EXPECT_GT(d.maxSharedMemoryBytes, 0u);
    EXPECT_GT(d.maxWorkgroupCount[0], 0u);
    if (d.timestamps) {
      EXPECT_GT(d.timestampPeriodNs, 0.0);
    }
  }
}

TEST(VulkanDevices, ContextDescribesItsDevice) {
  CONTEXT_OR_SKIP(ctx, ContextOptions{});
  EXPECT_NE(ctx->device(), VkDevice(VK_NULL_HANDLE));
  EXPECT_FALSE(ctx->info().name.empty());
  EXPECT_GE(ctx->info().apiVersion, uint32_t(VK_API_VERSION_1_2));
  ContextOptions noHalf;
  noHalf.enableFloat16 = false;
  CONTEXT_OR_SKIP(withoutHalf, noHalf);
  EXPECT_FALSE(withoutHalf->info().shaderFloat16);
  EXPECT_FALSE(withoutHalf->info().storageBuffer16BitAccess);
}

TEST(VulkanDevices, WrongDeviceIndexListsTheDevices) {
  std::vector<DeviceInfo> devices;
  try {
    devices = Context::listDevices();
  } catch (const NoDeviceError &e) {
    GTEST_SKIP() << e.what();
  }
  for (int index : {int(devices.size()) + 2, -5}) {
    ContextOptions options;
    options.deviceIndex = index;
    try {
      Context ctx(options);
      FAIL() << "device " << index << " was accepted";
    } catch (const VulkanError &e) {
      std::string message = e.what();
      EXPECT_NE(message.find("device " + std::to_string(index) + " does not exist; " +
                             std::to_string(devices.size()) + " Vulkan device"),
                std::string::npos)
          << message;
      EXPECT_NE(message.find("0: " + devices[0].name), std::string::npos) << message;
    }
  }
}

TEST(VulkanBuffers, RoundTripOneMebibyte) {
  CONTEXT_OR_SKIP(ctx, ContextOptions{});
  constexpr size_t bytes = 1 << 20;
  Buffer buffer = ctx->createBuffer(bytes, "one MiB");
  EXPECT_EQ(buffer.size(), bytes);
  std::vector<uint8_t> sent = bytePattern(bytes, 1), received(bytes);
  ctx->upload(buffer, 0, sent.data(), bytes);
  ctx->download(buffer, 0, received.data(), bytes);
  EXPECT_EQ(sent, received);
}

// The staging path (the only one on a discrete GPU), forced on here, with chunks small enough to cross.
TEST(VulkanBuffers, StagedRoundTripAcrossChunks) {
  CONTEXT_OR_SKIP(ctx, stagedOptions(64 << 10));
  constexpr size_t bytes = (300 << 10) + 8;
  Buffer buffer = ctx->createBuffer(bytes, "staged");
  std::vector<uint8_t> sent = bytePattern(bytes, 2), received(bytes);
  ctx->upload(buffer, 0, sent.data(), bytes);
  ctx->download(buffer, 0, received.data(), bytes);
  EXPECT_EQ(sent, received);

  // A partial overwrite at an odd offset, read back by an unaligned window straddling chunks.
  std::vector<uint8_t> patch = bytePattern(130 << 10, 3);
  constexpr size_t patchAt = 70001;
  ctx->upload(buffer, patchAt, patch.data(), patch.size());
  std::copy(patch.begin(), patch.end(), sent.begin() + patchAt);
  std::vector<uint8_t> window(200 << 10);
  constexpr size_t windowAt = 50003;
  ctx->download(buffer, windowAt, window.data(), window.size());
  EXPECT_TRUE(std::equal(window.begin(), window.end(), sent.begin() + windowAt));
}

TEST(VulkanBuffers, StagedRoundTripLargerThanTheDefaultChunk) {
  const ContextOptions options = stagedOptions(); // default 64 MiB chunks
  CONTEXT_OR_SKIP(ctx, options);
  const size_t bytes = options.stagingChunkBytes + (1 << 20) + 12;
  Buffer buffer = ctx->createBuffer(bytes, "larger than a chunk");
  std::vector<uint8_t> sent = bytePattern(bytes, 4), received(bytes);
  ctx->upload(buffer, 0, sent.data(), bytes);
  ctx->download(buffer, 0, received.data(), bytes);
  EXPECT_TRUE(sent == received);
}

// An UploadStream packs pieces of several buffers into each half of the staging buffer, fills them in runs
// of whole granules, and alternates between the halves across pieces. What it counts as copied (for the
// loader's progress) trails what was written until finish.
TEST(VulkanBuffers, UploadStreamPacksPiecesIntoHalves) {
  CONTEXT_OR_SKIP(ctx, stagedOptions(16 << 10)); // halves of 8 KiB
  std::vector<Buffer> buffers;
  std::vector<std::vector<uint8_t>> sent;
  // Small pieces that share a half, pieces of odd sizes, and one of many halves.
  for (size_t bytes : {100u, 36u, 3000u, 5u, 40000u, 8192u, 777u}) {
    buffers.push_back(ctx->createBuffer(bytes, "piece"));
    sent.push_back(bytePattern(bytes, uint32_t(bytes)));
  }
  {
    UploadStream stream(*ctx, 1 << 20);
    EXPECT_EQ(stream.granuleLimit(), 8u << 10);
    EXPECT_THROW(ctx->upload(buffers[0], 0, sent[0].data(), 4), VulkanError); // one stream at a time
    std::vector<uint8_t> scratch(16);
    EXPECT_THROW(ctx->download(buffers[0], 0, scratch.data(), 4), VulkanError);
    uint64_t written = 0, copied = 0;
    for (size_t i = 0; i < buffers.size(); ++i) {
      const uint64_t granule = i % 2 ? 1 : 12;
      stream.write(buffers[i], 0, sent[i].size(), granule,
                   [&, i, granule](uint64_t at, uint64_t count, void *into) {
                     // whole granules but for the piece's tail
                     EXPECT_TRUE(count % granule == 0 || at + count == sent[i].size()) << "piece " << i;
                     std::memcpy(into, sent[i].data() + at, count);
                   });
      written += sent[i].size();
      EXPECT_GE(stream.copiedBytes(), copied) << "piece " << i;
      EXPECT_LE(stream.copiedBytes(), written) << "piece " << i;
      copied = stream.copiedBytes();
    }
    // The 40000-byte piece crossed several halves, each copied out before it was refilled; the last half
    // is still queued.
    EXPECT_GT(copied, 0u);
    EXPECT_LT(copied, written);
    EXPECT_THROW(stream.write(buffers[4], 0, 16, (8 << 10) + 1, [](uint64_t, uint64_t, void *) {}),
                 VulkanError);
    stream.finish();
    EXPECT_EQ(stream.copiedBytes(), written);
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    std::vector<uint8_t> received(sent[i].size());
    ctx->download(buffers[i], 0, received.data(), received.size());
    EXPECT_EQ(received, sent[i]) << "piece " << i;
  }
}

// Pieces of host-visible buffers are written in place and count as copied at once (lavapipe's buffers all
// are; on a device whose buffers are not, they count when their copies are done).
TEST(VulkanBuffers, UploadStreamCountsMappedPiecesAtOnce) {
  CONTEXT_OR_SKIP(ctx, ContextOptions{});
  Buffer buffer = ctx->createBuffer(3000, "mapped");
  std::vector<uint8_t> sent = bytePattern(3000, 21);
  UploadStream stream(*ctx, sent.size());
  stream.write(buffer, 0, sent.size(), 1,
               [&](uint64_t at, uint64_t count, void *into) { std::memcpy(into, sent.data() + at, count); });
  if (buffer.mappedData()) {
    EXPECT_EQ(stream.copiedBytes(), sent.size());
  }
  stream.finish();
  EXPECT_EQ(stream.copiedBytes(), sent.size());
}

// A stream told to expect fewer bytes than it is given (one copy's worth: a single half) still copies them
// all, waiting for each copy before it refills the half.
TEST(VulkanBuffers, UploadStreamTakesMoreThanItExpected) {
  CONTEXT_OR_SKIP(ctx, stagedOptions());
  Buffer buffer = ctx->createBuffer(5000, "more");
  std::vector<uint8_t> sent = bytePattern(5000, 13), received(5000);
  {
    UploadStream stream(*ctx, 160);
    EXPECT_EQ(stream.granuleLimit(), 160u);
    stream.write(buffer, 0, sent.size(), 8, [&](uint64_t at, uint64_t count, void *into) {
      std::memcpy(into, sent.data() + at, count);
    });
    stream.finish();
  }
  ctx->download(buffer, 0, received.data(), received.size());
  EXPECT_EQ(received, sent);
}

// A buffer freed after its piece was queued, before the copy: the stream refuses to copy into it.
TEST(VulkanBuffers, UploadStreamRefusesAFreedBuffer) {
  CONTEXT_OR_SKIP(ctx, stagedOptions(16 << 10));
  std::vector<uint8_t> sent = bytePattern(100, 3);
  auto copy = [&](uint64_t at, uint64_t count, void *into) { std::memcpy(into, sent.data() + at, count); };
  UploadStream stream(*ctx, 1 << 20);
  {
    Buffer gone = ctx->createBuffer(100, "gone");
    stream.write(gone, 0, sent.size(), 1, copy);
  }
  EXPECT_THROW(stream.finish(), VulkanError);
}

// A fill that throws (a weight that does not convert) leaves the context usable: the copies in flight are
// waited for, the rest dropped, and the next upload works.
TEST(VulkanBuffers, UploadStreamStopsCleanlyWhenAFillThrows) {
  CONTEXT_OR_SKIP(ctx, stagedOptions(4 << 10));
  Buffer buffer = ctx->createBuffer(20000, "weights");
  std::vector<uint8_t> sent = bytePattern(20000, 9);
  try {
    UploadStream stream(*ctx, sent.size());
    stream.write(buffer, 0, sent.size(), 1, [&](uint64_t at, uint64_t count, void *into) {
      if (at > 9000) throw std::runtime_error("tensor 'w' holds inf");
      std::memcpy(into, sent.data() + at, count);
    });
    ADD_FAILURE() << "the fill's error was lost";
  } catch (const std::runtime_error &e) {
    EXPECT_STREQ(e.what(), "tensor 'w' holds inf");
  }
  ctx->upload(buffer, 0, sent.data(), sent.size());
  std::vector<uint8_t> received(sent.size());
  ctx->download(buffer, 0, received.data(), received.size());
  EXPECT_EQ(received, sent);
}

TEST(VulkanBuffers, SizesAndBounds) {
  CONTEXT_OR_SKIP(ctx, ContextOptions{});
  EXPECT_EQ(ctx->createBuffer(0, "empty").size(), 16u);
  EXPECT_EQ(ctx->createBuffer(10, "odd").size(), 12u); // rounded up so fill covers every byte
  Buffer buffer = ctx->createBuffer(64, "small");
  std::vector<uint8_t> data(64);
  EXPECT_THROW(ctx->upload(buffer, 60, data.data(), 8), VulkanError);
  EXPECT_THROW(ctx->download(buffer, 65, data.data(), 0), VulkanError);
  EXPECT_NO_THROW(ctx->upload(buffer, 64, data.data(), 0));
}

TEST(VulkanBuffers, OutOfMemoryNamesTheBufferAndSize) {
  CONTEXT_OR_SKIP(ctx, ContextOptions{});
  try {
    ctx->createBuffer(1ull << 40, "weights");
    FAIL() << "a 1 TiB buffer was allocated";
  } catch (const VulkanError &e) {
    EXPECT_NE(std::string(e.what()).find(
                  "out of device memory allocating 'weights' (1048576.0 MiB); the device has"),
              std::string::npos)
        << e.what();
  }
}

TEST(VulkanBuffers, MoveTransfersOwnership) {
  CONTEXT_OR_SKIP(ctx, ContextOptions{});
  Buffer a = ctx->createBuffer(256, "a");
  VkBuffer handle = a.handle();
  Buffer b = std::move(a);
  EXPECT_EQ(a.handle(), VkBuffer(VK_NULL_HANDLE));
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(b.handle(), handle);
  Buffer c = ctx->createBuffer(16, "c");
  c = std::move(b); // frees c's own buffer first
  EXPECT_EQ(c.handle(), handle);
  EXPECT_EQ(c.size(), 256u);
  std::vector<uint8_t> sent = bytePattern(256, 5), received(256);
  ctx->upload(c, 0, sent.data(), 256);
  ctx->download(c, 0, received.data(), 256);
  EXPECT_EQ(sent, received);
  EXPECT_THROW(ctx->upload(a, 0, sent.data(), 4), VulkanError);

  // A buffer that outlives its context is freed with it and left empty, not left dangling.
  Buffer survivor = ctx->createBuffer(64, "survivor");
  ctx.reset();
  EXPECT_EQ(survivor.handle(), VkBuffer(VK_NULL_HANDLE));
}

// Buffers sharing blocks (the weights' way): each keeps its own bytes, through mapped memory and through
// staging, dispatches read and write them at their offsets, and a block lives as long as any of its buffers.
TEST(VulkanBuffers, BuffersInSharedBlocksKeepTheirOwnBytes) {
  for (bool staged : {false, true}) {
    ContextOptions options;
    options.forceStaging = staged;
    options.stagingChunkBytes = 64 << 10;
    CONTEXT_OR_SKIP(ctx, options);
    // 128 KiB blocks: the first three share one, 300000 bytes get one of their own, the last two share one.
    const std::vector<BufferRequest> requests = {{1000, "a"},   {0, "empty"}, {70000, "b"},
                                                 {300000, "c"}, {4000, "x"},  {4000, "y"}};
    std::vector<Buffer> buffers = ctx->createBuffers(requests, 128 << 10);
    ASSERT_EQ(buffers.size(), requests.size());
    EXPECT_EQ(buffers[1].size(), 16u);
    if (buffers[0].mappedData() && buffers[2].mappedData()) { // one mapping a block: they lie close
      auto gap = static_cast<char *>(buffers[2].mappedData()) - static_cast<char *>(buffers[0].mappedData());
      EXPECT_GE(gap, 1016);
      EXPECT_LT(gap, 128 << 10);
    }
    std::vector<std::vector<uint8_t>> sent;
    for (size_t i = 0; i < buffers.size(); ++i) {
      sent.push_back(bytePattern(buffers[i].size(), uint32_t(10 + i)));
      ctx->upload(buffers[i], 0, sent[i].data(), sent[i].size());
    }
    for (size_t i = 0; i < buffers.size(); ++i) {
      std::vector<uint8_t> received(buffers[i].size());
      ctx->download(buffers[i], 0, received.data(), received.size());
      EXPECT_EQ(received, sent[i]) << requests[i].what << (staged ? ", staged" : "");
    }

    constexpr uint32_t n = 1000;
    std::vector<float> input = ramp(n);
    ctx->upload(buffers[4], 0, input.data(), n * sizeof(float));
    Pipeline pipeline =
        ctx->createPipeline(kDoublePlusStart, 2, sizeof(DoublePlusStartParams), "double_plus_start");
    VkDescriptorSet set =
        ctx->createDescriptorSet(pipeline, {{buffers[4].handle(), 0, 0}, {buffers[5].handle(), 0, 0}});
    VkCommandBuffer cmd = ctx->beginCommands();
    recordDoublePlusStart(*ctx, cmd, pipeline, set, n, 3);
    ctx->submitAndWait(cmd);
    std::vector<float> output(n);
    ctx->download(buffers[5], 0, output.data(), n * sizeof(float));
    for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(output[i], 2.0f * input[i] + 3.0f) << "element " << i;
    std::vector<uint8_t> neighbour(buffers[3].size());
    ctx->download(buffers[3], 0, neighbour.data(), neighbour.size());
    EXPECT_EQ(neighbour, sent[3]) << "the dispatch wrote past its buffer";

    // The block outlives the buffers freed before the one kept.
    Buffer kept = std::move(buffers[2]);
    buffers.clear();
    std::vector<uint8_t> received(kept.size());
    ctx->download(kept, 0, received.data(), received.size());
    EXPECT_EQ(received, sent[2]);
    ctx.reset();
    EXPECT_EQ(kept.handle(), VkBuffer(VK_NULL_HANDLE));
  }
}

TEST(VulkanBuffers, BlocksNameTheirBuffersWhenOutOfMemory) {
  CONTEXT_OR_SKIP(ctx, ContextOptions{});
  try {
    ctx->createBuffers(std::vector<BufferRequest>{{1ull << 40, "weight 'huge'"}}, 1 << 20);
    FAIL() << "a 1 TiB buffer was allocated";
  } catch (const VulkanError &e) {
    EXPECT_NE(std::string(e.what()).find("out of device memory allocating 'weight 'huge''"),
              std::string::npos)
        << e.what();
  }
}

TEST(VulkanBuffers, DeviceAddressesWhereAsked) {
  {
    CONTEXT_OR_SKIP(plain, ContextOptions{});
    EXPECT_FALSE(plain->hasBufferDeviceAddresses());
    Buffer b = plain->createBuffer(64, "b");
    EXPECT_THROW(b.deviceAddress(), VulkanError);
  }
  ContextOptions options;
  options.bufferDeviceAddress = true;
  CONTEXT_OR_SKIP(ctx, options);
  if (!ctx->hasBufferDeviceAddresses()) GTEST_SKIP() << "no bufferDeviceAddress on " << ctx->info().name;
  Buffer a = ctx->createBuffer(256, "a"), b = ctx->createBuffer(256, "b");
  EXPECT_NE(a.deviceAddress(), 0u);
  EXPECT_NE(a.deviceAddress(), b.deviceAddress());
  // The buffers still work as descriptors' buffers.
  std::vector<uint8_t> sent = bytePattern(256, 3), received(256);
  ctx->upload(a, 0, sent.data(), 256);
  ctx->download(a, 0, received.data(), 256);
  EXPECT_EQ(sent, received);
}

// Each way of allocating (ContextOptions::allocation) gives buffers that keep their bytes and feed a
// dispatch, alone or in shared blocks, with device addresses or without, and the validation layer (where
// installed) accepts the structures it chains; a device without the extension a way needs is refused by name.
TEST(VulkanBuffers, EveryWayOfAllocatingKeepsTheBytes) {
  EXPECT_EQ(memoryAllocationNames(),
            (std::vector<std::string>{"plain", "dedicated", "exportable", "priority"}));
  for (MemoryAllocation way : kMemoryAllocations) {
    const std::string name = memoryAllocationName(way);
    EXPECT_EQ(parseMemoryAllocation(name), way);
    for (bool addresses : {false, true}) {
      ContextOptions options;
      options.allocation = way;
      options.validation = true;
      options.bufferDeviceAddress = addresses;
      std::unique_ptr<Context> ctx;
      try {
        ctx = std::make_unique<Context>(options);
      } catch (const NoDeviceError &e) {
        GTEST_SKIP() << e.what();
      } catch (const VulkanError &e) {
        ASSERT_NE(way, MemoryAllocation::Plain) << e.what();
        ASSERT_NE(way, MemoryAllocation::Dedicated) << e.what(); // core since Vulkan 1.1
        const char *extension =
            way == MemoryAllocation::Exportable ? "VK_KHR_external_memory_fd" : "VK_EXT_memory_priority";
        EXPECT_NE(std::string(e.what()).find(extension), std::string::npos) << e.what();
        continue;
      }
      Buffer alone = ctx->createBuffer(4000, "alone");
      std::vector<Buffer> blocks = ctx->createBuffers(
          std::vector<BufferRequest>{{4000, "first"}, {4000, "second"}, {1 << 20, "big"}}, 64 << 10);
      constexpr uint32_t n = 1000;
      std::vector<float> input = ramp(n);
      ctx->upload(alone, 0, input.data(), n * sizeof(float));
      Pipeline pipeline =
          ctx->createPipeline(kDoublePlusStart, 2, sizeof(DoublePlusStartParams), "double_plus_start");
      for (Buffer *result : {&blocks[1], &blocks[2]}) {
        VkDescriptorSet set =
            ctx->createDescriptorSet(pipeline, {{alone.handle(), 0, 0}, {result->handle(), 0, 0}});
        VkCommandBuffer cmd = ctx->beginCommands();
        recordDoublePlusStart(*ctx, cmd, pipeline, set, n, 3);
        ctx->submitAndWait(cmd);
        std::vector<float> output(n);
        ctx->download(*result, 0, output.data(), n * sizeof(float));
        for (uint32_t i = 0; i < n; ++i)
          ASSERT_EQ(output[i], 2.0f * input[i] + 3.0f) << name << ", element " << i;
      }
      EXPECT_EQ(ctx->validationErrors(), 0u) << name << (addresses ? " with addresses" : "");
    }
  }
}

// Where allocations are dedicated (the default), createBuffers gives a buffer of kOwnAllocationBytes or more
// an allocation of its own, and the smaller ones around it still share blocks; plain allocations share.
TEST(VulkanBuffers, LargeBuffersGetAllocationsOfTheirOwnWhereDedicated) {
  const std::vector<BufferRequest> requests = {{1000, "norm a"},
                                               {2000, "norm b"},
                                               {kOwnAllocationBytes, "matrix"},
                                               {1000, "norm c"},
                                               {1000, "norm d"}};
  for (MemoryAllocation way : {MemoryAllocation::Dedicated, MemoryAllocation::Plain}) {
    ContextOptions options;
    options.allocation = way;
    CONTEXT_OR_SKIP(ctx, options);
    std::vector<Buffer> buffers = ctx->createBuffers(requests, 64 << 20);
    EXPECT_EQ(buffers[0].memory(), buffers[1].memory());
    EXPECT_EQ(buffers[3].memory(), buffers[4].memory());
    if (way == MemoryAllocation::Dedicated) {
      EXPECT_NE(buffers[2].memory(), buffers[1].memory());
      EXPECT_NE(buffers[2].memory(), buffers[3].memory());
    } else {
      EXPECT_EQ(buffers[2].memory(), buffers[0].memory());
      EXPECT_EQ(buffers[4].memory(), buffers[0].memory());
    }
    for (size_t i = 0; i < buffers.size(); ++i) { // each keeps its bytes
      std::vector<uint8_t> sent = bytePattern(buffers[i].size(), uint32_t(i + 1)),
                           received(buffers[i].size());
      ctx->upload(buffers[i], 0, sent.data(), sent.size());
      ctx->download(buffers[i], 0, received.data(), received.size());
      EXPECT_EQ(received, sent) << requests[i].what << ", " << memoryAllocationName(way);
    }
  }
}

// A device that allows few allocations: large buffers that would take more than half of them share blocks
// like the small ones, dedicated or not.
TEST(VulkanBuffers, LargeBuffersShareBlocksWhereAllocationsAreFew) {
  const std::vector<BufferRequest> requests = {
      {kOwnAllocationBytes, "matrix a"}, {1000, "norm"}, {kOwnAllocationBytes, "matrix b"}};
  for (uint32_t allowed : {4u, 3u}) {
    ContextOptions options;
    options.maxAllocations = allowed;
    CONTEXT_OR_SKIP(ctx, options);
    std::vector<Buffer> buffers = ctx->createBuffers(requests, 64 << 20);
    if (allowed == 4) { // two large buffers of at most 2: their own
      EXPECT_NE(buffers[0].memory(), buffers[1].memory());
      EXPECT_NE(buffers[2].memory(), buffers[1].memory());
    } else {
      EXPECT_EQ(buffers[0].memory(), buffers[1].memory());
      EXPECT_EQ(buffers[2].memory(), buffers[1].memory());
    }
    std::vector<uint8_t> sent = bytePattern(buffers[2].size(), 7), received(buffers[2].size());
    ctx->upload(buffers[2], 0, sent.data(), sent.size());
    ctx->download(buffers[2], 0, received.data(), received.size());
    EXPECT_EQ(received, sent) << allowed << " allocations allowed";
  }
}

TEST(VulkanContext, FloatAtomicsWhereAsked) {
  {
    CONTEXT_OR_SKIP(plain, ContextOptions{});
    EXPECT_FALSE(plain->hasBufferFloatAtomicAdd());
  }
  ContextOptions options;
  options.extensions = {"VK_EXT_shader_atomic_float"};
  CONTEXT_OR_SKIP(ctx, options);
  if (!ctx->info().hasExtension("VK_EXT_shader_atomic_float"))
    GTEST_SKIP() << "no VK_EXT_shader_atomic_float on " << ctx->info().name;
  // Lavapipe (what CI runs) has the float add on buffers; a device with the extension but not that feature
  // reports false.
  if (ctx->info().name.find("llvmpipe") != std::string::npos) {
    EXPECT_TRUE(ctx->hasBufferFloatAtomicAdd());
  }
}

// The companion queue exists only where asked for (and the device has it); where it does, a dispatch
// submitted there beside the main queue's writes what it should, from buffers both queues use.
TEST(VulkanContext, CompanionQueueOnlyWhereAsked) {
  {
    CONTEXT_OR_SKIP(plain, ContextOptions{});
    EXPECT_FALSE(plain->hasCompanionQueue());
    EXPECT_THROW(plain->beginCompanionCommands(), VulkanError);
  }
  for (CompanionQueue queue : {CompanionQueue::SameFamily, CompanionQueue::OtherFamily}) {
    ContextOptions options;
    options.companionQueue = queue;
    CONTEXT_OR_SKIP(ctx, options);
    if (!ctx->hasCompanionQueue()) continue; // lavapipe: one family of one queue
    constexpr uint32_t n = 4096;
    Pipeline pipeline =
        ctx->createPipeline(kDoublePlusStart, 2, sizeof(DoublePlusStartParams), "double_plus_start");
    Buffer x = ctx->createBuffer(n * sizeof(float), "x");
    Buffer y = ctx->createBuffer(n * sizeof(float), "y");
    Buffer z = ctx->createBuffer(n * sizeof(float), "z");
    std::vector<float> input = ramp(n);
    ctx->upload(x, 0, input.data(), n * sizeof(float));
    VkDescriptorSet toY = ctx->createDescriptorSet(pipeline, {{x.handle(), 0, 0}, {y.handle(), 0, 0}});
    VkDescriptorSet toZ = ctx->createDescriptorSet(pipeline, {{x.handle(), 0, 0}, {z.handle(), 0, 0}});
    VkCommandBuffer main = ctx->beginCommands();
    recordDoublePlusStart(*ctx, main, pipeline, toY, n, 1);
    VkCommandBuffer beside = ctx->beginCompanionCommands();
    recordDoublePlusStart(*ctx, beside, pipeline, toZ, n, 7);
    ctx->submitWithCompanionAndWait(main, beside);
    std::vector<float> y0(n), z0(n);
    ctx->download(y, 0, y0.data(), n * sizeof(float));
    ctx->download(z, 0, z0.data(), n * sizeof(float));
    for (uint32_t i = 0; i < n; ++i) {
      ASSERT_EQ(y0[i], 2.0f * input[i] + 1.0f) << "element " << i;
      ASSERT_EQ(z0[i], 2.0f * input[i] + 7.0f) << "element " << i << " (companion queue)";
    }
  }
}

TEST(VulkanBuffers, Fill) {
  CONTEXT_OR_SKIP(ctx, ContextOptions{});
  constexpr size_t n = 1000;
  Buffer buffer = ctx->createBuffer(n * sizeof(float), "filled");
  float one = 1.0f;
  uint32_t oneBits;
  std::memcpy(&oneBits, &one, sizeof oneBits);
  ctx->fill(buffer, oneBits);
  std::vector<float> values(n);
  ctx->download(buffer, 0, values.data(), n * sizeof(float));
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(values[i], 1.0f) << i;
  ctx->fill(buffer, 0);
  ctx->download(buffer, 0, values.data(), n * sizeof(float));
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(values[i], 0.0f) << i;
}

TEST(VulkanDispatch, OneHundredThousandElements) {
  CONTEXT_OR_SKIP(ctx, ContextOptions{});
  constexpr uint32_t n = 100000;
  constexpr uint32_t start = 3;
  Pipeline pipeline =
      ctx->createPipeline(kDoublePlusStart, 2, sizeof(DoublePlusStartParams), "double_plus_start");
  Buffer x = ctx->createBuffer(n * sizeof(float), "x");
  // One workgroup's worth of spare elements after the end: the shader must leave them alone.
  Buffer y = ctx->createBuffer((n + kWorkgroupSize) * sizeof(float), "y");
  std::vector<float> input = ramp(n);
  ctx->upload(x, 0, input.data(), n * sizeof(float));
  ctx->fill(y, 0xffffffffu);
  VkDescriptorSet set = ctx->createDescriptorSet(pipeline, {{x.handle(), 0, 0}, {y.handle(), 0, 0}});
  VkCommandBuffer cmd = ctx->beginCommands();
  recordDoublePlusStart(*ctx, cmd, pipeline, set, n, start);
  ctx->submitAndWait(cmd);
  std::vector<float> output(n + kWorkgroupSize);
  ctx->download(y, 0, output.data(), output.size() * sizeof(float));
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(output[i], 2.0f * input[i] + float(start)) << "element " << i;
  for (uint32_t i = n; i < output.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &output[i], sizeof bits);
    ASSERT_EQ(bits, 0xffffffffu) << "element " << i << " past the end was written";
  }
}

namespace {
// y = 2x + 1, then z = 2y + 5 behind a barrier, in one command buffer or (submitBetween) in two, the first
// submitted without a wait; checks z.
void checkChainedDispatches(Context &ctx, bool submitBetween) {
  constexpr uint32_t n = 50000;
  Pipeline pipeline =
      ctx.createPipeline(kDoublePlusStart, 2, sizeof(DoublePlusStartParams), "double_plus_start");
  Buffer x = ctx.createBuffer(n * sizeof(float), "x");
  Buffer y = ctx.createBuffer(n * sizeof(float), "y");
  Buffer z = ctx.createBuffer(n * sizeof(float), "z");
  std::vector<float> input = ramp(n);
  ctx.upload(x, 0, input.data(), n * sizeof(float));
  VkDescriptorSet first = ctx.createDescriptorSet(pipeline, {{x.handle(), 0, 0}, {y.handle(), 0, 0}});
  VkDescriptorSet second = ctx.createDescriptorSet(pipeline, {{y.handle(), 0, 0}, {z.handle(), 0, 0}});
  VkCommandBuffer cmd = ctx.beginCommands();
  recordDoublePlusStart(ctx, cmd, pipeline, first, n, 1);
  ctx.dispatchBarrier(cmd);
  if (submitBetween) {
    ctx.submit(cmd);
    cmd = ctx.beginCommands();
  }
  recordDoublePlusStart(ctx, cmd, pipeline, second, n, 5);
  ctx.submitAndWait(cmd);
  std::vector<float> output(n);
  ctx.download(z, 0, output.data(), n * sizeof(float));
  for (uint32_t i = 0; i < n; ++i)
    ASSERT_EQ(output[i], 2.0f * (2.0f * input[i] + 1.0f) + 5.0f) << "element " << i;
}
} // namespace

TEST(VulkanDispatch, SecondDispatchReadsTheFirstAfterABarrier) {
  CONTEXT_OR_SKIP(ctx, ContextOptions{});
  checkChainedDispatches(*ctx, false);
}

// Each barrier between dispatches (ContextOptions::dispatchBarrier) orders them, in one submission and
// across two, with the validation layers (where on) finding no hazard; a device with synchronization2
// (lavapipe has it) records the storage one, not the compute one it falls back to.
TEST(VulkanDispatch, DispatchBarriersOrderDispatches) {
  for (DispatchBarrier barrier : kDispatchBarriers) {
    ContextOptions options;
    options.dispatchBarrier = barrier;
    CONTEXT_OR_SKIP(ctx, options);
    if (ctx->info().name.find("llvmpipe") != std::string::npos) {
      EXPECT_EQ(ctx->dispatchBarrierKind(), barrier);
    }
    checkChainedDispatches(*ctx, false);
    checkChainedDispatches(*ctx, true);
    EXPECT_EQ(ctx->validationErrors(), 0u) << dispatchBarrierName(barrier);
    EXPECT_EQ(parseDispatchBarrier(dispatchBarrierName(barrier)), barrier);
  }
  EXPECT_EQ(parseDispatchBarrier("transfer"), std::nullopt);
}

// The main queue on a compute family without graphics where asked for; lavapipe has none, so it keeps its
// one family, and the dispatches run either way.
TEST(VulkanDispatch, ComputeOnlyQueueFamilyWhereThereIsOne) {
  ContextOptions options;
  options.mainQueueFamily = MainQueueFamily::ComputeOnly;
  CONTEXT_OR_SKIP(ctx, options);
  if (ctx->info().name.find("llvmpipe") != std::string::npos) {
    EXPECT_EQ(ctx->queueFamily(), 0u);
    EXPECT_TRUE(ctx->queueFamilyHasGraphics());
  }
  checkChainedDispatches(*ctx, true);
}

TEST(VulkanDispatch, SpinWaitsStillWaitForTheGpu) {
  // Waits that poll the fence first (ContextOptions::spinWaitMicroseconds), shorter than the work and
  // longer: either way the host reads what the dispatches wrote, and a submission without a wait before
  // them is covered by the next wait.
  for (uint32_t spin : {1u, 1000000u}) {
    ContextOptions options;
    options.spinWaitMicroseconds = spin;
    CONTEXT_OR_SKIP(ctx, options);
    checkChainedDispatches(*ctx, true);
    ASSERT_FALSE(::testing::Test::HasFatalFailure()) << "spin " << spin;
  }
}

// Recorded command buffers submitted without a wait (greedy decode batches): two in flight, each chained to
// the one before by its opening barrier, each waited for by its own ticket; a third, or a ticket waited
// for twice, is refused.
TEST(VulkanDispatch, RecordedSubmissionsInFlightRunInOrder) {
  CONTEXT_OR_SKIP(ctx, ContextOptions{});
  constexpr uint32_t n = 5000;
  Pipeline pipeline =
      ctx->createPipeline(kDoublePlusStart, 2, sizeof(DoublePlusStartParams), "double_plus_start");
  Buffer x = ctx->createBuffer(n * sizeof(float), "x", true);
  Buffer y = ctx->createBuffer(n * sizeof(float), "y", true);
  std::vector<float> input = ramp(n);
  ctx->upload(x, 0, input.data(), n * sizeof(float));
  // x -> y, then y -> x: the second submission reads what the first wrote.
  VkDescriptorSet forth = ctx->createDescriptorSet(pipeline, {{x.handle(), 0, 0}, {y.handle(), 0, 0}});
  VkDescriptorSet back = ctx->createDescriptorSet(pipeline, {{y.handle(), 0, 0}, {x.handle(), 0, 0}});
  VkCommandBuffer recorded[2];
  for (int i = 0; i < 2; ++i) {
    recorded[i] = ctx->beginReusableCommands();
    ctx->computeBarrier(recorded[i]);
    recordDoublePlusStart(*ctx, recorded[i], pipeline, i == 0 ? forth : back, n, i == 0 ? 1 : 3);
    ctx->endCommands(recorded[i]);
  }
  uint32_t first = ctx->submitRecordedAsync(recorded[0]);
  uint32_t second = ctx->submitRecordedAsync(recorded[1]);
  EXPECT_NE(first, second);
  EXPECT_THROW(ctx->submitRecordedAsync(recorded[0]), VulkanError);
  ctx->waitRecorded(first);
  EXPECT_THROW(ctx->waitRecorded(first), VulkanError);
  ctx->waitRecorded(second);
  EXPECT_THROW(ctx->waitRecorded(Context::kRecordedInFlight), VulkanError);
  std::vector<float> output(n);
  ctx->download(x, 0, output.data(), n * sizeof(float));
  for (uint32_t i = 0; i < n; ++i)
    ASSERT_EQ(output[i], 2.0f * (2.0f * input[i] + 1.0f) + 3.0f) << "element " << i;
  for (VkCommandBuffer cmd : recorded) ctx->freeCommands(cmd);
  EXPECT_EQ(ctx->validationErrors(), 0u);
}

// Staged uploads and downloads must be ordered against dispatches in separate submissions.
TEST(VulkanDispatch, StagedBuffersFeedAndReceiveDispatches) {
  CONTEXT_OR_SKIP(ctx, stagedOptions(16 << 10));
  constexpr uint32_t n = 20000;
  Pipeline pipeline =
      ctx->createPipeline(kDoublePlusStart, 2, sizeof(DoublePlusStartParams), "double_plus_start");
  Buffer x = ctx->createBuffer(n * sizeof(float), "x");
  Buffer y = ctx->createBuffer(n * sizeof(float), "y");
  std::vector<float> input = ramp(n);
  ctx->upload(x, 0, input.data(), n * sizeof(float));
  VkDescriptorSet set = ctx->createDescriptorSet(pipeline, {{x.handle(), 0, 0}, {y.handle(), 0, 0}});
  VkCommandBuffer cmd = ctx->beginCommands();
  recordDoublePlusStart(*ctx, cmd, pipeline, set, n, 9);
  ctx->submitAndWait(cmd);
  std::vector<float> output(n);
  ctx->download(y, 0, output.data(), n * sizeof(float));
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(output[i], 2.0f * input[i] + 9.0f) << "element " << i;
}

TEST(VulkanDispatch, DescriptorSetsOutgrowOnePool) {
  CONTEXT_OR_SKIP(ctx, ContextOptions{});
  Pipeline pipeline =
      ctx->createPipeline(kDoublePlusStart, 2, sizeof(DoublePlusStartParams), "double_plus_start");
  constexpr uint32_t n = 256;
  Buffer x = ctx->createBuffer(n * sizeof(float), "x");
  Buffer y = ctx->createBuffer(n * sizeof(float), "y");
  std::vector<float> input = ramp(n);
  ctx->upload(x, 0, input.data(), n * sizeof(float));
  VkDescriptorSet last = VK_NULL_HANDLE;
  for (int i = 0; i < 2500; ++i) { // more sets than one pool holds
    last = ctx->createDescriptorSet(pipeline, {{x.handle(), 0, 0}, {y.handle(), 0, n * sizeof(float)}});
    ASSERT_NE(last, VkDescriptorSet(VK_NULL_HANDLE));
  }
  VkCommandBuffer cmd = ctx->beginCommands();
  recordDoublePlusStart(*ctx, cmd, pipeline, last, n, 2);
  ctx->submitAndWait(cmd);
  std::vector<float> output(n);
  ctx->download(y, 0, output.data(), n * sizeof(float));
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(output[i], 2.0f * input[i] + 2.0f);
  ctx->resetDescriptorSets();
  EXPECT_NE(ctx->createDescriptorSet(pipeline, {{x.handle(), 0, 0}, {y.handle(), 0, 0}}),
            VkDescriptorSet(VK_NULL_HANDLE));
}

TEST(VulkanDispatch, DescriptorSetChecksItsRanges) {
  CONTEXT_OR_SKIP(ctx, ContextOptions{});
  Pipeline pipeline =
      ctx->createPipeline(kDoublePlusStart, 2, sizeof(DoublePlusStartParams), "double_plus_start");
  Buffer x = ctx->createBuffer(1024, "x");
  try {
    ctx->createDescriptorSet(pipeline, {{x.handle(), 0, 0}});
    FAIL() << "one range for two bindings was accepted";
  } catch (const VulkanError &e) {
    EXPECT_NE(std::string(e.what()).find("1 buffer ranges for a pipeline with 2 bindings"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ctx->createDescriptorSet(pipeline, {{x.handle(), 0, 0}, {x.handle(), 512, 1024}}),
               VulkanError);
  EXPECT_THROW(ctx->createDescriptorSet(pipeline, {{x.handle(), 0, 0}, {VK_NULL_HANDLE, 0, 0}}), VulkanError);
}

TEST(VulkanDispatch, TimestampsIncrease) {
  CONTEXT_OR_SKIP(ctx, ContextOptions{});
  if (!ctx->info().timestamps) GTEST_SKIP() << ctx->info().name << " has no timestamps";
  constexpr uint32_t n = 100000;
  Pipeline pipeline =
      ctx->createPipeline(kDoublePlusStart, 2, sizeof(DoublePlusStartParams), "double_plus_start");
  Buffer x = ctx->createBuffer(n * sizeof(float), "x");
  Buffer y = ctx->createBuffer(n * sizeof(float), "y");
  ctx->fill(x, 0);
  VkDescriptorSet set = ctx->createDescriptorSet(pipeline, {{x.handle(), 0, 0}, {y.handle(), 0, 0}});
  VkCommandBuffer cmd = ctx->beginCommands();
  ctx->resetTimestamps(cmd, 3);
  ctx->writeTimestamp(cmd, 0);
  recordDoublePlusStart(*ctx, cmd, pipeline, set, n, 0);
  ctx->writeTimestamp(cmd, 1);
  ctx->computeBarrier(cmd);
  recordDoublePlusStart(*ctx, cmd, pipeline, set, n, 0);
  ctx->writeTimestamp(cmd, 2);
  ctx->submitAndWait(cmd);
  std::vector<uint64_t> times = ctx->readTimestamps(3);
  ASSERT_EQ(times.size(), 3u);
  EXPECT_GT(times[1], times[0]);
  EXPECT_GT(times[2], times[1]);
  EXPECT_LT(times[2] - times[0], 60ull * 1000 * 1000 * 1000) << "more than a minute for two tiny dispatches";
  EXPECT_THROW(ctx->readTimestamps(1000), VulkanError);
}

TEST(VulkanPipelines, BadSpirvNamesThePipeline) {
  CONTEXT_OR_SKIP(ctx, ContextOptions{});
  try {
    ctx->createPipeline({}, 2, 8, "empty-kernel");
    FAIL() << "empty SPIR-V was accepted";
  } catch (const VulkanError &e) {
    EXPECT_NE(std::string(e.what()).find("pipeline 'empty-kernel': the SPIR-V code is empty"),
              std::string::npos)
        << e.what();
  }
  try {
    ctx->createPipeline({0x12345678, 0x00010500, 0, 0, 0}, 2, 8, "not-spirv");
    FAIL() << "SPIR-V with a wrong magic number was accepted";
  } catch (const VulkanError &e) {
    std::string message = e.what();
    EXPECT_NE(message.find("pipeline 'not-spirv'"), std::string::npos) << message;
    EXPECT_NE(message.find("0x12345678"), std::string::npos) << message;
  }
  EXPECT_THROW(ctx->createPipeline(kDoublePlusStart, 2, 6, "odd push constants"), VulkanError);
}

TEST(VulkanValidation, WorkloadReportsNoErrors) {
  uint32_t errorsBefore = Context::validationErrorsInProcess();
  bool layerPresent = false;
  for (bool staged : {false, true}) {
    ContextOptions options;
    options.validation = true;
    options.forceStaging = staged;
    options.stagingChunkBytes = 8 << 10;
    CONTEXT_OR_SKIP(ctx, options);
    layerPresent = ctx->validationEnabled();
    runWorkload(*ctx);
    EXPECT_EQ(ctx->validationErrors(), 0u) << (staged ? "staged" : "mapped");
  } // destroying the context is checked too: leaked objects are reported then
  if (!layerPresent)
    GTEST_SKIP() << "VK_LAYER_KHRONOS_validation is not installed; the workload ran unchecked";
  EXPECT_EQ(Context::validationErrorsInProcess(), errorsBefore);
}

// The suite's other checks rely on this: an invalid call (a buffer with no usage) is counted and turns into
// the VulkanError that gerbil-exec reports with exit code 4. It runs in a child process, whose stderr (the
// layer's "vulkan validation: ..." line) gtest keeps, so the message does not fail this test through ctest's
// FAIL_REGULAR_EXPRESSION.
TEST(VulkanValidationDeathTest, AnInvalidCallIsCountedAndThrown) {
  {
    ContextOptions options;
    options.validation = true;
    CONTEXT_OR_SKIP(ctx, options);
    if (!ctx->validationEnabled()) GTEST_SKIP() << "VK_LAYER_KHRONOS_validation is not installed";
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto invalidCall = [] {
    ContextOptions options;
    options.validation = true;
    Context ctx(options);
    VkBufferCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
    info.size = 16;
    info.usage = 0; // VUID-VkBufferCreateInfo-usage-requiredbitmask
    info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    VkBuffer buffer = VK_NULL_HANDLE;
    if (vkCreateBuffer(ctx.device(), &info, nullptr, &buffer) == VK_SUCCESS)
      vkDestroyBuffer(ctx.device(), buffer, nullptr);
    try {
      throwIfValidationFailed(ctx);
    } catch (const VulkanError &e) {
      std::fprintf(stderr, "%s\n", e.what());
      std::_Exit(4);
    }
    std::_Exit(0);
  };
  EXPECT_EXIT(invalidCall(), testing::ExitedWithCode(4), "vulkan validation reported 1 error");
}

namespace {

// Pipeline statistics: asked for, a device with VK_KHR_pipeline_executable_properties names some for a
// pipeline (lavapipe does); not asked for, none.
TEST(VulkanPipelines, StatisticsWhereAskedAndTheDeviceHasThem) {
  ContextOptions options;
  options.pipelineStatistics = true;
  CONTEXT_OR_SKIP(ctx, options);
  Pipeline pipeline =
      ctx->createPipeline(kDoublePlusStart, 2, sizeof(DoublePlusStartParams), "double_plus_start");
  std::vector<PipelineStatistic> statistics = pipelineStatistics(*ctx, pipeline);
  if (!ctx->info().hasExtension("VK_KHR_pipeline_executable_properties")) {
    EXPECT_TRUE(statistics.empty());
    GTEST_SKIP() << ctx->info().name << " has no VK_KHR_pipeline_executable_properties";
  }
  ASSERT_TRUE(ctx->capturesPipelineStatistics());
  ASSERT_FALSE(statistics.empty());
  for (const PipelineStatistic &s : statistics) {
    EXPECT_FALSE(s.name.empty());
    EXPECT_NE(s.value, "?") << s.name;
  }

  CONTEXT_OR_SKIP(plain, ContextOptions{});
  EXPECT_FALSE(plain->capturesPipelineStatistics());
  Pipeline other =
      plain->createPipeline(kDoublePlusStart, 2, sizeof(DoublePlusStartParams), "double_plus_start");
  EXPECT_TRUE(pipelineStatistics(*plain, other).empty());
}

} // namespace
