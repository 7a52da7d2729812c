// CRC32C: every implementation against the bit-at-a-time definition.
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "store/crc32c.h"
#include "unit/store_test_util.h"

namespace swa {
namespace {

using swa::testing::ReferenceCrc32c;

std::vector<Crc32cImpl> SupportedImpls() {
  std::vector<Crc32cImpl> impls;
  for (Crc32cImpl i : {Crc32cImpl::kTable, Crc32cImpl::kSse42, Crc32cImpl::kAvx512})
    if (Crc32cSupported(i)) impls.push_back(i);
  return impls;
}

TEST(Crc32c, KnownVectors) {
  // RFC 3720 (iSCSI) B.4 check value and test patterns.
  const uint8_t digits[] = {'1', '2', '3', '4', '5', '6', '7', '8', '9'};
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xff), inc(32);
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<uint8_t>(i);
  for (Crc32cImpl impl : SupportedImpls()) {
    SCOPED_TRACE(Crc32cImplName(impl));
    EXPECT_EQ(Crc32cWith(impl, 0, digits, 9), 0xE3069283u);
    EXPECT_EQ(Crc32cWith(impl, 0, zeros.data(), 32), 0x8A9136AAu);
    EXPECT_EQ(Crc32cWith(impl, 0, ones.data(), 32), 0x62A8AB43u);
    EXPECT_EQ(Crc32cWith(impl, 0, inc.data(), 32), 0x46DD794Eu);
    EXPECT_EQ(Crc32cWith(impl, 0, digits, 0), 0u);
  }
}

TEST(Crc32c, EveryLengthAndAlignmentMatchesReference) {
  std::mt19937_64 rng(1234);
  std::vector<uint8_t> buf(4096 + 64);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (Crc32cImpl impl : SupportedImpls()) {
    SCOPED_TRACE(Crc32cImplName(impl));
    for (size_t n = 0; n <= 2100; n += (n < 300 ? 1 : 7)) {
      const size_t off = rng() % 64;
      const uint32_t seed = static_cast<uint32_t>(rng());
      ASSERT_EQ(Crc32cWith(impl, seed, buf.data() + off, n),
                ReferenceCrc32c(buf.data() + off, n, seed))
          << "n = " << n << " offset = " << off;
    }
  }
}

TEST(Crc32c, LargeBuffersAndChaining) {
  std::mt19937_64 rng(99);
  // Sizes around every block boundary of the SSE4.2 (3 x 8192, 3 x 512) and
  // AVX-512 (256-byte) paths, plus a DeepSeek-V4-sized stored region.
  const std::vector<size_t> sizes = {1023, 1024, 1025, 1535, 1536, 1537, 24575, 24576, 24577,
                                     24576 + 1536 + 255, 100000, 1415040};
  std::vector<uint8_t> buf(1415040 + 8);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t n : sizes) {
    const uint32_t want = ReferenceCrc32c(buf.data() + 3, n);
    for (Crc32cImpl impl : SupportedImpls()) {
      SCOPED_TRACE(Crc32cImplName(impl));
      ASSERT_EQ(Crc32cWith(impl, 0, buf.data() + 3, n), want) << "n = " << n;
      const size_t cut = rng() % (n + 1);
      ASSERT_EQ(Crc32cWith(impl, Crc32cWith(impl, 0, buf.data() + 3, cut), buf.data() + 3 + cut,
                           n - cut),
                want)
          << "n = " << n << " split at " << cut;
    }
    ASSERT_EQ(Crc32c(0, buf.data() + 3, n), want);
  }
}

TEST(Crc32c, DetectsEverySingleBitFlip) {
  std::mt19937_64 rng(5);
  std::vector<uint8_t> buf(1500);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  const uint32_t clean = Crc32c(0, buf.data(), buf.size());
  for (size_t bit = 0; bit < buf.size() * 8; ++bit) {
    buf[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    ASSERT_NE(Crc32c(0, buf.data(), buf.size()), clean) << "bit " << bit;
    buf[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
  }
}

TEST(Crc32c, GfHelpersAgreeWithShifting) {
  using namespace crc32c_internal;
  // raw(r, 0^n) = r * x^(8n) mod P: appending n zero bytes shifts the register.
  std::mt19937_64 rng(7);
  std::vector<uint8_t> zeros(5000, 0);
  for (size_t n : {1u, 4u, 17u, 512u, 4999u}) {
    const uint32_t r = static_cast<uint32_t>(rng());
    EXPECT_EQ(RawTable(r, zeros.data(), n), MulModP(r, XPow8n(n))) << n;
  }
}

}  // namespace
}  // namespace swa
