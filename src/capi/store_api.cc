// swa_kv_store_init, swa_cache_set_store, swa_slot_save/restore,
// swa_cache_store_exists/remove and the built-in stores.
#include <cstring>
#include <memory>
#include <string_view>

#include "capi/error.h"
#include "capi/handles.h"
#include "common/status_macros.h"
#include "store/directory_store.h"
#include "store/kv_store.h"
#include "store/memory_store.h"
#include "store/store_adaptor.h"
#if defined(SWACACHE_HAVE_REDIS)
#include "store/redis_store.h"
#endif

using swa::capi::Guard;

namespace swa::capi {
namespace {

absl::Status CheckCache(const swa_cache_t* cache) {
  if (cache == nullptr || cache->impl == nullptr) return NullArg("cache");
  return absl::OkStatus();
}

// Validates the key pointer and length; returns it as a view.
absl::StatusOr<std::string_view> KeyArg(const uint8_t* key, size_t key_len) {
  if (key == nullptr) return NullArg("key");
  std::string_view view(reinterpret_cast<const char*>(key), key_len);
  SWA_RETURN_IF_ERROR(StoreAdaptor::CheckKey(view));
  return view;
}

// Hands a freshly built store to the caller's table.
absl::Status FillTable(std::unique_ptr<KvStore> store, swa_kv_store_t* out) {
  *out = MakeStoreTable(std::move(store));
  return absl::OkStatus();
}

}  // namespace
}  // namespace swa::capi

extern "C" {

SWA_API void swa_kv_store_init(swa_kv_store_t* store) {
  if (store == nullptr) return;
  std::memset(store, 0, sizeof *store);
  store->struct_size = sizeof *store;
}

SWA_API swa_status_t swa_cache_set_store(swa_cache_t* cache, const swa_kv_store_t* store) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    if (store == nullptr) {
      cache->impl->SetStore(nullptr);
      return absl::OkStatus();
    }
    SWA_ASSIGN_OR_RETURN(std::shared_ptr<swa::StoreAdaptor> adaptor,
                         swa::StoreAdaptor::Create(*store, cache->impl->layout().fingerprint()));
    cache->impl->SetStore(std::move(adaptor));
    return absl::OkStatus();
  });
}

SWA_API swa_status_t swa_slot_save(swa_cache_t* cache, uint32_t slot, const uint8_t* key,
                                   size_t key_len) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_ASSIGN_OR_RETURN(std::string_view k, swa::capi::KeyArg(key, key_len));
    return cache->impl->SaveSlot(slot, k);
  });
}

SWA_API swa_status_t swa_slot_restore(swa_cache_t* cache, uint32_t slot, const uint8_t* key,
                                      size_t key_len) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_ASSIGN_OR_RETURN(std::string_view k, swa::capi::KeyArg(key, key_len));
    return cache->impl->RestoreSlot(slot, k);
  });
}

SWA_API swa_status_t swa_cache_store_exists(swa_cache_t* cache, const uint8_t* key,
                                            size_t key_len, uint32_t* exists) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_ASSIGN_OR_RETURN(std::string_view k, swa::capi::KeyArg(key, key_len));
    SWA_CHECK_NOT_NULL(exists);
    std::shared_ptr<swa::StoreAdaptor> store = cache->impl->store();
    if (store == nullptr)
      return absl::FailedPreconditionError(
          "no external KV store is attached to this cache (see swa_cache_set_store)");
    SWA_ASSIGN_OR_RETURN(bool found, store->Exists(k));
    *exists = found ? 1 : 0;
    return absl::OkStatus();
  });
}

SWA_API swa_status_t swa_cache_store_remove(swa_cache_t* cache, const uint8_t* key,
                                            size_t key_len) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_ASSIGN_OR_RETURN(std::string_view k, swa::capi::KeyArg(key, key_len));
    std::shared_ptr<swa::StoreAdaptor> store = cache->impl->store();
    if (store == nullptr)
      return absl::FailedPreconditionError(
          "no external KV store is attached to this cache (see swa_cache_set_store)");
    return store->Remove(k);
  });
}

// ---- Memory store ----

SWA_API void swa_memory_store_config_init(swa_memory_store_config_t* config) {
  if (config == nullptr) return;
  std::memset(config, 0, sizeof *config);
  config->struct_size = sizeof *config;
  config->budget_bytes = uint64_t{1} << 30;
}

