// The store section of swacache.h, built-in stores: swa_store_<kind>_config_init,
// swa_store_<kind>_create for memory, directory and redis, and
// swa_store_memory_stats. Each hands out its C++ store as a callback table
// (capi/store_table.h).
#include <cstring>
#include <memory>

#include "capi/error.h"
#include "capi/store_table.h"
#include "common/status_macros.h"
#include "store/directory_store.h"
#include "store/memory_store.h"
#if defined(SWACACHE_HAVE_REDIS)
#include "store/redis_store.h"
#endif

using swa::capi::Guard;

extern "C" {

// ---- Memory store ----

SWA_API void swa_store_memory_config_init(swa_store_memory_config_t* config) {
  if (config == nullptr) return;
  swa::capi::ResetStruct(config);
  config->budget_bytes = uint64_t{1} << 30;
}

SWA_API swa_status_t swa_store_memory_create(const swa_store_memory_config_t* config,
                                             swa_kv_store_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_CHECK_STRUCT(config, swa_store_memory_config_t);
    SWA_CHECK_STRUCT(out, swa_kv_store_t);
    if (config->budget_bytes == 0)
      return absl::InvalidArgumentError("budget_bytes = 0: the memory store could hold nothing");
    *out = swa::capi::MakeStoreTable(std::make_unique<swa::MemoryStore>(config->budget_bytes));
    return absl::OkStatus();
  });
}

SWA_API swa_status_t swa_store_memory_stats(const swa_kv_store_t* store,
                                            swa_store_memory_stats_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_CHECK_STRUCT(store, swa_kv_store_t);
    SWA_CHECK_STRUCT(out, swa_store_memory_stats_t);
    auto* memory = dynamic_cast<swa::MemoryStore*>(swa::capi::StoreFromTable(*store));
    if (memory == nullptr)
      return absl::InvalidArgumentError(
          "store is not a table made by swa_store_memory_create()");
    const swa::MemoryStoreStats s = memory->Stats();
    swa::capi::ResetStruct(out);
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

SWA_API void swa_store_directory_config_init(swa_store_directory_config_t* config) {
  if (config == nullptr) return;
  swa::capi::ResetStruct(config);
  config->create = 1;
  config->sync = 1;
}

SWA_API swa_status_t swa_store_directory_create(const swa_store_directory_config_t* config,
                                                swa_kv_store_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_CHECK_STRUCT(config, swa_store_directory_config_t);
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
    *out = swa::capi::MakeStoreTable(std::move(store));
    return absl::OkStatus();
  });
}

// ---- Redis store ----

SWA_API void swa_store_redis_config_init(swa_store_redis_config_t* config) {
  if (config == nullptr) return;
  swa::capi::ResetStruct(config);
  config->host = "127.0.0.1";
  config->port = 6379;
  config->timeout_ms = 5000;
  config->max_connections = 8;
}

SWA_API swa_status_t swa_store_redis_create(const swa_store_redis_config_t* config,
                                            swa_kv_store_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_CHECK_STRUCT(config, swa_store_redis_config_t);
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
    *out = swa::capi::MakeStoreTable(std::move(store));
    return absl::OkStatus();
#else
    return absl::UnimplementedError(
        "swa_store_redis_create: this build of libswacache has no Redis store (hiredis was not "
        "found when it was configured; install libhiredis-dev and rebuild)");
#endif
  });
}

}  // extern "C"
