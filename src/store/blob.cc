#include "store/blob.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "store/crc32c.h"

namespace swa {
namespace {

template <typename T>
void PutLe(uint8_t* p, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
}

template <typename T>
T GetLe(const uint8_t* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= uint64_t{p[i]} << (8 * i);
  return static_cast<T>(v);
}

uint32_t BlobChecksum(const uint8_t* header, const uint8_t* payload, uint64_t payload_len) {
  return Crc32c(Crc32c(0, header, kBlobChecksumOffset), payload, payload_len);
}

}  // namespace

uint64_t BlobKeyHash(std::string_view key) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : key) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

void EncodeBlobHeader(const BlobHeader& h, const uint8_t* payload, uint8_t out[kBlobHeaderBytes]) {
  std::memset(out, 0, kBlobHeaderBytes);
  std::memcpy(out, kBlobMagic, 4);
  PutLe<uint16_t>(out + 4, h.version);
  PutLe<uint16_t>(out + 6, static_cast<uint16_t>(kBlobHeaderBytes));
  PutLe<uint64_t>(out + 8, h.fingerprint);
  PutLe<int32_t>(out + 16, h.written_end);
  PutLe<int32_t>(out + 20, h.valid_start);
  PutLe<uint64_t>(out + 24, h.payload_bytes);
  PutLe<int32_t>(out + 32, h.ring_high);
  PutLe<uint64_t>(out + kBlobKeyHashOffset, h.key_hash);
  PutLe<uint32_t>(out + kBlobFlagsOffset, h.flags);
  if ((h.flags & kBlobFlagChunkedTag) != 0) out[kBlobTagChunkOffset] = h.tag_chunk_log2;
  PutLe<uint32_t>(out + kBlobChecksumOffset, BlobChecksum(out, payload, h.payload_bytes));
}

