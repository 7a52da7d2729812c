// One cache's view of its KV store: keys prefixed with the cache's namespace
// and layout fingerprint, store errors named by call and key, and verified
// blobs (header + payload, + an HMAC tag when the cache has a store secret:
// store/blob_auth.h) written and read. Owns the KvStore: dropping the last
// reference destroys it (for an engine's table, that calls release once).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "store/blob.h"
#include "store/blob_auth.h"
#include "store/kv_store.h"

namespace swa {

class BlobStore {
 public:
  BlobStore(std::unique_ptr<KvStore> store, uint64_t fingerprint,
            BlobStoreSecurity security = {})
      : store_(std::move(store)),
        fingerprint_(fingerprint),
        security_(std::move(security)),
        prefix_(StoreNamespacePrefix(security_.name_space)) {}
  BlobStore(const BlobStore&) = delete;
  BlobStore& operator=(const BlobStore&) = delete;

  // INVALID_ARGUMENT unless 1 <= key.size() <= kMaxKeyBytes.
  static absl::Status CheckKey(std::string_view key);
  // StoreNamespacePrefix(namespace) + "<16 hex digits of the fingerprint>:" + key.
  std::string FullKey(std::string_view key) const;
  // Bytes of a whole blob of `payload_bytes` as this store writes it.
  uint64_t BlobBytes(uint64_t payload_bytes) const {
    return kBlobHeaderBytes + payload_bytes + (tagged() ? kBlobTagBytes : 0);
  }
  bool tagged() const { return security_.secret != nullptr; }

  // One blob = header (computed here) + `payload` (host memory, read in place)
  // + the HMAC tag when tagged(). header.key_hash and header.flags (but the
  // compression bit) are ignored: the blob is bound to `key` here; a tagged
  // blob is version 5 with the chunked tag unless
  // security.tag_chunk_log2 is 0 (store/blob_auth.h).
  absl::Status WriteBlob(std::string_view key, const BlobHeader& header, const uint8_t* payload);
  // Reads the blob under `key` into `header_buf` + `payload_buf` (expect.payload_bytes)
  // + `tag_buf` (kBlobTagBytes; used when tagged(), may be nullptr otherwise)
  // and verifies all of it, against the hash of `key` (expect.key_hash is
  // ignored); explains a blob of the wrong size by its header. When tagged(),
  // the tag is checked first, and any blob without a valid tag is DATA_LOSS;
  // when not, a tagged blob is DATA_LOSS. Errors name the key.
  absl::StatusOr<BlobHeader> ReadBlob(std::string_view key, const BlobExpectation& expect,
                                      uint8_t* header_buf, uint8_t* payload_buf,
                                      uint8_t* tag_buf);
  absl::StatusOr<bool> Exists(std::string_view key);
  // The index of the first of `keys` (engine keys, each checked) present, -1
  // when none is (KvStore::FirstPresent); a store error names the key and its index.
  absl::StatusOr<int64_t> FirstPresent(absl::Span<const std::string_view> keys);
  absl::Status Remove(std::string_view key);

  // The store's calls with the key prefixed and errors named.
  absl::Status Put(std::string_view key, absl::Span<const ConstByteSpan> pieces);
  absl::StatusOr<uint64_t> Get(std::string_view key, absl::Span<const ByteSpan> pieces);

  uint64_t fingerprint() const { return fingerprint_; }
  KvStore& kv_store() const { return *store_; }

 private:
  absl::Status ExplainSizeMismatch(std::string_view key, uint64_t blob_size,
                                   const BlobExpectation& expect);

  std::unique_ptr<KvStore> store_;
  uint64_t fingerprint_;
  BlobStoreSecurity security_;
  std::string prefix_;  // StoreNamespacePrefix(security_.name_space)
};

}  // namespace swa
