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

}  // namespace
