// The Redis Cluster and tiered store calls through the shared library only:
// defaults, argument checks, ownership on failure, a tiered stack of built-in
// stores attached to a cache.
#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "swacache.h"

namespace {

TEST(StoreClusterApi, ClusterConfigDefaultsAndArgumentChecks) {
  swa_store_redis_cluster_config_t c;
  std::memset(&c, 0xAB, sizeof c);
  swa_store_redis_cluster_config_init(&c);
  EXPECT_EQ(c.struct_size, sizeof c);
  EXPECT_STREQ(c.nodes, "127.0.0.1:7000");
  EXPECT_EQ(c.password, nullptr);
  EXPECT_EQ(c.ttl_seconds, 0u);
  EXPECT_EQ(c.timeout_ms, 5000u);
  EXPECT_EQ(c.connections_per_node, 4u);
  EXPECT_EQ(c.read_from_replicas, 0u);
  EXPECT_EQ(c.max_attempts, 16u);
  swa_store_redis_cluster_config_init(nullptr);

  swa_kv_store_t t;
  swa_kv_store_init(&t);
  t.user_data = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(swa_store_redis_cluster_create(nullptr, &t), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_store_redis_cluster_create(&c, nullptr), SWA_INVALID_ARGUMENT);
  c.struct_size = 8;
  EXPECT_EQ(swa_store_redis_cluster_create(&c, &t), SWA_INVALID_ARGUMENT);
  swa_store_redis_cluster_config_init(&c);
  c.nodes = nullptr;
  EXPECT_EQ(swa_store_redis_cluster_create(&c, &t), SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(swa_last_error()).find("nodes"), std::string::npos);
  c.nodes = "127.0.0.1:1";
  c.timeout_ms = 200;
  const swa_status_t s = swa_store_redis_cluster_create(&c, &t);
  EXPECT_TRUE(s == SWA_UNAVAILABLE || s == SWA_UNIMPLEMENTED) << swa_last_error();
  if (s == SWA_UNIMPLEMENTED) EXPECT_NE(std::string(swa_last_error()).find("hiredis"), std::string::npos);
  EXPECT_EQ(t.user_data, reinterpret_cast<void*>(0x1));  // unchanged on failure
}

TEST(StoreClusterApi, TieredMemoryOverDirectoryBehindACache) {
  swa_store_memory_config_t mc;
  swa_store_memory_config_init(&mc);
  mc.budget_bytes = 1 << 20;
  char dir[] = "/tmp/swa-tiered-api-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  swa_store_directory_config_t dc;
  swa_store_directory_config_init(&dc);
  dc.path = dir;
  dc.sync = 0;
  swa_kv_store_t tiers[2];
  swa_kv_store_init(&tiers[0]);
  swa_kv_store_init(&tiers[1]);
  ASSERT_EQ(swa_store_memory_create(&mc, &tiers[0]), SWA_OK);
  ASSERT_EQ(swa_store_directory_create(&dc, &tiers[1]), SWA_OK);
  swa_store_tiered_config_t c;
  swa_store_tiered_config_init(&c);
  EXPECT_EQ(c.struct_size, sizeof c);
  EXPECT_EQ(c.tiers, nullptr);
  EXPECT_EQ(c.n_tiers, 0u);
  c.tiers = tiers;
  c.n_tiers = 17;
  swa_kv_store_t store;
  swa_kv_store_init(&store);
  EXPECT_EQ(swa_store_tiered_create(&c, &store), SWA_INVALID_ARGUMENT);
  c.n_tiers = 2;
  ASSERT_EQ(swa_store_tiered_create(&c, &store), SWA_OK) << swa_last_error();

  char msg[SWA_STORE_MESSAGE_BYTES];
  const uint8_t key[] = {'s', 'e', 'q'};
  const std::string v(100000, 'v');
  const swa_iov_t put[1] = {{const_cast<char*>(v.data()), v.size()}};
  ASSERT_EQ(store.put(store.user_data, key, 3, put, 1, msg, sizeof msg), SWA_OK) << msg;
  ASSERT_EQ(tiers[0].remove(tiers[0].user_data, key, 3, msg, sizeof msg), SWA_OK);  // evict by hand
  std::string got(v.size(), '\0');
  const swa_iov_t get[1] = {{got.data(), got.size()}};
  uint64_t size = got.size();
  ASSERT_EQ(store.get(store.user_data, key, 3, get, 1, &size, msg, sizeof msg), SWA_OK) << msg;
  EXPECT_EQ(got, v);
  swa_store_tier_stats_t st;
  st.struct_size = sizeof st;
  ASSERT_EQ(swa_store_tiered_stats(&store, 1, &st), SWA_OK);
  EXPECT_EQ(st.hits, 1u);
  EXPECT_EQ(st.bytes_read, v.size());
  ASSERT_EQ(swa_store_tiered_stats(&store, 0, &st), SWA_OK);
  EXPECT_EQ(st.misses, 1u);
  EXPECT_EQ(st.promotions, 1u);
  EXPECT_EQ(swa_store_tiered_stats(&store, 2, &st), SWA_OUT_OF_RANGE);
  st.struct_size = 4;
  EXPECT_EQ(swa_store_tiered_stats(&store, 0, &st), SWA_INVALID_ARGUMENT);
  store.release(store.user_data);  // releases both tiers
  std::string rm = std::string("rm -rf ") + dir;
  EXPECT_EQ(std::system(rm.c_str()), 0);
}

// An engine's store (the slow tier) whose get flips one byte while `flip` is set.
struct FlakyStore {
  std::map<std::string, std::vector<uint8_t>> blobs;
  bool flip = false;
  int gets = 0;
};

swa_status_t FlakyPut(void* ud, const uint8_t* key, size_t key_len, const swa_iov_t* iov,
                      size_t n_iov, char*, size_t) {
  std::vector<uint8_t> blob;
  for (size_t i = 0; i < n_iov; ++i) {
    const auto* p = static_cast<const uint8_t*>(iov[i].data);
    blob.insert(blob.end(), p, p + iov[i].size);
  }
  static_cast<FlakyStore*>(ud)->blobs[std::string(reinterpret_cast<const char*>(key), key_len)] =
      std::move(blob);
  return SWA_OK;
}

swa_status_t FlakyGet(void* ud, const uint8_t* key, size_t key_len, const swa_iov_t* iov,
                      size_t n_iov, uint64_t* blob_size, char* message, size_t cap) {
  auto* f = static_cast<FlakyStore*>(ud);
  ++f->gets;
  auto it = f->blobs.find(std::string(reinterpret_cast<const char*>(key), key_len));
  if (it == f->blobs.end()) {
    std::snprintf(message, cap, "no such key");
    return SWA_NOT_FOUND;
  }
  std::vector<uint8_t> blob = it->second;
  if (f->flip) blob[blob.size() / 2] ^= 0x08;  // a bit flipped in transit
  if (*blob_size != blob.size()) {
    *blob_size = blob.size();
    return SWA_OK;
  }
  size_t at = 0;
  for (size_t i = 0; i < n_iov; ++i) {
    std::memcpy(iov[i].data, blob.data() + at, iov[i].size);
    at += iov[i].size;
  }
  return SWA_OK;
}

swa_status_t FlakyRemove(void* ud, const uint8_t* key, size_t key_len, char*, size_t) {
  return static_cast<FlakyStore*>(ud)->blobs.erase(
             std::string(reinterpret_cast<const char*>(key), key_len)) > 0
             ? SWA_OK
             : SWA_NOT_FOUND;
}

// A restore that refuses a blob read from the slow tier leaves the fast tier
// as it was (nothing promoted), so once the slow tier reads soundly again the
// next restore succeeds; only then is the blob promoted.
TEST(StoreClusterApi, TieredNeverPromotesABlobTheRestoreRefuses) {
  swa_layer_desc_t layers[2];
  for (auto& l : layers) {
    swa_layer_desc_init(&l);
    l.head_dim = 64;
  }
  swa_config_t cfg;
  swa_config_init(&cfg);
  cfg.window = 16;
  cfg.max_slots = 2;
  cfg.backend = SWA_BACKEND_CPU;
  cfg.num_threads = 1;
  cfg.num_layers = 2;
  cfg.layers = layers;
  swa_cache_t* cache = nullptr;
  ASSERT_EQ(swa_cache_create(&cfg, &cache), SWA_OK) << swa_last_error();
  swa_layout_t layout;
  layout.struct_size = sizeof layout;
  ASSERT_EQ(swa_cache_layout(cache, &layout), SWA_OK);
  swa_tensor_view_t view;
  view.struct_size = sizeof view;
  ASSERT_EQ(swa_cache_layer_view(cache, 0, &view), SWA_OK);
  uint8_t* pool = static_cast<uint8_t*>(view.data);
  std::mt19937_64 rng(71);
  for (uint64_t i = 0; i < layout.pool_bytes; ++i) pool[i] = static_cast<uint8_t>(rng() | 1);

  FlakyStore flaky;
  swa_kv_store_t tiers[2];
  swa_kv_store_init(&tiers[0]);
  swa_kv_store_init(&tiers[1]);
  swa_store_memory_config_t mc;
  swa_store_memory_config_init(&mc);
  mc.budget_bytes = 16 << 20;
  ASSERT_EQ(swa_store_memory_create(&mc, &tiers[0]), SWA_OK);
  tiers[1].user_data = &flaky;
  tiers[1].put = FlakyPut;
  tiers[1].get = FlakyGet;
  tiers[1].remove = FlakyRemove;
  swa_store_tiered_config_t tc;
  swa_store_tiered_config_init(&tc);
  tc.tiers = tiers;
  tc.n_tiers = 2;
  swa_kv_store_t store;
  swa_kv_store_init(&store);
  ASSERT_EQ(swa_store_tiered_create(&tc, &store), SWA_OK) << swa_last_error();
  const swa_kv_store_t table = store;  // for the stats after the cache owns it
  ASSERT_EQ(swa_cache_set_store(cache, &store), SWA_OK) << swa_last_error();

  uint32_t a = 0, b = 0;
  ASSERT_EQ(swa_slot_alloc(cache, &a), SWA_OK);
  ASSERT_EQ(swa_slot_alloc(cache, &b), SWA_OK);
  ASSERT_EQ(swa_slot_set_valid_start(cache, a, 5), SWA_OK) << swa_last_error();
  const uint8_t key[] = {'r', 'e', 'q', 0, 9};
  ASSERT_EQ(swa_slot_save(cache, a, key, sizeof key), SWA_OK) << swa_last_error();
  // Drop the fast tier's copy (as an eviction would).
  char msg[SWA_STORE_MESSAGE_BYTES];
  ASSERT_EQ(flaky.blobs.size(), 1u);
  const std::string full = flaky.blobs.begin()->first;
  ASSERT_EQ(tiers[0].remove(tiers[0].user_data, reinterpret_cast<const uint8_t*>(full.data()),
                            full.size(), msg, sizeof msg),
            SWA_OK)
      << msg;

  const std::vector<uint8_t> before(pool, pool + layout.pool_bytes);
  flaky.flip = true;
  EXPECT_EQ(swa_slot_restore(cache, b, key, sizeof key), SWA_DATA_LOSS) << swa_last_error();
  EXPECT_TRUE(std::vector<uint8_t>(pool, pool + layout.pool_bytes) == before);
  swa_slot_info_t info;
  info.struct_size = sizeof info;
  ASSERT_EQ(swa_slot_info(cache, b, &info), SWA_OK);
  EXPECT_EQ(info.valid_start, 0);
  swa_store_tier_stats_t st;
  st.struct_size = sizeof st;
  ASSERT_EQ(swa_store_tiered_stats(&table, 0, &st), SWA_OK);
  EXPECT_EQ(st.promotions, 0u) << "a refused blob was copied into the fast tier";
  uint32_t exists = 1;
  ASSERT_EQ(tiers[0].exists(tiers[0].user_data, reinterpret_cast<const uint8_t*>(full.data()),
                            full.size(), &exists, msg, sizeof msg),
            SWA_OK);
  EXPECT_EQ(exists, 0u);

  flaky.flip = false;
  ASSERT_EQ(swa_slot_restore(cache, b, key, sizeof key), SWA_OK) << swa_last_error();
  EXPECT_EQ(std::memcmp(pool + b * layout.slot_bytes, pool + a * layout.slot_bytes,
                        layout.stored_bytes),
            0);
  ASSERT_EQ(swa_slot_info(cache, b, &info), SWA_OK);
  EXPECT_EQ(info.valid_start, 5);
  ASSERT_EQ(swa_store_tiered_stats(&table, 0, &st), SWA_OK);
  EXPECT_EQ(st.promotions, 1u);
  // The promoted copy now answers without the slow tier.
  const int gets = flaky.gets;
  flaky.flip = true;
  EXPECT_EQ(swa_slot_restore(cache, b, key, sizeof key), SWA_OK) << swa_last_error();
  EXPECT_EQ(flaky.gets, gets);
  swa_cache_destroy(cache);
}

}  // namespace
