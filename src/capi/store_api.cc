// The store section of swacache.h, engine side: swa_kv_store_init,
// swa_cache_set_store, swa_slot_save/restore, swa_cache_store_exists/remove/probe.
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/strings/str_format.h"

#include "capi/error.h"
#include "capi/handles.h"
#include "capi/store_table.h"
#include "capi/struct_versions.h"
#include "common/status_macros.h"
#include "store/blob_store.h"
#include "cache/slot_io.h"

using swa::capi::Guard;

namespace swa::capi {
namespace {

// Validates the key pointer and length; returns it as a view.
absl::StatusOr<std::string_view> KeyArg(const uint8_t* key, size_t key_len) {
  if (key == nullptr) return NullArg("key");
  std::string_view view(reinterpret_cast<const char*>(key), key_len);
  SWA_RETURN_IF_ERROR(BlobStore::CheckKey(view));
  return view;
}

}  // namespace
}  // namespace swa::capi

extern "C" {

SWA_API void swa_kv_store_init(swa_kv_store_t* store) {
  if (store == nullptr) return;
  swa::capi::InitStruct(store);
}

SWA_API swa_status_t swa_cache_set_store(swa_cache_t* cache, const swa_kv_store_t* store) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    if (store == nullptr) {
      cache->impl->SetStore(nullptr);
      return absl::OkStatus();
    }
    SWA_ASSIGN_OR_RETURN(const swa_kv_store_t table, swa::capi::ReadStruct(store, "store"));
    // Claims a built-in table's store; refused when a cache or a tiered
    // store already owns it, or it was released.
    SWA_ASSIGN_OR_RETURN(std::unique_ptr<swa::KvStore> kv, swa::capi::AdoptTable(table, "store"));
    std::shared_ptr<swa::BlobStore> blob;
    try {
      blob = std::make_shared<swa::BlobStore>(std::move(kv), cache->impl->layout().fingerprint(),
                                              cache->impl->store_security());
    } catch (...) {
      swa::capi::Unadopt(std::move(kv));  // the claim is undone: the caller still owns the table
      throw;
    }
    cache->impl->SetStore(std::move(blob));
    return absl::OkStatus();
  });
}

SWA_API swa_status_t swa_slot_save(swa_cache_t* cache, uint32_t slot, const uint8_t* key,
                                   size_t key_len) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_ASSIGN_OR_RETURN(std::string_view k, swa::capi::KeyArg(key, key_len));
    SWA_ASSIGN_OR_RETURN(std::shared_ptr<swa::BlobStore> store, cache->impl->store());
    return swa::SaveSlot(cache->impl->slot_io(), *store, slot, k);
  });
}

SWA_API swa_status_t swa_slot_restore(swa_cache_t* cache, uint32_t slot, const uint8_t* key,
                                      size_t key_len) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_ASSIGN_OR_RETURN(std::string_view k, swa::capi::KeyArg(key, key_len));
    SWA_ASSIGN_OR_RETURN(std::shared_ptr<swa::BlobStore> store, cache->impl->store());
    return swa::RestoreSlot(cache->impl->slot_io(), *store, slot, k);
  });
}

SWA_API swa_status_t swa_cache_store_exists(swa_cache_t* cache, const uint8_t* key,
                                            size_t key_len, uint32_t* exists) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_ASSIGN_OR_RETURN(std::string_view k, swa::capi::KeyArg(key, key_len));
    SWA_CHECK_NOT_NULL(exists);
    SWA_ASSIGN_OR_RETURN(std::shared_ptr<swa::BlobStore> store, cache->impl->store());
    SWA_ASSIGN_OR_RETURN(bool found, store->Exists(k));
    *exists = found ? 1 : 0;
    return absl::OkStatus();
  });
}

SWA_API swa_status_t swa_cache_store_probe(swa_cache_t* cache, const uint8_t* const* keys,
                                           const size_t* key_lens, uint32_t n_keys,
                                           int32_t* found) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_CHECK_NOT_NULL(found);
    constexpr uint32_t kMaxProbeKeys = 4096;
    if (n_keys > kMaxProbeKeys)
      return absl::InvalidArgumentError(absl::StrFormat(
          "n_keys = %u exceeds the probe's limit of %u keys", n_keys, kMaxProbeKeys));
    if (n_keys > 0) {
      SWA_CHECK_NOT_NULL(keys);
      SWA_CHECK_NOT_NULL(key_lens);
    }
    std::vector<std::string_view> views(n_keys);
    for (uint32_t i = 0; i < n_keys; ++i) {
      if (keys[i] == nullptr)
        return absl::InvalidArgumentError(absl::StrFormat("keys[%u] is NULL", i));
      views[i] = std::string_view(reinterpret_cast<const char*>(keys[i]), key_lens[i]);
      if (absl::Status s = swa::BlobStore::CheckKey(views[i]); !s.ok())
        return absl::InvalidArgumentError(absl::StrFormat("keys[%u]: %s", i, s.message()));
    }
    SWA_ASSIGN_OR_RETURN(std::shared_ptr<swa::BlobStore> store, cache->impl->store());
    SWA_ASSIGN_OR_RETURN(int64_t first, store->FirstPresent(views));
    *found = static_cast<int32_t>(first);
    return absl::OkStatus();
  });
}

SWA_API swa_status_t swa_cache_store_remove(swa_cache_t* cache, const uint8_t* key,
                                            size_t key_len) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_ASSIGN_OR_RETURN(std::string_view k, swa::capi::KeyArg(key, key_len));
    SWA_ASSIGN_OR_RETURN(std::shared_ptr<swa::BlobStore> store, cache->impl->store());
    return store->Remove(k);
  });
}

}  // extern "C"
