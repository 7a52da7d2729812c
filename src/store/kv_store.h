// The C++ side of a store: the built-in stores implement KvStore and are
// handed to C as a swa_kv_store_t whose callbacks forward to it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "swacache.h"

namespace swa {

class KvStore {
 public:
  virtual ~KvStore() = default;
  // The contracts of the swa_kv_store_t entries of the same names.
  virtual absl::Status Put(std::string_view key, absl::Span<const swa_iov_t> iov) = 0;
  virtual absl::Status Get(std::string_view key, absl::Span<const swa_iov_t> iov,
                           uint64_t* blob_size) = 0;
  virtual absl::StatusOr<bool> Exists(std::string_view key) = 0;
  virtual absl::Status Remove(std::string_view key) = 0;
};

// A callback table that owns `store` (release deletes it).
swa_kv_store_t MakeStoreTable(std::unique_ptr<KvStore> store);

// The KvStore behind a table made by MakeStoreTable, or nullptr for any other table.
KvStore* StoreFromTable(const swa_kv_store_t& table);

// Writes `status`'s message into a callback's message buffer; returns its code.
swa_status_t ToCallbackStatus(const absl::Status& status, char* message, size_t message_cap);

// Total bytes described by an iov array.
uint64_t IovBytes(absl::Span<const swa_iov_t> iov);

// A key as text for messages: printable bytes as they are, others escaped,
// long keys shortened.
std::string PrintableKey(std::string_view key);

}  // namespace swa