absl::StatusOr<BlobHeader> VerifyBlob(const uint8_t hdr[kBlobHeaderBytes], const uint8_t* payload,
                                      uint64_t payload_len, const BlobExpectation& expect) {
  // Order matters: only a blob whose checksum holds can be blamed on another
  // writer (FAILED_PRECONDITION); anything before that is corruption, except
  // the version, which decides how the rest is read.
  if (std::memcmp(hdr, kBlobMagic, 4) != 0)
    return absl::DataLossError(absl::StrFormat(
        "blob magic is %02x %02x %02x %02x, expected \"SWAB\": not a swacache blob, or corrupt",
        hdr[0], hdr[1], hdr[2], hdr[3]));
  BlobHeader h;
  h.version = GetLe<uint16_t>(hdr + 4);
  if (h.version == 1)
    return absl::FailedPreconditionError(absl::StrFormat(
        "blob format version is 1, this library reads version %u only: version 1 blobs do not "
        "record their key, so they cannot be verified; save the slot again",
        kBlobVersion));
  if (h.version < kBlobOldestReadVersion || h.version > kBlobNewestReadVersion)
    return absl::FailedPreconditionError(absl::StrFormat(
        "blob format version is %u, this library reads versions %u ... %u", h.version,
        kBlobOldestReadVersion, kBlobNewestReadVersion));
  const uint16_t header_bytes = GetLe<uint16_t>(hdr + 6);
  if (header_bytes != kBlobHeaderBytes)
    return absl::DataLossError(absl::StrFormat(
        "blob header size field is %u, version %u headers are %u bytes", header_bytes,
        h.version, kBlobHeaderBytes));
  h.fingerprint = GetLe<uint64_t>(hdr + 8);
  h.written_end = GetLe<int32_t>(hdr + 16);
  h.valid_start = GetLe<int32_t>(hdr + 20);
  h.payload_bytes = GetLe<uint64_t>(hdr + 24);
  h.ring_high = GetLe<int32_t>(hdr + 32);
  h.key_hash = GetLe<uint64_t>(hdr + kBlobKeyHashOffset);
  h.checksum = GetLe<uint32_t>(hdr + kBlobChecksumOffset);
  // Version 2 had no flags: its bytes 44-47 are reserved, checked below.
  size_t reserved_from = h.version >= 3 ? kBlobReservedOffset : kBlobFlagsOffset;
  if (h.version >= 3) h.flags = GetLe<uint32_t>(hdr + kBlobFlagsOffset);
  // Version 5 with the chunked tag: byte 48 is the chunk exponent.
  if (h.version >= kBlobChunkedTagVersion && (h.flags & kBlobFlagChunkedTag) != 0) {
    h.tag_chunk_log2 = hdr[kBlobTagChunkOffset];
    reserved_from = kBlobTagChunkOffset + 1;
  }
  if (h.payload_bytes != payload_len)
    return absl::DataLossError(absl::StrFormat(
        "blob holds %u payload bytes but its header says %u: truncated or extended", payload_len,
        h.payload_bytes));
  // An authenticated blob's checksum holds (blob.h, BlobExpectation).
  if (!expect.authenticated) {
    const uint32_t computed = BlobChecksum(hdr, payload, payload_len);
    if (computed != h.checksum)
      return absl::DataLossError(absl::StrFormat(
          "blob checksum mismatch: header says 0x%08x, the %u bytes give 0x%08x (corrupt)",
          h.checksum, kBlobHeaderBytes + payload_len, computed));
  }
  const uint32_t known =
      kBlobFlagTagged | (h.version >= kBlobCompressionVersion ? kBlobFlagCompression : 0) |
      (h.version >= kBlobChunkedTagVersion ? kBlobFlagChunkedTag : 0);
  if ((h.flags & ~known) != 0)
    return absl::FailedPreconditionError(absl::StrFormat(
        "blob flags are 0x%08x, this library knows 0x%08x only in a version %u blob: written by "
        "an incompatible writer",
        h.flags, known, h.version));
  if ((h.flags & kBlobFlagChunkedTag) != 0 &&
      ((h.flags & kBlobFlagTagged) == 0 || h.tag_chunk_log2 < kBlobTagChunkLog2Min ||
       h.tag_chunk_log2 > kBlobTagChunkLog2Max))
    return absl::FailedPreconditionError(absl::StrFormat(
        "blob flags are 0x%08x with tag chunk exponent %u: a chunked tag needs the tag flag and "
        "an exponent of %u ... %u; written by an incompatible writer",
        h.flags, h.tag_chunk_log2, kBlobTagChunkLog2Min, kBlobTagChunkLog2Max));
  for (size_t i = reserved_from; i < kBlobChecksumOffset; ++i)
    if (hdr[i] != 0)
      return absl::FailedPreconditionError(absl::StrFormat(
          "blob header byte %u is 0x%02x, not zero: written by an incompatible writer", i,
          hdr[i]));
  if (h.fingerprint != expect.fingerprint)
    return absl::FailedPreconditionError(absl::StrFormat(
        "blob was written for layout fingerprint 0x%016x, this cache's layout is 0x%016x",
        h.fingerprint, expect.fingerprint));
  if (((h.flags & kBlobFlagCompression) != 0) != expect.compression)
    return absl::FailedPreconditionError(absl::StrFormat(
        "blob %s the compression section and this cache %s it "
        "(swa_cache_set_save_compression must match the saver's)",
        (h.flags & kBlobFlagCompression) != 0 ? "carries" : "lacks",
        expect.compression ? "expects" : "does not expect"));
  if (h.payload_bytes != expect.payload_bytes)
    return absl::FailedPreconditionError(absl::StrFormat(
        "blob payload is %u bytes, this cache stores %u bytes per slot", h.payload_bytes,
        expect.payload_bytes));
  // A sound blob of this layout, saved under another key and then copied or
  // renamed to this one: its bytes are another sequence's, so the blob this
  // key was saved with is lost.
  if (h.key_hash != expect.key_hash)
    return absl::DataLossError(absl::StrFormat(
        "blob was saved under another key (its key hash is 0x%016x, this key's is 0x%016x): "
        "copied or renamed here from another key",
        h.key_hash, expect.key_hash));
  // valid_start may exceed written_end (a slot prepared for replay); both are
  // positions, so neither may be negative.
  if (h.valid_start < 0 || h.written_end < 0 || h.ring_high < 0)
    return absl::DataLossError(absl::StrFormat(
        "blob positions are invalid: valid_start = %d, written_end = %d, ring_high = %d",
        h.valid_start, h.written_end, h.ring_high));
  return h;
}

absl::StatusOr<BlobHeader> VerifyBlob(const uint8_t* blob, uint64_t blob_len,
                                      const BlobExpectation& expect) {
  if (blob_len < kBlobHeaderBytes)
    return absl::DataLossError(absl::StrFormat(
        "blob is %u bytes, shorter than its %u-byte header: truncated", blob_len,
        kBlobHeaderBytes));
  return VerifyBlob(blob, blob + kBlobHeaderBytes, blob_len - kBlobHeaderBytes, expect);
}

}  // namespace swa
