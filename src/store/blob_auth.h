// Authenticated blobs and tenant namespaces (docs/store.md, "Threat model").
//
// A cache given a store secret tags every blob it saves with an HMAC-SHA-256
// (OpenSSL libcrypto) over, in this order: the 64-byte header as written
// (flags bit kBlobFlagTagged set, CRC included), the full store key's length
// as a u64 little-endian, the full store key (namespace, fingerprint and
// engine key: BlobStore::FullKey), and the payload. The 32-byte tag follows
// the payload in the store. A restore recomputes it over what the store
// returned and compares in constant time before anything else is looked at.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
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

  // The tag of a blob (see the top of this file). INTERNAL when libcrypto fails.
  absl::Status Tag(const uint8_t* header, std::string_view full_key, const uint8_t* payload,
                   uint64_t payload_len, uint8_t out[kBlobTagBytes]) const;
  // OK when `tag` is the blob's tag (CRYPTO_memcmp, constant time); DATA_LOSS
  // otherwise, and INTERNAL when libcrypto fails.
  absl::Status Verify(const uint8_t* header, std::string_view full_key, const uint8_t* payload,
                      uint64_t payload_len, const uint8_t tag[kBlobTagBytes]) const;

 private:
  explicit BlobSecret(absl::Span<const uint8_t> bytes) : bytes_(bytes.begin(), bytes.end()) {}
  std::vector<uint8_t> bytes_;
};

// INVALID_ARGUMENT naming `what` unless the namespace is empty (none) or
// 1 ... kMaxStoreNamespaceBytes bytes long. Any byte values are allowed.
absl::Status CheckStoreNamespace(std::string_view name_space, const char* what);

// The prefix a namespace puts in front of a cache's store keys: "" for none,
// else "ns" + decimal length + ":" + the namespace's bytes. Length-prefixed,
// so no two namespaces' prefixed keys can be equal, and none equals an
// un-namespaced key (those start with a hex digit, never 'n').
std::string StoreNamespacePrefix(std::string_view name_space);

// What a cache's BlobStore needs besides its layout fingerprint.
struct BlobStoreSecurity {
  std::string name_space;                    // "" = none
  std::shared_ptr<const BlobSecret> secret;  // nullptr = untagged blobs
};

}  // namespace swa
