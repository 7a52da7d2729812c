// Blob header encoding and verification, read back with an independent
// little-endian decoder and CRC and against golden bytes; the key hash
// (FNV-1a 64) against its published vectors; a blob of another key or of
// format version 1 refused; corruption at every header byte; and a
// deterministic mutation fuzz of the parser (also run under ASan/UBSan).
#include <cstdint>
#include <random>
#include <cstring>
#include <string>
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
// The blobs below are saved under "sequence/42"; its FNV-1a 64, computed
// independently (Python, from the FNV definition).
constexpr uint64_t kKeyHash = 0x0cf376adba8f2663ull;

BlobExpectation Expect(uint64_t payload_bytes) { return {kFingerprint, payload_bytes, kKeyHash}; }

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
  h.key_hash = kKeyHash;
  std::fill(blob.begin(), blob.begin() + kBlobHeaderBytes, 0xEE);  // poison
  EncodeBlobHeader(h, blob.data() + kBlobHeaderBytes, blob.data());
  return blob;
}

TEST(Blob, HeaderLayoutMatchesIndependentDecoder) {
  const std::vector<uint8_t> blob = MakeBlob(777, 1, 5000, 4000, 5003);
  const uint8_t* h = blob.data();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(h), 4), "SWAB");
  EXPECT_EQ(ReadLe(h + 4, 2), 3u);
  EXPECT_EQ(ReadLe(h + 6, 2), 64u);
  EXPECT_EQ(ReadLe(h + 8, 8), kFingerprint);
  EXPECT_EQ(ReadLe(h + 16, 4), 5000u);
  EXPECT_EQ(ReadLe(h + 20, 4), 4000u);
  EXPECT_EQ(ReadLe(h + 24, 8), 777u);
  EXPECT_EQ(ReadLe(h + 32, 4), 5003u);
  EXPECT_EQ(ReadLe(h + 36, 8), kKeyHash);
  EXPECT_EQ(ReadLe(h + 44, 4), 0u);  // flags: untagged
  for (int i = 48; i < 60; ++i) EXPECT_EQ(h[i], 0) << "reserved byte " << i;
  uint32_t crc = ReferenceCrc32c(h, 60);
  crc = ReferenceCrc32c(h + 64, 777, crc);
  EXPECT_EQ(ReadLe(h + 60, 4), crc);
}

// Every header byte of one blob, computed independently (Python: struct.pack
// and a bitwise CRC32C): a change to the format cannot pass unnoticed.
TEST(Blob, GoldenHeaderBytes) {
  const uint8_t payload[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  BlobHeader h;
  h.fingerprint = kFingerprint;
  h.written_end = 5000;
  h.valid_start = 4000;
  h.ring_high = 5003;
  h.payload_bytes = sizeof payload;
  h.key_hash = BlobKeyHash("sequence/42");
  h.checksum = 0xDEADBEEF;  // ignored: computed
  uint8_t out[kBlobHeaderBytes];
  EncodeBlobHeader(h, payload, out);
  const uint8_t golden[kBlobHeaderBytes] = {
      0x53, 0x57, 0x41, 0x42, 0x03, 0x00, 0x40, 0x00,  // "SWAB", version 3, 64
      0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01,  // fingerprint
      0x88, 0x13, 0x00, 0x00, 0xa0, 0x0f, 0x00, 0x00,  // written_end, valid_start
      0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // payload bytes
      0x8b, 0x13, 0x00, 0x00, 0x63, 0x26, 0x8f, 0xba,  // ring_high, key hash
      0xad, 0x76, 0xf3, 0x0c, 0x00, 0x00, 0x00, 0x00,  // key hash, flags
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // reserved
      0x00, 0x00, 0x00, 0x00, 0xe9, 0x75, 0xc5, 0x91,  // reserved, CRC32C
  };
  for (size_t i = 0; i < kBlobHeaderBytes; ++i) EXPECT_EQ(out[i], golden[i]) << "byte " << i;
  EXPECT_TRUE(VerifyBlob(golden, payload, sizeof payload, Expect(sizeof payload)).ok());
  // The same blob as version 2 wrote it (before the flags) is still read.
  uint8_t v2[kBlobHeaderBytes];
  std::memcpy(v2, golden, sizeof v2);
  v2[4] = 0x02;
  const uint8_t v2_crc[4] = {0xeb, 0x9a, 0xcb, 0xe5};
  std::memcpy(v2 + 60, v2_crc, 4);
  absl::StatusOr<BlobHeader> old = VerifyBlob(v2, payload, sizeof payload, Expect(sizeof payload));
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->version, 2);
  EXPECT_EQ(old->flags, 0u);
  // Flags bit 0 (tagged), computed independently: only the flags and CRC change.
  h.flags = kBlobFlagTagged;
  EncodeBlobHeader(h, payload, out);
  const uint8_t tagged_crc[4] = {0x67, 0xb7, 0x8a, 0x2b};
  for (size_t i = 0; i < kBlobHeaderBytes; ++i) {
    const uint8_t want = i == 44 ? 1 : i >= 60 ? tagged_crc[i - 60] : golden[i];
    EXPECT_EQ(out[i], want) << "tagged, byte " << i;
  }
}

