// StreamCopy (non-temporal stores) equals memcpy for every alignment and a
// range of sizes around its thresholds, and writes nothing outside the range.
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "store/stream_copy.h"

namespace swa {
namespace {

TEST(StreamCopy, MatchesByteLoopAtEveryAlignment) {
  std::mt19937_64 rng(8);
  const size_t kMax = (size_t{256} << 10) + 1000;
  std::vector<uint8_t> src(kMax + 128), dst(kMax + 256);
  for (auto& b : src) b = static_cast<uint8_t>(rng() | 1);
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, (size_t{256} << 10) - 1, size_t{256} << 10,
                   (size_t{256} << 10) + 1, (size_t{256} << 10) + 255, kMax}) {
    for (size_t dst_off : {0, 1, 31, 32, 63}) {
      const size_t src_off = (dst_off * 7) % 64;
      std::fill(dst.begin(), dst.end(), 0xEE);  // poison
      StreamCopy(dst.data() + 64 + dst_off, src.data() + src_off, n);
      for (size_t i = 0; i < dst.size(); ++i) {
        const bool inside = i >= 64 + dst_off && i < 64 + dst_off + n;
        const uint8_t want = inside ? src[src_off + (i - 64 - dst_off)] : 0xEE;
        ASSERT_EQ(dst[i], want) << "n = " << n << " dst_off = " << dst_off << " byte " << i;
      }
    }
  }
}

}  // namespace
}  // namespace swa
