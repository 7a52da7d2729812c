// Wraps an engine's (or a built-in) swa_kv_store_t for one cache: prefixes
// keys with the layout fingerprint, converts callback statuses and copies
// their messages, writes and reads verified blobs, and calls release once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "store/blob.h"
#include "swacache.h"

namespace swa {

class StoreAdaptor {
 public:
  // Validates `table` (struct_size, at least one of put/get). On success the
  // adaptor owns table.user_data; on failure the caller still does.
  static absl::StatusOr<std::shared_ptr<StoreAdaptor>> Create(const swa_kv_store_t& table,
                                                              uint64_t fingerprint);
  ~StoreAdaptor();
  StoreAdaptor(const StoreAdaptor&) = delete;
  StoreAdaptor& operator=(const StoreAdaptor&) = delete;

  // INVALID_ARGUMENT unless 1 <= key.size() <= SWA_STORE_MAX_KEY_BYTES.
  static absl::Status CheckKey(std::string_view key);
  // "<16 hex digits of the fingerprint>:" + key.
  std::string FullKey(std::string_view key) const;

  // One blob = header (computed here) + `payload` (host memory, read in place).
  absl::Status WriteBlob(std::string_view key, const BlobHeader& header, const uint8_t* payload);
  // Reads the blob under `key` into `header_buf` + `payload_buf` (expect.payload_bytes)
  // and verifies all of it; explains a blob of the wrong size by its header.
  absl::StatusOr<BlobHeader> ReadBlob(std::string_view key, const BlobExpectation& expect,
                                      uint8_t* header_buf, uint8_t* payload_buf);
  absl::StatusOr<bool> Exists(std::string_view key);
  absl::Status Remove(std::string_view key);

  // The raw callbacks with the key prefixed (UNIMPLEMENTED when NULL).
  absl::Status Put(std::string_view key, absl::Span<const swa_iov_t> iov);
  absl::Status Get(std::string_view key, absl::Span<const swa_iov_t> iov, uint64_t* blob_size);

  uint64_t fingerprint() const { return fingerprint_; }

 private:
  StoreAdaptor(const swa_kv_store_t& table, uint64_t fingerprint)
      : table_(table), fingerprint_(fingerprint) {}
  absl::Status ExplainSizeMismatch(std::string_view key, uint64_t blob_size,
                                   const BlobExpectation& expect);

  swa_kv_store_t table_;
  uint64_t fingerprint_;
};

}  // namespace swa
