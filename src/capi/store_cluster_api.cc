// The store section of swacache.h, composite and clustered stores:
// swa_store_redis_cluster_{config_init,create} and
// swa_store_tiered_{config_init,create,stats}. Each hands out its C++ store as
// a callback table (capi/store_table.h).
#include <cstring>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "capi/error.h"
#include "capi/redis_security.h"
#include "capi/store_table.h"
#include "capi/struct_versions.h"
#include "common/status_macros.h"
#include "store/tiered_store.h"
#if defined(SWACACHE_HAVE_REDIS)
#include "store/cluster_hash_slot.h"
#include "store/redis_cluster_store.h"
#endif

using swa::capi::Guard;
using swa::capi::ReadStruct;
using swa::capi::WriteStruct;

namespace {

constexpr size_t kMaxTiers = 16;

// The caller's tier tables (an array whose stride is tiers[0].struct_size),
// every one adoptable before any is adopted: on failure the caller keeps
// ownership of all of them.
absl::StatusOr<std::vector<swa_kv_store_t>> ReadTiers(const swa_kv_store_t* base, size_t n) {
  if (n == 0 || n > kMaxTiers)
    return absl::InvalidArgumentError(
        absl::StrFormat("n_tiers = %u is not in 1 ... %u", n, kMaxTiers));
  SWA_ASSIGN_OR_RETURN(std::vector<swa_kv_store_t> tiers,
                       swa::capi::ReadStructArray(base, n, "tiers"));
  absl::flat_hash_set<void*> seen;
  for (size_t i = 0; i < n; ++i) {
    if (tiers[i].put == nullptr && tiers[i].get == nullptr)
      return absl::InvalidArgumentError(absl::StrFormat("tier %u has neither put nor get", i));
    if (tiers[i].user_data != nullptr && !seen.insert(tiers[i].user_data).second)
      return absl::InvalidArgumentError(absl::StrFormat(
          "tier %u has the user_data of an earlier tier (each would be released twice)", i));
  }
  return tiers;
}

}  // namespace

extern "C" {

// ---- Redis Cluster store ----

SWA_API void swa_store_redis_cluster_config_init(swa_store_redis_cluster_config_t* config) {
  if (config == nullptr) return;
  swa::capi::InitStruct(config);
  config->nodes = "127.0.0.1:7000";
  config->timeout_ms = 5000;
  config->connections_per_node = 4;
  config->max_attempts = 16;
  config->tls_verify = 1;
}

SWA_API swa_status_t swa_store_redis_cluster_create(const swa_store_redis_cluster_config_t* config,
                                                    swa_kv_store_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_ASSIGN_OR_RETURN(const swa_store_redis_cluster_config_t c, ReadStruct(config, "config"));
    SWA_CHECK_STRUCT(out);
    if (c.nodes == nullptr) return swa::capi::NullArg("config->nodes");
    if (c.read_from_replicas > 1)
      return absl::InvalidArgumentError(
          absl::StrFormat("read_from_replicas = %u: must be 0 or 1", c.read_from_replicas));
#if defined(SWACACHE_HAVE_REDIS)
    swa::RedisClusterOptions options;
    SWA_ASSIGN_OR_RETURN(options.seeds, swa::ParseClusterNodes(c.nodes));
    if (c.password != nullptr) options.password = c.password;
    SWA_RETURN_IF_ERROR(swa::capi::ReadRedisSecurity(c, &options));
    options.ttl_seconds = c.ttl_seconds;
    options.timeout_ms = c.timeout_ms;
    options.connections_per_node = c.connections_per_node;
    options.read_from_replicas = c.read_from_replicas != 0;
    options.max_attempts = c.max_attempts;
    SWA_ASSIGN_OR_RETURN(std::unique_ptr<swa::RedisClusterStore> store,
                         swa::RedisClusterStore::Connect(options));
    WriteStruct(swa::capi::MakeStoreTable(std::move(store), "Redis Cluster"), out);
    return absl::OkStatus();
#else
    return absl::UnimplementedError(
        "swa_store_redis_cluster_create: this build of libswacache has no Redis store (hiredis "
        "was not found when it was configured; install libhiredis-dev and rebuild)");
#endif
  });
}

// ---- Tiered store ----

SWA_API void swa_store_tiered_config_init(swa_store_tiered_config_t* config) {
  if (config == nullptr) return;
  swa::capi::InitStruct(config);
}

SWA_API swa_status_t swa_store_tiered_create(const swa_store_tiered_config_t* config,
                                             swa_kv_store_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_ASSIGN_OR_RETURN(const swa_store_tiered_config_t c, ReadStruct(config, "config"));
    SWA_CHECK_STRUCT(out);
    if (c.tiers == nullptr) return swa::capi::NullArg("config->tiers");
    SWA_ASSIGN_OR_RETURN(const std::vector<swa_kv_store_t> tables, ReadTiers(c.tiers, c.n_tiers));
    // All tiers or none: a built-in tier already owned elsewhere, or
    // released, refuses the call and claims nothing.
    SWA_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<swa::KvStore>> tiers,
                         swa::capi::AdoptTables(tables));
    SWA_ASSIGN_OR_RETURN(std::unique_ptr<swa::TieredStore> store,
                         swa::TieredStore::Create(std::move(tiers)));
    WriteStruct(swa::capi::MakeStoreTable(std::move(store), "tiered"), out);
    return absl::OkStatus();
  });
}

SWA_API swa_status_t swa_store_tiered_stats(const swa_kv_store_t* store, uint32_t tier,
                                            swa_store_tier_stats_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_ASSIGN_OR_RETURN(const swa_kv_store_t table, ReadStruct(store, "store"));
    SWA_CHECK_STRUCT(out);
    auto* tiered = dynamic_cast<swa::TieredStore*>(swa::capi::StoreFromTable(table));
    if (tiered == nullptr)
      return absl::InvalidArgumentError(
          "store is not a table made by swa_store_tiered_create(), or its store was released");
    if (tier >= tiered->tier_count())
      return absl::OutOfRangeError(absl::StrFormat("tier = %u, but the store has %u tiers", tier,
                                                   tiered->tier_count()));
    const swa::TierStats s = tiered->Stats(tier);
    swa_store_tier_stats_t v{};
    v.hits = s.hits;
    v.misses = s.misses;
    v.errors = s.errors;
    v.bytes_read = s.bytes_read;
    v.puts = s.puts;
    v.bytes_written = s.bytes_written;
    v.promotions = s.promotions;
    WriteStruct(v, out);
    return absl::OkStatus();
  });
}

}  // extern "C"