SWA_API swa_status_t swa_store_memory_create(const swa_memory_store_config_t* config,
                                             swa_kv_store_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_CHECK_STRUCT(config, swa_memory_store_config_t);
    SWA_CHECK_STRUCT(out, swa_kv_store_t);
    if (config->budget_bytes == 0)
      return absl::InvalidArgumentError("budget_bytes = 0: the memory store could hold nothing");
    return swa::capi::FillTable(std::make_unique<swa::MemoryStore>(config->budget_bytes), out);
  });
}

SWA_API swa_status_t swa_store_memory_stats(const swa_kv_store_t* store,
                                            swa_memory_store_stats_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_CHECK_STRUCT(store, swa_kv_store_t);
    SWA_CHECK_STRUCT(out, swa_memory_store_stats_t);
    auto* memory = dynamic_cast<swa::MemoryStore*>(swa::StoreFromTable(*store));
    if (memory == nullptr)
      return absl::InvalidArgumentError(
          "store is not a table made by swa_store_memory_create()");
    const swa::MemoryStoreStats s = memory->Stats();
    std::memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    out->budget_bytes = s.budget_bytes;
    out->bytes = s.bytes;
    out->entries = s.entries;
    out->puts = s.puts;
    out->rejected_puts = s.rejected_puts;
    out->hits = s.hits;
    out->misses = s.misses;
    out->evictions = s.evictions;
    out->evicted_bytes = s.evicted_bytes;
    return absl::OkStatus();
  });
}

// ---- Directory store ----

SWA_API void swa_directory_store_config_init(swa_directory_store_config_t* config) {
  if (config == nullptr) return;
  std::memset(config, 0, sizeof *config);
  config->struct_size = sizeof *config;
  config->create = 1;
  config->sync = 1;
}

SWA_API swa_status_t swa_store_directory_create(const swa_directory_store_config_t* config,
                                                swa_kv_store_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_CHECK_STRUCT(config, swa_directory_store_config_t);
    SWA_CHECK_STRUCT(out, swa_kv_store_t);
    if (config->path == nullptr) return swa::capi::NullArg("config->path");
    if (config->create > 1 || config->sync > 1)
      return absl::InvalidArgumentError(absl::StrFormat(
          "create = %u, sync = %u: each must be 0 or 1", config->create, config->sync));
    swa::DirectoryStoreOptions options;
    options.path = config->path;
    options.create = config->create != 0;
    options.sync = config->sync != 0;
    SWA_ASSIGN_OR_RETURN(std::unique_ptr<swa::DirectoryStore> store,
                         swa::DirectoryStore::Open(options));
    return swa::capi::FillTable(std::move(store), out);
  });
}

// ---- Redis store ----

SWA_API void swa_redis_store_config_init(swa_redis_store_config_t* config) {
  if (config == nullptr) return;
  std::memset(config, 0, sizeof *config);
  config->struct_size = sizeof *config;
  config->host = "127.0.0.1";
  config->port = 6379;
  config->timeout_ms = 5000;
  config->max_connections = 8;
}

SWA_API swa_status_t swa_store_redis_create(const swa_redis_store_config_t* config,
                                            swa_kv_store_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_CHECK_STRUCT(config, swa_redis_store_config_t);
    SWA_CHECK_STRUCT(out, swa_kv_store_t);
    if (config->host == nullptr) return swa::capi::NullArg("config->host");
#if defined(SWACACHE_HAVE_REDIS)
    swa::RedisStoreOptions options;
    options.host = config->host;
    options.port = config->port;
    options.db = config->db;
    if (config->password != nullptr) options.password = config->password;
    options.ttl_seconds = config->ttl_seconds;
    options.timeout_ms = config->timeout_ms;
    options.max_connections = config->max_connections;
    SWA_ASSIGN_OR_RETURN(std::unique_ptr<swa::RedisStore> store, swa::RedisStore::Connect(options));
    return swa::capi::FillTable(std::move(store), out);
#else
    return absl::UnimplementedError(
        "swa_store_redis_create: this build of libswacache has no Redis store (hiredis was not "
        "found when it was configured; install libhiredis-dev and rebuild)");
#endif
  });
}

}  // extern "C"
