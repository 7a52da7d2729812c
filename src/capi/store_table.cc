#include "capi/store_table.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
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

// The live built-in stores, by address: those MakeStoreTable handed out and
// nobody has deleted yet. Only addresses are compared; a store is
// dereferenced by whoever owns it, never on the registry's word alone. (A
// table kept past its store's release names whatever newer built-in store
// later gets the same address: refused while that one is claimed, memory-safe
// either way.)
struct Registry {
  struct Entry {
    const char* kind;  // a string literal
    bool claimed;      // by a cache or a tiered store
  };
  absl::Mutex mu;
  absl::flat_hash_map<const void*, Entry> live ABSL_GUARDED_BY(mu);
};

// Never destroyed: a release may run during exit.
Registry& Reg() {
  static Registry* registry = new Registry;
  return *registry;
}

void Register(KvStore* store, const char* kind) {
  Registry& r = Reg();
  absl::MutexLock lock(&r.mu);
  r.live.insert_or_assign(store, Registry::Entry{kind, false});
}

// A claimed store's owner drops it.
void Unregister(const KvStore* store) {
  Registry& r = Reg();
  absl::MutexLock lock(&r.mu);
  r.live.erase(store);
}

void Unclaim(const KvStore* store) {
  Registry& r = Reg();
  absl::MutexLock lock(&r.mu);
  if (auto it = r.live.find(store); it != r.live.end()) it->second.claimed = false;
}

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

// Frees an unclaimed store only: a claimed one belongs to its cache or
// tiered store, which deletes it; a released one is gone (not dereferenced).
void ReleaseCb(void* ud) {
  {
    Registry& r = Reg();
    absl::MutexLock lock(&r.mu);
    auto it = r.live.find(ud);
    if (it == r.live.end() || it->second.claimed) return;
    r.live.erase(it);
  }
  delete Self(ud);
}

bool AllTrampolines(const swa_kv_store_t& table) {
  return table.put == &PutCb && table.get == &GetCb && table.exists == &ExistsCb &&
         table.remove == &RemoveCb && table.release == &ReleaseCb;
}

// A claimed built-in store as its owner holds it: calls go to the store
// itself, or through `front` (a CallbackStore over the caller's table, whose
// release is cleared) when the caller replaced one of the trampolines.
// Deleting it unregisters and deletes the store once it is armed (claimed)
// and not disowned.
class ClaimedStore final : public KvStore {
 public:
  ClaimedStore(KvStore* store, std::unique_ptr<KvStore> front)
      : store_(store), front_(std::move(front)) {}
  ~ClaimedStore() override {
    front_.reset();
    if (!armed_) return;
    Unregister(store_);  // before the delete: the address is not reused while listed
    delete store_;
  }
  ClaimedStore(const ClaimedStore&) = delete;
  ClaimedStore& operator=(const ClaimedStore&) = delete;

  KvStore* builtin() const { return store_; }
  // After the claim: the store is now this object's to delete.
  void Arm() { armed_ = true; }
  // Unclaims the store and forgets it: the caller's table owns it again.
  void Disown() {
    if (armed_) Unclaim(store_);
    armed_ = false;
  }

  absl::Status Put(std::string_view key, absl::Span<const ConstByteSpan> pieces) override {
    return Use().Put(key, pieces);
  }
  absl::StatusOr<uint64_t> Get(std::string_view key, absl::Span<const ByteSpan> pieces) override {
    return Use().Get(key, pieces);
  }
  absl::StatusOr<uint64_t> GetStreaming(std::string_view key, absl::Span<const ByteSpan> pieces,
                                        const std::function<void(uint64_t)>& landed) override {
    return Use().GetStreaming(key, pieces, landed);
  }
  absl::StatusOr<uint64_t> GetVerified(std::string_view key, absl::Span<const ByteSpan> pieces,
                                       const std::function<void(uint64_t)>& landed,
                                       const std::function<absl::Status()>& verify) override {
    return Use().GetVerified(key, pieces, landed, verify);
  }
  absl::StatusOr<bool> Exists(std::string_view key) override { return Use().Exists(key); }
  absl::Status Remove(std::string_view key) override { return Use().Remove(key); }
  absl::StatusOr<int64_t> FirstPresent(absl::Span<const std::string> keys,
                                       size_t* failed_key) override {
    return Use().FirstPresent(keys, failed_key);
  }

 private:
  KvStore& Use() const { return front_ != nullptr ? *front_ : *store_; }

  KvStore* const store_;
  std::unique_ptr<KvStore> front_;
  bool armed_ = false;
};

// Claims the built-in stores behind tables[i] for every i in `builtin`, all
// or none: refused when one is not live (released) or already claimed.
absl::Status ClaimAll(absl::Span<const swa_kv_store_t> tables, absl::Span<const size_t> builtin,
                      const std::vector<std::string>& names) {
  std::vector<Registry::Entry*> claimed;
  claimed.reserve(builtin.size());  // no allocation once claims are made
  Registry& r = Reg();
  absl::MutexLock lock(&r.mu);
  absl::Status refused;
  for (size_t i : builtin) {
    const void* ud = tables[i].user_data;
    auto it = r.live.find(ud);
    if (it == r.live.end()) {
      refused = absl::InvalidArgumentError(absl::StrFormat(
          "%s: the built-in store table (user_data %p) was already released (by its release "
          "or by the cache or tiered store that owned it); its store no longer exists",
          names[i], ud));
      break;
    }
    if (it->second.claimed) {
      refused = absl::InvalidArgumentError(absl::StrFormat(
          "%s: the %s store table (user_data %p) is already owned by a cache or a tiered store; "
          "a built-in table is handed over once, and this hand-over is refused (its owner "
          "keeps it)",
          names[i], it->second.kind, ud));
      break;
    }
    it->second.claimed = true;
    claimed.push_back(&it->second);
  }
  if (!refused.ok())
    for (Registry::Entry* e : claimed) e->claimed = false;
  return refused;
}

