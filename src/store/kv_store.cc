#include "store/kv_store.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace swa {
namespace {

std::string_view KeyView(const uint8_t* key, size_t key_len) {
  return std::string_view(reinterpret_cast<const char*>(key), key_len);
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

swa_status_t PutCb(void* ud, const uint8_t* key, size_t key_len, const swa_iov_t* iov,
                   size_t n_iov, char* msg, size_t cap) {
  return Trampoline(msg, cap, [&] {
    return Self(ud)->Put(KeyView(key, key_len), absl::MakeConstSpan(iov, n_iov));
  });
}

swa_status_t GetCb(void* ud, const uint8_t* key, size_t key_len, const swa_iov_t* iov,
                   size_t n_iov, uint64_t* blob_size, char* msg, size_t cap) {
  return Trampoline(msg, cap, [&] {
    return Self(ud)->Get(KeyView(key, key_len), absl::MakeConstSpan(iov, n_iov), blob_size);
  });
}

swa_status_t ExistsCb(void* ud, const uint8_t* key, size_t key_len, uint32_t* exists, char* msg,
                      size_t cap) {
  return Trampoline(msg, cap, [&]() -> absl::Status {
    absl::StatusOr<bool> r = Self(ud)->Exists(KeyView(key, key_len));
    if (!r.ok()) return r.status();
    *exists = *r ? 1 : 0;
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
  std::memset(&t, 0, sizeof t);
  t.struct_size = sizeof t;
  t.user_data = store.release();
  t.put = &PutCb;
  t.get = &GetCb;
  t.exists = &ExistsCb;
  t.remove = &RemoveCb;
  t.release = &ReleaseCb;
  return t;
}

KvStore* StoreFromTable(const swa_kv_store_t& table) {
  if (table.put != &PutCb || table.release != &ReleaseCb) return nullptr;
  return Self(table.user_data);
}

swa_status_t ToCallbackStatus(const absl::Status& status, char* message, size_t message_cap) {
  if (status.ok()) return SWA_OK;
  if (message != nullptr && message_cap > 0) {
    const size_t n = std::min(status.message().size(), message_cap - 1);
    std::memcpy(message, status.message().data(), n);
    message[n] = '\0';
  }
  const int code = static_cast<int>(status.code());
  return (code > 0 && code <= SWA_UNAUTHENTICATED) ? static_cast<swa_status_t>(code) : SWA_UNKNOWN;
}

uint64_t IovBytes(absl::Span<const swa_iov_t> iov) {
  uint64_t total = 0;
  for (const swa_iov_t& v : iov) total += v.size;
  return total;
}

std::string PrintableKey(std::string_view key) {
  constexpr size_t kMax = 96;
  const std::string_view head = key.substr(0, kMax);
  std::string text = absl::CHexEscape(absl::string_view(head.data(), head.size()));
  if (key.size() > kMax) absl::StrAppend(&text, "...(", key.size(), " bytes)");
  return text;
}

}  // namespace swa
