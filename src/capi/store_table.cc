#include "capi/store_table.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <string_view>
#include <vector>

#include "capi/callback_store.h"
#include "capi/struct_versions.h"
#include "common/status_macros.h"

namespace swa::capi {
namespace {

std::string_view KeyView(const uint8_t* key, size_t key_len) {
  return std::string_view(reinterpret_cast<const char*>(key), key_len);
}

// Writes `status`'s message into a callback's message buffer; returns its code.
swa_status_t ToCallbackStatus(const absl::Status& status, char* message, size_t message_cap) {
  if (status.ok()) return SWA_OK;
  if (message != nullptr && message_cap > 0) {
    const size_t n = std::min(status.message().size(), message_cap - 1);
    std::memcpy(message, status.message().data(), n);
    message[n] = '\0';
  }
  const int code = static_cast<int>(status.code());
  return IsErrorStatus(code) ? static_cast<swa_status_t>(code) : SWA_UNKNOWN;
}

// Runs `fn` and converts its status; no exception crosses into C.
template <typename Fn>
swa_status_t Trampoline(char* message, size_t message_cap, Fn&& fn) noexcept {
  try {
    return ToCallbackStatus(fn(), message, message_cap);
  } catch (const std::bad_alloc&) {
    return ToCallbackStatus(absl::ResourceExhaustedError("out of host memory"), message,
                            message_cap);
  } catch (...) {
    return ToCallbackStatus(absl::InternalError("unexpected exception in a built-in store"),
                            message, message_cap);
  }
}

KvStore* Self(void* user_data) { return static_cast<KvStore*>(user_data); }

template <typename Span, typename Iov>
std::vector<Span> ToSpans(const Iov* iov, size_t n_iov) {
  std::vector<Span> spans;
  spans.reserve(n_iov);
  for (size_t i = 0; i < n_iov; ++i)
    spans.emplace_back(static_cast<uint8_t*>(iov[i].data), iov[i].size);
  return spans;
}

swa_status_t PutCb(void* ud, const uint8_t* key, size_t key_len, const swa_iov_t* iov,
                   size_t n_iov, char* msg, size_t cap) {
  return Trampoline(msg, cap, [&] {
    return Self(ud)->Put(KeyView(key, key_len), ToSpans<ConstByteSpan>(iov, n_iov));
  });
}

swa_status_t GetCb(void* ud, const uint8_t* key, size_t key_len, const swa_iov_t* iov,
                   size_t n_iov, uint64_t* blob_size, char* msg, size_t cap) {
  return Trampoline(msg, cap, [&]() -> absl::Status {
    absl::StatusOr<uint64_t> size =
        Self(ud)->Get(KeyView(key, key_len), ToSpans<ByteSpan>(iov, n_iov));
    if (!size.ok()) return size.status();
    *blob_size = *size;
    return absl::OkStatus();
  });
}

swa_status_t ExistsCb(void* ud, const uint8_t* key, size_t key_len, uint32_t* exists, char* msg,
                      size_t cap) {
  return Trampoline(msg, cap, [&]() -> absl::Status {
    absl::StatusOr<bool> found = Self(ud)->Exists(KeyView(key, key_len));
    if (!found.ok()) return found.status();
    *exists = *found ? 1 : 0;
    return absl::OkStatus();
  });
}

swa_status_t RemoveCb(void* ud, const uint8_t* key, size_t key_len, char* msg, size_t cap) {
  return Trampoline(msg, cap, [&] { return Self(ud)->Remove(KeyView(key, key_len)); });
}

void ReleaseCb(void* ud) { delete Self(ud); }

}  // namespace

swa_kv_store_t MakeStoreTable(std::unique_ptr<KvStore> store) {
  swa_kv_store_t t;
  InitStruct(&t);
  t.user_data = store.release();
  t.put = &PutCb;
  t.get = &GetCb;
  t.exists = &ExistsCb;
  t.remove = &RemoveCb;
  t.release = &ReleaseCb;
  return t;
}

KvStore* StoreFromTable(const swa_kv_store_t& table) {
  if (!CheckStructSize<swa_kv_store_t>(table.struct_size).ok() || table.put != &PutCb || table.get != &GetCb ||
      table.exists != &ExistsCb || table.remove != &RemoveCb || table.release != &ReleaseCb)
    return nullptr;
  return Self(table.user_data);
}

absl::StatusOr<std::unique_ptr<KvStore>> AdoptTable(const swa_kv_store_t& caller_table) {
  SWA_RETURN_IF_ERROR(CheckStructSize<swa_kv_store_t>(caller_table.struct_size));
  const swa_kv_store_t table =
      ReadStructBytes<swa_kv_store_t>(&caller_table, caller_table.struct_size);
  // Ours: ReleaseCb would delete the store, so owning it directly is the same.
  if (KvStore* own = StoreFromTable(table); own != nullptr) return std::unique_ptr<KvStore>(own);
  absl::StatusOr<std::unique_ptr<CallbackStore>> wrapped = CallbackStore::Create(table);
  if (!wrapped.ok()) return wrapped.status();
  return std::unique_ptr<KvStore>(std::move(*wrapped));
}

}  // namespace swa::capi
