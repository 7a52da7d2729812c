// Blob header encoding and verification, read back with an independent
// little-endian decoder and CRC; corruption at every header byte; and a
// deterministic mutation fuzz of the parser (also run under ASan/UBSan).
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "store/blob.h"
#include "unit/store_test_util.h"

namespace swa {
namespace {

using swa::testing::ReadLe;
using swa::testing::ReferenceCrc32c;
using swa::testing::ResealBlob;
using swa::testing::WriteLe;

constexpr uint64_t kFingerprint = 0x0123456789ABCDEFull;

std::vector<uint8_t> MakeBlob(size_t payload_bytes, uint64_t seed, int32_t written_end = 1234,
                              int32_t valid_start = 1100, int32_t ring_high = 1236) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> blob(kBlobHeaderBytes + payload_bytes);
  for (size_t i = kBlobHeaderBytes; i < blob.size(); ++i) blob[i] = static_cast<uint8_t>(rng());
  BlobHeader h;
  h.fingerprint = kFingerprint;
  h.written_end = written_end;
  h.valid_start = valid_start;
  h.ring_high = ring_high;
  h.payload_bytes = payload_bytes;
  std::fill(blob.begin(), blob.begin() + kBlobHeaderBytes, 0xEE);  // poison
  EncodeBlobHeader(h, blob.data() + kBlobHeaderBytes, blob.data());
  return blob;
}

TEST(Blob, HeaderLayoutMatchesIndependentDecoder) {
  const std::vector<uint8_t> blob = MakeBlob(777, 1, 5000, 4000, 5003);
  const uint8_t* h = blob.data();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(h), 4), "SWAB");
  EXPECT_EQ(ReadLe(h + 4, 2), 1u);
  EXPECT_EQ(ReadLe(h + 6, 2), 64u);
  EXPECT_EQ(ReadLe(h + 8, 8), kFingerprint);
  EXPECT_EQ(ReadLe(h + 16, 4), 5000u);
  EXPECT_EQ(ReadLe(h + 20, 4), 4000u);
  EXPECT_EQ(ReadLe(h + 24, 8), 777u);
  EXPECT_EQ(ReadLe(h + 32, 4), 5003u);
  for (int i = 36; i < 60; ++i) EXPECT_EQ(h[i], 0) << "reserved byte " << i;
  uint32_t crc = ReferenceCrc32c(h, 60);
  crc = ReferenceCrc32c(h + 64, 777, crc);
  EXPECT_EQ(ReadLe(h + 60, 4), crc);
}

TEST(Blob, VerifiesAndReturnsFields) {
  const std::vector<uint8_t> blob = MakeBlob(4096, 2, 77, 60, 79);
  absl::StatusOr<BlobHeader> h = VerifyBlob(blob.data(), blob.size(), {kFingerprint, 4096});
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->written_end, 77);
  EXPECT_EQ(h->valid_start, 60);
  EXPECT_EQ(h->ring_high, 79);
  EXPECT_EQ(h->payload_bytes, 4096u);
  EXPECT_EQ(h->fingerprint, kFingerprint);
  // Split buffers verify the same way.
  EXPECT_TRUE(VerifyBlob(blob.data(), blob.data() + 64, 4096, {kFingerprint, 4096}).ok());
  // valid_start may exceed written_end (a slot prepared for replay).
  const std::vector<uint8_t> replay = MakeBlob(16, 3, 0, 500, 0);
  EXPECT_TRUE(VerifyBlob(replay.data(), replay.size(), {kFingerprint, 16}).ok());
}

