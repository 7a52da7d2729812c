// Authenticated blobs and tenant namespaces (docs/store.md, "Threat model").
//
// A cache given a store secret tags every blob it saves with an HMAC-SHA-256
// (OpenSSL libcrypto); the 32-byte tag follows the payload in the store. A
// restore recomputes it over what the store returned and compares in constant
// time before anything else is looked at. Two constructions, told apart by
// the header (which both cover first, so that no input of one is an input of
// the other):
//
// Single-pass (versions 3 and 4, flags bit kBlobFlagTagged): HMAC over, in
// this order, the 64-byte header as written (CRC included), the full store
// key's length as a u64 little-endian, the full store key (namespace,
// fingerprint and engine key: BlobStore::FullKey), and the payload. Still
// verified; no longer written.
//
// Chunked (version 5, flags bits kBlobFlagTagged | kBlobFlagChunkedTag, byte
// 48 = c): the payload of L bytes is cut into n = ceil(L / 2^c) chunks of
// 2^c bytes (the last one shorter), d_i = SHA-256(chunk i), hashed in
// parallel (store/hash_workers.h); the tag is the HMAC over the header as
// written, u64 key length, the full key, u64 L, u64 n, then d_0 ... d_(n-1)
// (all integers little-endian). Written by every save with a secret.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace swa {

inline constexpr size_t kBlobTagBytes = 32;  // HMAC-SHA-256, not truncated
inline constexpr size_t kMinStoreSecretBytes = 16;
inline constexpr size_t kMaxStoreSecretBytes = 1024;
inline constexpr size_t kMaxStoreNamespaceBytes = 256;

// The secret of one cache: copied from the caller, wiped (OPENSSL_cleanse)
// when the last holder drops it. Immutable and thread-safe.
class BlobSecret {
 public:
  // INVALID_ARGUMENT naming `what` unless kMinStoreSecretBytes <= size <=
  // kMaxStoreSecretBytes.
  static absl::StatusOr<std::shared_ptr<const BlobSecret>> Create(absl::Span<const uint8_t> bytes,
                                                                   const char* what);
  ~BlobSecret();
  BlobSecret(const BlobSecret&) = delete;
  BlobSecret& operator=(const BlobSecret&) = delete;

  // The single-pass tag of a blob (see the top of this file). INTERNAL when
  // libcrypto fails.
  absl::Status Tag(const uint8_t* header, std::string_view full_key, const uint8_t* payload,
                   uint64_t payload_len, uint8_t out[kBlobTagBytes]) const;
  // The chunked tag, chunks of 2^chunk_log2 bytes hashed on up to `threads`
  // threads (0: DefaultHashThreads()). `header` must already say so (version
  // 5, kBlobFlagChunkedTag, chunk_log2 in byte 48). INVALID_ARGUMENT for a
  // chunk_log2 outside kBlobTagChunkLog2Min ... Max; INTERNAL when libcrypto
  // fails.
  absl::Status TagChunked(const uint8_t* header, std::string_view full_key,
                          const uint8_t* payload, uint64_t payload_len, uint8_t chunk_log2,
                          size_t threads, uint8_t out[kBlobTagBytes]) const;
  // The chunked tag's HMAC over the header, the key and the chunk digests
  // (n * kBlobTagBytes bytes, n = digests.size() / kBlobTagBytes).
  absl::Status TagFromDigests(const uint8_t* header, std::string_view full_key,
                              uint64_t payload_len, absl::Span<const uint8_t> digests,
                              uint8_t out[kBlobTagBytes]) const;
  // OK when `tag` is the blob's tag (CRYPTO_memcmp, constant time), computed
  // by the construction its header names (version 5 with kBlobFlagChunkedTag:
  // chunked, on up to `threads` threads; else single-pass); DATA_LOSS
  // otherwise (a chunk exponent out of range too), and INTERNAL when
  // libcrypto fails.
  absl::Status Verify(const uint8_t* header, std::string_view full_key, const uint8_t* payload,
                      uint64_t payload_len, const uint8_t tag[kBlobTagBytes],
                      size_t threads = 0) const;

 private:
  explicit BlobSecret(absl::Span<const uint8_t> bytes) : bytes_(bytes.begin(), bytes.end()) {}
  std::vector<uint8_t> bytes_;
};

// SHA-256 of one chunk of a chunked tag. INTERNAL when libcrypto fails.
absl::Status ChunkDigest(const uint8_t* chunk, uint64_t len, uint8_t out[kBlobTagBytes]);
// The chunk exponent a (not yet authenticated) header names for a chunked
// tag (version >= 5 and kBlobFlagChunkedTag: byte 48, in range or not), or
// nullopt for the single-pass tag.
std::optional<uint8_t> NamedTagChunkLog2(const uint8_t* header);
// DATA_LOSS unless kBlobTagChunkLog2Min <= chunk_log2 <= kBlobTagChunkLog2Max.
absl::Status CheckTagChunkLog2(uint8_t chunk_log2);
// OK when `tag` equals `want` (CRYPTO_memcmp, constant time), else DATA_LOSS.
absl::Status MatchTag(const uint8_t want[kBlobTagBytes], const uint8_t tag[kBlobTagBytes]);

// INVALID_ARGUMENT naming `what` unless the namespace is empty (none) or
// 1 ... kMaxStoreNamespaceBytes bytes long. Any byte values are allowed.
absl::Status CheckStoreNamespace(std::string_view name_space, const char* what);

// The prefix a namespace puts in front of a cache's store keys: "" for none,
// else "ns" + decimal length + ":" + the namespace's bytes. Length-prefixed,
// so no two namespaces' prefixed keys can be equal, and none equals an
// un-namespaced key (those start with a hex digit, never 'n').
std::string StoreNamespacePrefix(std::string_view name_space);

// The chunk exponent saves use: 64 KiB chunks (docs/perf/store-auth-2026-12-03-evening.md).
inline constexpr uint8_t kDefaultTagChunkLog2 = 16;

// What a cache's BlobStore needs besides its layout fingerprint.
struct BlobStoreSecurity {
  std::string name_space;                    // "" = none
  std::shared_ptr<const BlobSecret> secret;  // nullptr = untagged blobs
  // Chunked tags: the chunk exponent saves write (0: the single-pass tag of
  // versions 3 and 4 instead, as earlier releases wrote), and the threads
  // that hash chunks (0: DefaultHashThreads()). Tests and benchmarks set them.
  uint8_t tag_chunk_log2 = kDefaultTagChunkLog2;
  size_t tag_threads = 0;
};

}  // namespace swa