// FNV-1a 64: the published vectors (the empty key is the offset basis), and
// key bytes read as unsigned whatever the sign of char.
TEST(Blob, KeyHashIsFnv1a64) {
  EXPECT_EQ(BlobKeyHash(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(BlobKeyHash("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(BlobKeyHash("foobar"), 0x85944171f73967e8ull);
  EXPECT_EQ(BlobKeyHash("sequence/42"), kKeyHash);
  EXPECT_EQ(BlobKeyHash(std::string("\x00\xff\x80k", 4)), 0xd865dc7bf628eff1ull);
  EXPECT_NE(BlobKeyHash("a"), BlobKeyHash("b"));
}

TEST(Blob, VerifiesAndReturnsFields) {
  const std::vector<uint8_t> blob = MakeBlob(4096, 2, 77, 60, 79);
  absl::StatusOr<BlobHeader> h = VerifyBlob(blob.data(), blob.size(), Expect(4096));
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->written_end, 77);
  EXPECT_EQ(h->valid_start, 60);
  EXPECT_EQ(h->ring_high, 79);
  EXPECT_EQ(h->payload_bytes, 4096u);
  EXPECT_EQ(h->fingerprint, kFingerprint);
  EXPECT_EQ(h->key_hash, kKeyHash);
  // Split buffers verify the same way.
  EXPECT_TRUE(VerifyBlob(blob.data(), blob.data() + 64, 4096, Expect(4096)).ok());
  // valid_start may exceed written_end (a slot prepared for replay).
  const std::vector<uint8_t> replay = MakeBlob(16, 3, 0, 500, 0);
  EXPECT_TRUE(VerifyBlob(replay.data(), replay.size(), Expect(16)).ok());
}

TEST(Blob, EveryHeaderBitFlipIsRejected) {
  const std::vector<uint8_t> clean = MakeBlob(1000, 4);
  for (size_t bit = 0; bit < kBlobHeaderBytes * 8; ++bit) {
    std::vector<uint8_t> b = clean;
    b[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    absl::StatusOr<BlobHeader> h = VerifyBlob(b.data(), b.size(), Expect(1000));
    ASSERT_FALSE(h.ok()) << "bit " << bit;
    // A version this library does not read: FAILED_PRECONDITION; 3 -> 2 is
    // read, and its checksum fails.
    const bool other_version = (bit / 8 == 4 || bit / 8 == 5) && bit != 32;
    const absl::StatusCode want =
        other_version ? absl::StatusCode::kFailedPrecondition : absl::StatusCode::kDataLoss;
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
      absl::StatusOr<BlobHeader> h = VerifyBlob(b.data(), b.size(), Expect(300));
      ASSERT_FALSE(h.ok()) << "byte " << i << " = " << v;
      ASSERT_TRUE(absl::IsDataLoss(h.status()) || absl::IsFailedPrecondition(h.status()))
          << h.status();
    }
  }
}

TEST(Blob, PreciseErrors) {
  const std::vector<uint8_t> clean = MakeBlob(256, 6);
  const BlobExpectation expect = Expect(256);
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
  EXPECT_EQ(code(clean, {kFingerprint ^ 1, 256, kKeyHash}), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(code(clean, {kFingerprint, 512, kKeyHash}), absl::StatusCode::kFailedPrecondition);
  // Another version, even with a valid checksum (4 is the compression
  // section's, 5 the chunked tag's).
  std::vector<uint8_t> v6 = clean;
  WriteLe(&v6[4], 6, 2);
  ResealBlob(v6);
  EXPECT_EQ(code(v6, expect), absl::StatusCode::kFailedPrecondition);
  // The chunked-tag flag (bit 2) is a version 5 flag, only with the tag flag
  // and a chunk exponent of 6 ... 30 in byte 48; byte 48 is reserved
  // otherwise and bytes 49 ... 59 always.
  auto v5 = [&](uint32_t flags, uint8_t byte48, int version = 5, size_t also_set = 0) {
    std::vector<uint8_t> b = clean;
    WriteLe(&b[4], version, 2);
    WriteLe(&b[kBlobFlagsOffset], flags, 4);
    b[kBlobTagChunkOffset] = byte48;
    if (also_set != 0) b[also_set] = 1;
    ResealBlob(b);
    return code(b, expect);
  };
  const uint32_t chunked = kBlobFlagTagged | kBlobFlagChunkedTag;
  EXPECT_EQ(v5(chunked, 16), absl::StatusCode::kOk);
  EXPECT_EQ(v5(chunked, 6), absl::StatusCode::kOk);
  EXPECT_EQ(v5(chunked, 30), absl::StatusCode::kOk);
  EXPECT_EQ(v5(0, 0), absl::StatusCode::kOk);  // version 5, no chunked tag: like version 3
  EXPECT_EQ(v5(chunked, 5), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(v5(chunked, 31), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(v5(chunked, 0), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(v5(kBlobFlagChunkedTag, 16), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(v5(kBlobFlagTagged, 16), absl::StatusCode::kFailedPrecondition);  // byte 48 reserved
  EXPECT_EQ(v5(chunked, 16, 4), absl::StatusCode::kFailedPrecondition);      // a version 4 blob
  EXPECT_EQ(v5(chunked, 16, 5, 49), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(v5(chunked, 16, 5, 59), absl::StatusCode::kFailedPrecondition);
  // An authenticated blob's CRC is not recomputed (its HMAC tag covered the
  // same bytes); any other blob's is.
  std::vector<uint8_t> bad_crc = clean;
  bad_crc[kBlobChecksumOffset] ^= 1;
  BlobExpectation authenticated = expect;
  authenticated.authenticated = true;
  EXPECT_EQ(code(bad_crc, expect), absl::StatusCode::kDataLoss);
  EXPECT_EQ(code(bad_crc, authenticated), absl::StatusCode::kOk);
  // The compression flag (bit 1) is a version 4 flag; and one the cache does
  // not expect is refused as another writer's setting.
  std::vector<uint8_t> v4 = clean;
  WriteLe(&v4[4], 4, 2);
  WriteLe(&v4[kBlobFlagsOffset], kBlobFlagCompression, 4);
  ResealBlob(v4);
  EXPECT_EQ(code(v4, expect), absl::StatusCode::kFailedPrecondition);
  BlobExpectation with_section = expect;
  with_section.compression = true;
  EXPECT_EQ(code(v4, with_section), absl::StatusCode::kOk);
  EXPECT_EQ(code(clean, with_section), absl::StatusCode::kFailedPrecondition);
  // Unknown flag bits under a valid checksum: an incompatible writer.
  for (int bit = 1; bit < 32; ++bit) {
    std::vector<uint8_t> flags = clean;
    WriteLe(&flags[kBlobFlagsOffset], uint64_t{1} << bit, 4);
    ResealBlob(flags);
    EXPECT_EQ(code(flags, expect), absl::StatusCode::kFailedPrecondition) << "flag bit " << bit;
  }
  // Non-zero reserved bytes under a valid checksum: an incompatible writer.
  for (size_t i = kBlobReservedOffset; i < kBlobChecksumOffset; ++i) {
    std::vector<uint8_t> reserved = clean;
    reserved[i] = 1;
    ResealBlob(reserved);
    EXPECT_EQ(code(reserved, expect), absl::StatusCode::kFailedPrecondition) << "byte " << i;
  }
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

// A sound blob asked for under another key: another sequence's bytes, so
// DATA_LOSS (the blob saved under that key is gone), whether the reader's key
// differs or the blob's key hash was rewritten and resealed.
TEST(Blob, AnotherKeysBlobIsDataLoss) {
  const std::vector<uint8_t> clean = MakeBlob(256, 7);
  ASSERT_TRUE(VerifyBlob(clean.data(), clean.size(), Expect(256)).ok());
  const BlobExpectation other{kFingerprint, 256, BlobKeyHash("sequence/43")};
  absl::StatusOr<BlobHeader> h = VerifyBlob(clean.data(), clean.size(), other);
  ASSERT_EQ(h.status().code(), absl::StatusCode::kDataLoss) << h.status();
  EXPECT_NE(h.status().message().find("another key"), std::string_view::npos) << h.status();
  // One bit of the key hash, resealed.
  for (int bit = 0; bit < 64; ++bit) {
    std::vector<uint8_t> b = clean;
    b[kBlobKeyHashOffset + bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    ResealBlob(b);
    EXPECT_EQ(VerifyBlob(b.data(), b.size(), Expect(256)).status().code(),
              absl::StatusCode::kDataLoss)
        << "key hash bit " << bit;
  }
  // A blob of another layout and another key: the layout is named first (a
  // miss after a configuration change, not a mix-up).
  EXPECT_EQ(VerifyBlob(clean.data(), clean.size(), {kFingerprint ^ 1, 256, other.key_hash})
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

// Version 1 (before the key hash) is refused, naming the version, even when
// its checksum holds and its reserved bytes are zero: nothing says which key
// it was saved under.
TEST(Blob, VersionOneIsRefused) {
  std::vector<uint8_t> v1 = MakeBlob(256, 8);
  WriteLe(&v1[4], 1, 2);
  std::fill(v1.begin() + 36, v1.begin() + 60, 0);
  ResealBlob(v1);
  absl::StatusOr<BlobHeader> h = VerifyBlob(v1.data(), v1.size(), Expect(256));
  ASSERT_EQ(h.status().code(), absl::StatusCode::kFailedPrecondition) << h.status();
  EXPECT_NE(h.status().message().find("version is 1"), std::string_view::npos) << h.status();
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
    absl::StatusOr<BlobHeader> h = VerifyBlob(exact.get(), b.size(), Expect(payload));
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