TEST(Blob, EveryHeaderBitFlipIsRejected) {
  const std::vector<uint8_t> clean = MakeBlob(1000, 4);
  for (size_t bit = 0; bit < kBlobHeaderBytes * 8; ++bit) {
    std::vector<uint8_t> b = clean;
    b[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    absl::StatusOr<BlobHeader> h = VerifyBlob(b.data(), b.size(), {kFingerprint, 1000});
    ASSERT_FALSE(h.ok()) << "bit " << bit;
    const absl::StatusCode want = (bit / 8 == 4 || bit / 8 == 5)
                                      ? absl::StatusCode::kFailedPrecondition  // version field
                                      : absl::StatusCode::kDataLoss;
    EXPECT_EQ(h.status().code(), want) << "bit " << bit << ": " << h.status();
  }
}

TEST(Blob, EveryHeaderByteValueIsRejected) {
  const std::vector<uint8_t> clean = MakeBlob(300, 5);
  for (size_t i = 0; i < kBlobHeaderBytes; ++i) {
    for (int v = 0; v < 256; ++v) {
      if (v == clean[i]) continue;
      std::vector<uint8_t> b = clean;
      b[i] = static_cast<uint8_t>(v);
      absl::StatusOr<BlobHeader> h = VerifyBlob(b.data(), b.size(), {kFingerprint, 300});
      ASSERT_FALSE(h.ok()) << "byte " << i << " = " << v;
      ASSERT_TRUE(absl::IsDataLoss(h.status()) || absl::IsFailedPrecondition(h.status()))
          << h.status();
    }
  }
}

TEST(Blob, PreciseErrors) {
  const std::vector<uint8_t> clean = MakeBlob(256, 6);
  const BlobExpectation expect{kFingerprint, 256};
  auto code = [&](const std::vector<uint8_t>& b, BlobExpectation e) {
    return VerifyBlob(b.data(), b.size(), e).status().code();
  };
  // Truncated: shorter than a header, and short payload.
  EXPECT_EQ(code(std::vector<uint8_t>(clean.begin(), clean.begin() + 10), expect),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(code(std::vector<uint8_t>(clean.begin(), clean.end() - 1), expect),
            absl::StatusCode::kDataLoss);
  // Extended.
  std::vector<uint8_t> longer = clean;
  longer.push_back(0);
  EXPECT_EQ(code(longer, expect), absl::StatusCode::kDataLoss);
  // Payload bit flip.
  std::vector<uint8_t> flipped = clean;
  flipped[100] ^= 0x10;
  EXPECT_EQ(code(flipped, expect), absl::StatusCode::kDataLoss);
  // Another layout, correctly sealed: a miss, not corruption.
  EXPECT_EQ(code(clean, {kFingerprint ^ 1, 256}), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(code(clean, {kFingerprint, 512}), absl::StatusCode::kFailedPrecondition);
  // Another version, even with a valid checksum.
  std::vector<uint8_t> v2 = clean;
  WriteLe(&v2[4], 2, 2);
  ResealBlob(v2);
  EXPECT_EQ(code(v2, expect), absl::StatusCode::kFailedPrecondition);
  // Non-zero reserved bytes under a valid checksum: an incompatible writer.
  std::vector<uint8_t> reserved = clean;
  reserved[40] = 1;
  ResealBlob(reserved);
  EXPECT_EQ(code(reserved, expect), absl::StatusCode::kFailedPrecondition);
  // Negative positions under a valid checksum.
  std::vector<uint8_t> negative = clean;
  WriteLe(&negative[20], static_cast<uint32_t>(-5), 4);
  ResealBlob(negative);
  EXPECT_EQ(code(negative, expect), absl::StatusCode::kDataLoss);
  std::vector<uint8_t> negative_high = clean;
  WriteLe(&negative_high[32], static_cast<uint32_t>(-1), 4);
  ResealBlob(negative_high);
  EXPECT_EQ(code(negative_high, expect), absl::StatusCode::kDataLoss);
}

// Random flips, truncations, extensions and splices, thousands of times: the
// parser never reads out of bounds (ASan), and it accepts a blob only when it
// is byte-for-byte the original.
TEST(BlobFuzz, MutationsAreRejectedOrIdentical) {
  std::mt19937_64 rng(20240607);
  for (int iter = 0; iter < 6000; ++iter) {
    const size_t payload = rng() % 600;
    const std::vector<uint8_t> clean = MakeBlob(payload, rng());
    std::vector<uint8_t> b = clean;
    const int mutations = 1 + static_cast<int>(rng() % 4);
    for (int m = 0; m < mutations; ++m) {
      switch (rng() % 5) {
        case 0:  // flip a bit
          if (!b.empty()) b[rng() % b.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
          break;
        case 1:  // overwrite a byte
          if (!b.empty()) b[rng() % b.size()] = static_cast<uint8_t>(rng());
          break;
        case 2:  // truncate
          b.resize(b.empty() ? 0 : rng() % b.size());
          break;
        case 3:  // extend
          for (size_t k = rng() % 70 + 1; k > 0; --k) b.push_back(static_cast<uint8_t>(rng()));
          break;
        case 4:  // duplicate a header range into the payload area or vice versa
          if (b.size() > 8) {
            const size_t from = rng() % (b.size() - 8), to = rng() % (b.size() - 8);
            std::memmove(&b[to], &b[from], 8);
          }
          break;
      }
    }
    // The parser reads exactly the bytes it is given: hand it a heap copy of
    // the exact length so that ASan sees any overrun.
    std::unique_ptr<uint8_t[]> exact(new uint8_t[b.size() + 1]);
    std::memcpy(exact.get(), b.data(), b.size());
    absl::StatusOr<BlobHeader> h = VerifyBlob(exact.get(), b.size(), {kFingerprint, payload});
    if (h.ok()) {
      ASSERT_EQ(b, clean) << "iteration " << iter << " accepted a changed blob";
    } else {
      ASSERT_TRUE(absl::IsDataLoss(h.status()) || absl::IsFailedPrecondition(h.status()))
          << "iteration " << iter << ": " << h.status();
      ASSERT_NE(b, clean) << "iteration " << iter << " rejected the original";
    }
  }
}

}  // namespace
}  // namespace swa