absl::StatusOr<std::vector<std::unique_ptr<KvStore>>> Adopt(
    absl::Span<const swa_kv_store_t> caller_tables, const std::vector<std::string>& names) {
  std::vector<swa_kv_store_t> tables;
  tables.reserve(caller_tables.size());
  std::vector<size_t> builtin;  // indices of tables whose release is ours
  for (size_t i = 0; i < caller_tables.size(); ++i) {
    if (absl::Status s = CheckStructSize<swa_kv_store_t>(caller_tables[i].struct_size); !s.ok())
      return absl::Status(s.code(), absl::StrFormat("%s: %s", names[i], s.message()));
    tables.push_back(
        ReadStructBytes<swa_kv_store_t>(&caller_tables[i], caller_tables[i].struct_size));
    if (tables[i].put == nullptr && tables[i].get == nullptr)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: swa_kv_store_t has neither put nor get: nothing to use", names[i]));
    if (tables[i].release == &ReleaseCb) builtin.push_back(i);
  }
  // Built before the claim, unarmed: deleting them on a refusal changes nothing.
  std::vector<std::unique_ptr<KvStore>> out(tables.size());
  std::vector<ClaimedStore*> claimed;
  for (size_t i : builtin) {
    std::unique_ptr<KvStore> front;
    if (!AllTrampolines(tables[i])) {
      swa_kv_store_t t = tables[i];
      t.release = nullptr;  // the ClaimedStore deletes the store
      absl::StatusOr<std::unique_ptr<CallbackStore>> cb = CallbackStore::Create(t);
      if (!cb.ok()) return cb.status();
      front = std::move(*cb);
    }
    auto store = std::make_unique<ClaimedStore>(Self(tables[i].user_data), std::move(front));
    claimed.push_back(store.get());
    out[i] = std::move(store);
  }
  SWA_RETURN_IF_ERROR(ClaimAll(tables, builtin, names));
  for (ClaimedStore* c : claimed) c->Arm();
  // The engines' tables, after the claim: a CallbackStore owns its user_data.
  try {
    for (size_t i = 0; i < tables.size(); ++i) {
      if (out[i] != nullptr) continue;
      absl::StatusOr<std::unique_ptr<CallbackStore>> cb = CallbackStore::Create(tables[i]);
      if (!cb.ok()) throw std::logic_error("validated table refused");  // not reached
      out[i] = std::move(*cb);
    }
  } catch (...) {
    for (auto& kv : out)
      if (kv != nullptr) Unadopt(std::move(kv));
    throw;
  }
  return out;
}

}  // namespace

swa_kv_store_t MakeStoreTable(std::unique_ptr<KvStore> store, const char* kind) {
  swa_kv_store_t t;
  InitStruct(&t);
  Register(store.get(), kind);
  t.user_data = store.release();
  t.put = &PutCb;
  t.get = &GetCb;
  t.exists = &ExistsCb;
  t.remove = &RemoveCb;
  t.release = &ReleaseCb;
  return t;
}

KvStore* StoreFromTable(const swa_kv_store_t& table) {
  if (!CheckStructSize<swa_kv_store_t>(table.struct_size).ok() || !AllTrampolines(table))
    return nullptr;
  Registry& r = Reg();
  absl::MutexLock lock(&r.mu);
  if (!r.live.contains(table.user_data)) return nullptr;  // released: never dereferenced
  return Self(table.user_data);
}

absl::StatusOr<std::unique_ptr<KvStore>> AdoptTable(const swa_kv_store_t& table,
                                                    const char* what) {
  SWA_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<KvStore>> one,
                       Adopt(absl::MakeConstSpan(&table, 1), {std::string(what)}));
  return std::move(one[0]);
}

absl::StatusOr<std::vector<std::unique_ptr<KvStore>>> AdoptTables(
    absl::Span<const swa_kv_store_t> tables) {
  std::vector<std::string> names;
  for (size_t i = 0; i < tables.size(); ++i) names.push_back(absl::StrFormat("tier %u", i));
  return Adopt(tables, names);
}

void Unadopt(std::unique_ptr<KvStore> store) {
  if (store == nullptr) return;
  if (auto* claimed = dynamic_cast<ClaimedStore*>(store.get())) claimed->Disown();
  if (auto* cb = dynamic_cast<CallbackStore*>(store.get())) cb->Disown();
}

KvStore* BuiltinBehind(const KvStore& adopted) {
  const auto* claimed = dynamic_cast<const ClaimedStore*>(&adopted);
  return claimed != nullptr ? claimed->builtin() : nullptr;
}

}  // namespace swa::capi
