// The store section of swacache.h, built-in stores: swa_store_<kind>_config_init,
// swa_store_<kind>_create for memory, directory and redis, and
// swa_store_memory_stats. Each hands out its C++ store as a callback table
// (capi/store_table.h).
#include <cstring>
#include <memory>

#include "capi/error.h"
#include "capi/redis_security.h"
#include "capi/store_table.h"
#include "capi/struct_versions.h"
#include "common/status_macros.h"
#include "store/directory_store.h"
#include "store/memory_store.h"
#if defined(SWACACHE_HAVE_REDIS)
#include "store/redis_store.h"
#endif

using swa::capi::Guard;
using swa::capi::ReadStruct;
using swa::capi::WriteStruct;

extern "C" {

// ---- Memory store ----

SWA_API void swa_store_memory_config_init(swa_store_memory_config_t* config) {
  if (config == nullptr) return;
  swa::capi::InitStruct(config);
  config->budget_bytes = uint64_t{1} << 30;
}

SWA_API swa_status_t swa_store_memory_create(const swa_store_memory_config_t* config,
                                             swa_kv_store_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_ASSIGN_OR_RETURN(const swa_store_memory_config_t c, ReadStruct(config, "config"));
    SWA_CHECK_STRUCT(out);
    if (c.budget_bytes == 0)
      return absl::InvalidArgumentError("budget_bytes = 0: the memory store could hold nothing");
    WriteStruct(
        swa::capi::MakeStoreTable(std::make_unique<swa::MemoryStore>(c.budget_bytes), "memory"),
        out);
    return absl::OkStatus();
  });
}

SWA_API swa_status_t swa_store_memory_stats(const swa_kv_store_t* store,
                                            swa_store_memory_stats_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_ASSIGN_OR_RETURN(const swa_kv_store_t table, ReadStruct(store, "store"));
    SWA_CHECK_STRUCT(out);
    auto* memory = dynamic_cast<swa::MemoryStore*>(swa::capi::StoreFromTable(table));
    if (memory == nullptr)
      return absl::InvalidArgumentError(
          "store is not a table made by swa_store_memory_create(), or its store was released");
    const swa::MemoryStoreStats s = memory->Stats();
    swa_store_memory_stats_t v{};
    v.budget_bytes = s.budget_bytes;
    v.bytes = s.bytes;
    v.entries = s.entries;
    v.puts = s.puts;
    v.rejected_puts = s.rejected_puts;
    v.hits = s.hits;
    v.misses = s.misses;
    v.evictions = s.evictions;
    v.evicted_bytes = s.evicted_bytes;
    WriteStruct(v, out);
    return absl::OkStatus();
  });
}

// ---- Directory store ----

SWA_API void swa_store_directory_config_init(swa_store_directory_config_t* config) {
  if (config == nullptr) return;
  swa::capi::InitStruct(config);
  config->create = 1;
  config->sync = 1;
}

SWA_API swa_status_t swa_store_directory_create(const swa_store_directory_config_t* config,
                                                swa_kv_store_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_ASSIGN_OR_RETURN(const swa_store_directory_config_t c, ReadStruct(config, "config"));
    SWA_CHECK_STRUCT(out);
    if (c.path == nullptr) return swa::capi::NullArg("config->path");
    if (c.create > 1 || c.sync > 1)
      return absl::InvalidArgumentError(
          absl::StrFormat("create = %u, sync = %u: each must be 0 or 1", c.create, c.sync));
    swa::DirectoryStoreOptions options;
    options.path = c.path;
    options.create = c.create != 0;
    options.sync = c.sync != 0;
    SWA_ASSIGN_OR_RETURN(std::unique_ptr<swa::DirectoryStore> store,
                         swa::DirectoryStore::Open(options));
    WriteStruct(swa::capi::MakeStoreTable(std::move(store), "directory"), out);
    return absl::OkStatus();
  });
}

// ---- Redis store ----

SWA_API void swa_store_redis_config_init(swa_store_redis_config_t* config) {
  if (config == nullptr) return;
  swa::capi::InitStruct(config);
  config->host = "127.0.0.1";
  config->port = 6379;
  config->timeout_ms = 5000;
  config->max_connections = 8;
  config->tls_verify = 1;
}

SWA_API swa_status_t swa_store_redis_create(const swa_store_redis_config_t* config,
                                            swa_kv_store_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_ASSIGN_OR_RETURN(const swa_store_redis_config_t c, ReadStruct(config, "config"));
    SWA_CHECK_STRUCT(out);
    if (c.host == nullptr) return swa::capi::NullArg("config->host");
#if defined(SWACACHE_HAVE_REDIS)
    swa::RedisStoreOptions options;
    options.host = c.host;
    options.port = c.port;
    options.db = c.db;
    if (c.password != nullptr) options.password = c.password;
    SWA_RETURN_IF_ERROR(swa::capi::ReadRedisSecurity(c, &options));
    options.ttl_seconds = c.ttl_seconds;
    options.timeout_ms = c.timeout_ms;
    options.max_connections = c.max_connections;
    SWA_ASSIGN_OR_RETURN(std::unique_ptr<swa::RedisStore> store, swa::RedisStore::Connect(options));
    WriteStruct(swa::capi::MakeStoreTable(std::move(store), "Redis"), out);
    return absl::OkStatus();
#else
    return absl::UnimplementedError(
        "swa_store_redis_create: this build of libswacache has no Redis store (hiredis was not "
        "found when it was configured; install libhiredis-dev and rebuild)");
#endif
  });
}

}  // extern "C"
