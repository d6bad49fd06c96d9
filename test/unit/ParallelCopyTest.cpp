// support::copyInParallel, which uploads weights from a mapped checkpoint across the host's cores: every
// byte copied once, whatever the size and the threads (parts of whole pages, a last part shorter, more
// threads asked than parts).
#include "runtime/support/Parallel.h"

#include <gtest/gtest.h>

namespace {

std::vector<uint8_t> pattern(size_t bytes) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<uint8_t>(i * 131 + (i >> 12));
  return v;
}

TEST(ParallelCopy, CopiesEveryByteOnce) {
  for (size_t bytes :
       {size_t(0), size_t(1), size_t(4095), size_t(4097), size_t(3 * 4096 + 5), size_t(1 << 20) + 3})
    for (unsigned threads : {0u, 1u, 2u, 3u, 7u, 64u}) { // 0: the host's cores
      const std::vector<uint8_t> source = pattern(bytes);
      std::vector<uint8_t> destination(bytes + 2, 0xee); // a guard byte after the copy
      // Parts of any size (1 byte at least a thread), or the default minimum that keeps these on one.
      gerbil::support::copyInParallel(destination.data(), source.data(), bytes, threads,
                                      threads == 0 ? 8u << 20 : 1);
      EXPECT_TRUE(std::equal(source.begin(), source.end(), destination.begin()))
          << bytes << " bytes on " << threads << " threads";
      EXPECT_EQ(destination[bytes], 0xee) << bytes << " bytes on " << threads << " threads";
    }
}

} // namespace
