// An engine's swa_kv_store_t seen as a KvStore: statuses and messages of the
// callbacks converted (messages copied out of a per-call buffer), NULL
// entries as UNIMPLEMENTED, and release called exactly once, when the
// CallbackStore is destroyed.
#pragma once

#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "store/kv_store.h"
#include "swacache.h"

namespace swa::capi {

static_assert(kMaxKeyBytes == SWA_STORE_MAX_KEY_BYTES);

// Whether `value` is a swa_status_t other than SWA_OK.
inline bool IsErrorStatus(int value) { return value >= 1 && value <= SWA_UNAUTHENTICATED; }

// A callback's status as a store error, or UNKNOWN for a value that is not a
// swa_status_t (named in the message). `message` is read up to its NUL. The
// code is taken as an int: a C callback may return any value, and reading an
// out-of-range value through the C++ enum type would be undefined.
absl::Status FromCallbackStatus(int code, const char* message);

class CallbackStore final : public KvStore {
 public:
  // INVALID_ARGUMENT for a bad struct_size (capi/struct_versions.h) or a
  // table with neither put nor get; `table` is read whole (AdoptTable copies
  // an engine's table over the defaults first). On success the CallbackStore owns table.user_data; on failure the
  // caller still does.
  static absl::StatusOr<std::unique_ptr<CallbackStore>> Create(const swa_kv_store_t& table);
  ~CallbackStore() override;
  // Gives table.user_data back to the caller: release will not be called.
  void Disown() { table_.release = nullptr; }
  CallbackStore(const CallbackStore&) = delete;
  CallbackStore& operator=(const CallbackStore&) = delete;

  absl::Status Put(std::string_view key, absl::Span<const ConstByteSpan> pieces) override;
  absl::StatusOr<uint64_t> Get(std::string_view key, absl::Span<const ByteSpan> pieces) override;
  absl::StatusOr<bool> Exists(std::string_view key) override;
  absl::Status Remove(std::string_view key) override;

 private:
  explicit CallbackStore(const swa_kv_store_t& table) : table_(table) {}

  swa_kv_store_t table_;
};

}  // namespace swa::capi
