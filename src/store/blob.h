// The persisted form of a slot's stored region (docs/semantics.md, "Store blob"): a fixed
// 64-byte little-endian header followed by the payload (the stored bytes).
//
//   0  "SWAB"              4 magic
//   4  u16 version (3)     6 u16 header bytes (64)
//   8  u64 layout fingerprint
//  16  i32 written_end    20 i32 valid_start
//  24  u64 payload bytes
//  32  i32 ring_high (highest position + 1 ever stored in the rings)
//  36  u64 key hash (BlobKeyHash of the engine key the blob was saved under)
//  44  u32 flags (version 3; bit 0 kBlobFlagTagged: a 32-byte HMAC-SHA-256 tag
//      follows the payload, store/blob_auth.h; version 4: bit 1
//      kBlobFlagCompression: the payload ends with the compression section,
//      docs/store.md; version 5: bit 2 kBlobFlagChunkedTag, with bit 0: the
//      tag is the chunked construction; other bits zero)
//  48  u8 tag chunk exponent (version 5 with bit 2 only: the tag hashes the
//      payload in chunks of 2^this bytes; else reserved, zero)
//  49  11 reserved bytes, zero
//  60  u32 CRC32C of header bytes [0, 60) followed by the payload
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace swa {

inline constexpr size_t kBlobHeaderBytes = 64;
// Version 2 added the key hash; version 1 blobs (no key) are refused.
// Version 3 added the flags (bytes 44-47, reserved and zero in version 2):
// version 2 blobs are still read, as untagged blobs.
// Version 4 added the compression section (flag bit 1). It is written only
// by blobs that carry the section, so that readers of version 3 refuse those
// by their version; blobs without it stay version 3.
// Version 5 added the chunked tag (flag bit 2 and the chunk exponent in byte
// 48). It is written only by tagged blobs, which carry it, so that readers of
// versions 3 and 4 refuse those by their version; untagged blobs stay version
// 3 (4 with the compression section).
inline constexpr uint16_t kBlobVersion = 3;
inline constexpr uint16_t kBlobCompressionVersion = 4;
inline constexpr uint16_t kBlobChunkedTagVersion = 5;
inline constexpr uint16_t kBlobNewestReadVersion = 5;
inline constexpr uint16_t kBlobOldestReadVersion = 2;
inline constexpr uint8_t kBlobMagic[4] = {'S', 'W', 'A', 'B'};
inline constexpr size_t kBlobKeyHashOffset = 36;
inline constexpr size_t kBlobFlagsOffset = 44;
inline constexpr size_t kBlobReservedOffset = 48;
inline constexpr size_t kBlobTagChunkOffset = 48;
inline constexpr uint32_t kBlobFlagTagged = 1;
inline constexpr uint32_t kBlobFlagCompression = 2;
inline constexpr uint32_t kBlobFlagChunkedTag = 4;
// The chunk exponents a version 5 blob may carry: 64 B ... 1 GiB chunks.
inline constexpr uint8_t kBlobTagChunkLog2Min = 6;
inline constexpr uint8_t kBlobTagChunkLog2Max = 30;
inline constexpr size_t kBlobChecksumOffset = 60;

struct BlobHeader {
  uint16_t version = kBlobVersion;
  uint64_t fingerprint = 0;
  int32_t written_end = 0;
  int32_t valid_start = 0;
  int32_t ring_high = 0;
  uint64_t payload_bytes = 0;
  uint64_t key_hash = 0;
  uint32_t flags = 0;
  uint8_t tag_chunk_log2 = 0;  // byte 48: only with kBlobFlagChunkedTag, else 0
  uint32_t checksum = 0;
};

// What the reader expects: the cache's layout fingerprint and stored bytes,
// and the hash of the key it asked for.
struct BlobExpectation {
  uint64_t fingerprint = 0;
  uint64_t payload_bytes = 0;
  uint64_t key_hash = 0;
  // The payload ends with the compression section (kBlobFlagCompression).
  bool compression = false;
  // The blob's HMAC tag has been verified (BlobSecret::Verify): it covers the
  // header, CRC field included, and the payload, every byte the CRC32C
  // covers, and only a holder of the secret could have written them, having
  // computed the CRC over the same bytes; so the CRC is not recomputed.
  bool authenticated = false;
};

// 64-bit FNV-1a of the engine key's bytes (offset basis 0xcbf29ce484222325,
// prime 0x100000001b3), byte by byte: the same on every platform and in every
// version, since it is persisted. It binds a blob to the key it was saved
// under, against mix-ups, not against forgery.
uint64_t BlobKeyHash(std::string_view key);

// Writes the header for `payload` (host memory, header.payload_bytes long)
// into `out`; the checksum field of `header` is ignored and computed here.
void EncodeBlobHeader(const BlobHeader& header, const uint8_t* payload,
                      uint8_t out[kBlobHeaderBytes]);

// Verifies a blob whose header and payload may live in separate buffers;
// `payload_len` is how many payload bytes the store actually returned.
// DATA_LOSS: bad magic, truncation or extension, checksum mismatch, bad fields,
// or a valid blob saved under another key (key hash mismatch).
// FAILED_PRECONDITION: another format version, another layout, or a blob that
// was written by an incompatible writer (non-zero reserved bytes).
absl::StatusOr<BlobHeader> VerifyBlob(const uint8_t header[kBlobHeaderBytes],
                                      const uint8_t* payload, uint64_t payload_len,
                                      const BlobExpectation& expect);

// The same for a contiguous blob of any length (shorter than a header too).
absl::StatusOr<BlobHeader> VerifyBlob(const uint8_t* blob, uint64_t blob_len,
                                      const BlobExpectation& expect);

}  // namespace swa
