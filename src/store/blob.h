// The persisted form of a slot's stored region (docs/semantics.md, "Store blob"): a fixed
// 64-byte little-endian header followed by the payload (the stored bytes).
//
//   0  "SWAB"              4 magic
//   4  u16 version (1)     6 u16 header bytes (64)
//   8  u64 layout fingerprint
//  16  i32 written_end    20 i32 valid_start
//  24  u64 payload bytes
//  32  i32 ring_high (highest position + 1 ever stored in the rings)
//  36  24 reserved bytes, zero
//  60  u32 CRC32C of header bytes [0, 60) followed by the payload
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"

namespace swa {

inline constexpr size_t kBlobHeaderBytes = 64;
inline constexpr uint16_t kBlobVersion = 1;
inline constexpr uint8_t kBlobMagic[4] = {'S', 'W', 'A', 'B'};
inline constexpr size_t kBlobReservedOffset = 36;
inline constexpr size_t kBlobChecksumOffset = 60;

struct BlobHeader {
  uint16_t version = kBlobVersion;
  uint64_t fingerprint = 0;
  int32_t written_end = 0;
  int32_t valid_start = 0;
  int32_t ring_high = 0;
  uint64_t payload_bytes = 0;
  uint32_t checksum = 0;
};

// What the reader expects: the cache's layout fingerprint and stored bytes.
struct BlobExpectation {
  uint64_t fingerprint = 0;
  uint64_t payload_bytes = 0;
};

// Writes the header for `payload` (host memory, header.payload_bytes long)
// into `out`; the checksum field of `header` is ignored and computed here.
void EncodeBlobHeader(const BlobHeader& header, const uint8_t* payload,
                      uint8_t out[kBlobHeaderBytes]);

// Verifies a blob whose header and payload may live in separate buffers;
// `payload_len` is how many payload bytes the store actually returned.
// DATA_LOSS: bad magic, truncation or extension, checksum mismatch, bad fields.
// FAILED_PRECONDITION: another format version, another layout, or a blob that
// was written by an incompatible writer (non-zero reserved bytes).
absl::StatusOr<BlobHeader> VerifyBlob(const uint8_t header[kBlobHeaderBytes],
                                      const uint8_t* payload, uint64_t payload_len,
                                      const BlobExpectation& expect);

// The same for a contiguous blob of any length (shorter than a header too).
absl::StatusOr<BlobHeader> VerifyBlob(const uint8_t* blob, uint64_t blob_len,
                                      const BlobExpectation& expect);

}  // namespace swa
