// A built-in store table is handed over once, through the public C API only:
// a second swa_cache_set_store() or swa_store_tiered_create() of a table whose
// store a cache or a tiered store already owns, or whose store was released,
// is refused (SWA_INVALID_ARGUMENT, naming the table), changing nothing; the
// first owner keeps working. Release of a claimed table does nothing. Run
// under ASan: any double ownership shows as a use after free.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "redis_server.h"
#include "swacache.h"

namespace {

struct CacheHolder {
  swa_cache_t* cache = nullptr;
  swa_layout_t layout{};
  uint8_t* pool = nullptr;
  ~CacheHolder() { swa_cache_destroy(cache); }
};

void MakeCache(CacheHolder* h) {
  swa_layer_desc_t layer;
  swa_layer_desc_init(&layer);
  layer.head_dim = 64;
  swa_config_t c;
  swa_config_init(&c);
  c.window = 8;
  c.max_slots = 2;
  c.backend = SWA_BACKEND_CPU;
  c.num_threads = 1;
  c.num_layers = 1;
  c.layers = &layer;
  ASSERT_EQ(swa_cache_create(&c, &h->cache), SWA_OK) << swa_last_error();
  h->layout.struct_size = sizeof h->layout;
  ASSERT_EQ(swa_cache_layout(h->cache, &h->layout), SWA_OK);
  swa_tensor_view_t v;
  v.struct_size = sizeof v;
  ASSERT_EQ(swa_cache_layer_view(h->cache, 0, &v), SWA_OK);
  h->pool = static_cast<uint8_t*>(v.data);
}

std::string Hex(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

// Saves slot 0 (random non-zero bytes) and restores it into slot 1 (poisoned
// first) through the cache's store: the bytes must come back.
void ExpectRoundTrip(swa_cache_t* cache, uint32_t seed) {
  swa_layout_t layout;
  layout.struct_size = sizeof layout;
  ASSERT_EQ(swa_cache_layout(cache, &layout), SWA_OK);
  swa_tensor_view_t v;
  v.struct_size = sizeof v;
  ASSERT_EQ(swa_cache_layer_view(cache, 0, &v), SWA_OK);
  auto* pool = static_cast<uint8_t*>(v.data);
  uint32_t s0 = 0, s1 = 0;
  ASSERT_EQ(swa_slot_alloc(cache, &s0), SWA_OK) << swa_last_error();
  ASSERT_EQ(swa_slot_alloc(cache, &s1), SWA_OK) << swa_last_error();
  std::mt19937 rng(seed);
  uint8_t* a = pool + s0 * layout.slot_bytes;
  uint8_t* b = pool + s1 * layout.slot_bytes;
  for (uint64_t i = 0; i < layout.stored_bytes; ++i) a[i] = uint8_t(rng() | 1);
  std::memset(b, 0xA5, layout.stored_bytes);
  const std::vector<uint8_t> saved(a, a + layout.stored_bytes);
  const std::string key = "handover-" + std::to_string(seed);
  const auto* k = reinterpret_cast<const uint8_t*>(key.data());
  ASSERT_EQ(swa_slot_save(cache, s0, k, key.size()), SWA_OK) << swa_last_error();
  ASSERT_EQ(swa_slot_restore(cache, s1, k, key.size()), SWA_OK) << swa_last_error();
  EXPECT_EQ(std::memcmp(b, saved.data(), saved.size()), 0);
  EXPECT_EQ(swa_slot_free(cache, s0), SWA_OK);
  EXPECT_EQ(swa_slot_free(cache, s1), SWA_OK);
}

// The second hand-over's status and message.
void ExpectRefused(swa_status_t status, const swa_kv_store_t& t, const char* why) {
  EXPECT_EQ(status, SWA_INVALID_ARGUMENT);
  const std::string message = swa_last_error();
  EXPECT_NE(message.find(why), std::string::npos) << message;
  EXPECT_NE(message.find(Hex(t.user_data)), std::string::npos) << message;
}

constexpr const char* kOwned = "is already owned by a cache or a tiered store";
constexpr const char* kReleased = "was already released";

enum class Kind { kMemory, kDirectory, kTiered, kRedis };

class Handover : public ::testing::TestWithParam<Kind> {
 protected:
  static void SetUpTestSuite() {
    if (swa_test::RedisServerOnPath()) redis_ = new swa_test::RedisServer();
  }
  static void TearDownTestSuite() {
    delete redis_;
    redis_ = nullptr;
  }

  void SetUp() override {
    if (GetParam() == Kind::kRedis && (redis_ == nullptr || redis_->port() < 0))
      GTEST_SKIP() << "redis-server is not on PATH or did not start";
    if (GetParam() == Kind::kRedis) {
      swa_kv_store_t probe;
      swa_kv_store_init(&probe);
      swa_store_redis_config_t c;
      swa_store_redis_config_init(&c);
      c.port = redis_->port();
      if (swa_store_redis_create(&c, &probe) == SWA_UNIMPLEMENTED)
        GTEST_SKIP() << "this build has no Redis store";
      probe.release(probe.user_data);
    }
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& ch : name)
      if (ch == '/') ch = '_';
    dir_ = (std::filesystem::temp_directory_path() /
            ("swa_handover_" + std::to_string(getpid()) + "_" + name))
               .string();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A fresh table of the kind under test (the caller owns it).
  swa_kv_store_t Make() {
    swa_kv_store_t t;
    swa_kv_store_init(&t);
    switch (GetParam()) {
      case Kind::kMemory: {
        swa_store_memory_config_t c;
        swa_store_memory_config_init(&c);
        EXPECT_EQ(swa_store_memory_create(&c, &t), SWA_OK) << swa_last_error();
        break;
      }
      case Kind::kDirectory: {
        swa_store_directory_config_t c;
        swa_store_directory_config_init(&c);
        const std::string path = dir_ + "/" + std::to_string(made_++);
        c.path = path.c_str();
        c.sync = 0;
        EXPECT_EQ(swa_store_directory_create(&c, &t), SWA_OK) << swa_last_error();
        break;
      }
      case Kind::kTiered: {
        swa_kv_store_t tier = MakeMemory();
        swa_store_tiered_config_t c;
        swa_store_tiered_config_init(&c);
        c.tiers = &tier;
        c.n_tiers = 1;
        EXPECT_EQ(swa_store_tiered_create(&c, &t), SWA_OK) << swa_last_error();
        break;
      }
      case Kind::kRedis: {
        swa_store_redis_config_t c;
        swa_store_redis_config_init(&c);
        c.port = redis_->port();
        EXPECT_EQ(swa_store_redis_create(&c, &t), SWA_OK) << swa_last_error();
        break;
      }
    }
    return t;
  }

  static swa_kv_store_t MakeMemory() {
    swa_kv_store_t t;
    swa_kv_store_init(&t);
    swa_store_memory_config_t c;
    swa_store_memory_config_init(&c);
    EXPECT_EQ(swa_store_memory_create(&c, &t), SWA_OK) << swa_last_error();
    return t;
  }

  static swa_status_t Tiered(const std::vector<swa_kv_store_t>& tiers, swa_kv_store_t* out) {
    swa_store_tiered_config_t c;
    swa_store_tiered_config_init(&c);
    c.tiers = tiers.data();
    c.n_tiers = tiers.size();
    return swa_store_tiered_create(&c, out);
  }

  std::string dir_;
  int made_ = 0;
  static swa_test::RedisServer* redis_;
};
swa_test::RedisServer* Handover::redis_ = nullptr;

TEST_P(Handover, TwiceToOneCacheIsRefusedAndTheFirstAttachKeepsWorking) {
  CacheHolder h;
  MakeCache(&h);
  swa_kv_store_t t = Make();
  ASSERT_EQ(swa_cache_set_store(h.cache, &t), SWA_OK) << swa_last_error();
  ExpectRoundTrip(h.cache, 1);
  ExpectRefused(swa_cache_set_store(h.cache, &t), t, kOwned);
  ExpectRoundTrip(h.cache, 2);
  // Release of a claimed table does nothing: the cache still owns the store.
  t.release(t.user_data);
  ExpectRoundTrip(h.cache, 3);
}

TEST_P(Handover, ToASecondCacheIsRefused) {
  CacheHolder a, b;
  MakeCache(&a);
  MakeCache(&b);
  swa_kv_store_t t = Make();
  ASSERT_EQ(swa_cache_set_store(a.cache, &t), SWA_OK) << swa_last_error();
  ExpectRefused(swa_cache_set_store(b.cache, &t), t, kOwned);
  uint32_t exists = 0;
  const uint8_t key[] = {'k'};
  EXPECT_EQ(swa_cache_store_exists(b.cache, key, 1, &exists), SWA_FAILED_PRECONDITION)
      << "the refused cache must be left without a store";
  ExpectRoundTrip(a.cache, 4);
  // b works with a store of its own.
  swa_kv_store_t other = Make();
  ASSERT_EQ(swa_cache_set_store(b.cache, &other), SWA_OK) << swa_last_error();
  ExpectRoundTrip(b.cache, 5);
}

TEST_P(Handover, ToACacheThenAsATierIsRefusedAndTheOtherTiersStayTheCallers) {
  CacheHolder h, spare;
  MakeCache(&h);
  MakeCache(&spare);
  swa_kv_store_t t = Make();
  ASSERT_EQ(swa_cache_set_store(h.cache, &t), SWA_OK) << swa_last_error();
  const swa_kv_store_t fresh = MakeMemory();
  swa_kv_store_t out;
  swa_kv_store_init(&out);
  const swa_kv_store_t poison = out;
  ExpectRefused(Tiered({fresh, t}, &out), t, kOwned);
  EXPECT_NE(std::string(swa_last_error()).find("tier 1"), std::string::npos) << swa_last_error();
  EXPECT_EQ(std::memcmp(&out, &poison, sizeof out), 0) << "out must be unchanged";
  ExpectRoundTrip(h.cache, 6);
  // The claim on tier 0 was undone: the caller can still hand it over.
  ASSERT_EQ(swa_cache_set_store(spare.cache, &fresh), SWA_OK) << swa_last_error();
  ExpectRoundTrip(spare.cache, 7);
}

TEST_P(Handover, ATierOfTwoTieredStoresIsRefused) {
  swa_kv_store_t t = Make();
  swa_kv_store_t first, second;
  swa_kv_store_init(&first);
  swa_kv_store_init(&second);
  ASSERT_EQ(Tiered({t}, &first), SWA_OK) << swa_last_error();
  ExpectRefused(Tiered({t}, &second), t, kOwned);
  // Nor may the tier be attached to a cache by itself.
  CacheHolder h;
  MakeCache(&h);
  ExpectRefused(swa_cache_set_store(h.cache, &t), t, kOwned);
  ASSERT_EQ(swa_cache_set_store(h.cache, &first), SWA_OK) << swa_last_error();
  ExpectRoundTrip(h.cache, 8);
  swa_store_tier_stats_t st;
  st.struct_size = sizeof st;
  ASSERT_EQ(swa_store_tiered_stats(&first, 0, &st), SWA_OK) << swa_last_error();
  EXPECT_EQ(st.puts, 1u);
}

TEST_P(Handover, AfterTheOwnerWasDestroyedIsRefused) {
  swa_kv_store_t t = Make();
  {
    CacheHolder owner;
    MakeCache(&owner);
    ASSERT_EQ(swa_cache_set_store(owner.cache, &t), SWA_OK) << swa_last_error();
    ExpectRoundTrip(owner.cache, 9);
  }
  CacheHolder h;
  MakeCache(&h);
  ExpectRefused(swa_cache_set_store(h.cache, &t), t, kReleased);
  swa_kv_store_t out;
  swa_kv_store_init(&out);
  ExpectRefused(Tiered({t}, &out), t, kReleased);
  t.release(t.user_data);  // gone already: nothing happens
  // The statistics calls refuse the stale table instead of reading freed memory.
  swa_store_memory_stats_t ms;
  ms.struct_size = sizeof ms;
  swa_store_tier_stats_t ts;
  ts.struct_size = sizeof ts;
  if (GetParam() == Kind::kMemory)
    EXPECT_EQ(swa_store_memory_stats(&t, &ms), SWA_INVALID_ARGUMENT);
  if (GetParam() == Kind::kTiered)
    EXPECT_EQ(swa_store_tiered_stats(&t, 0, &ts), SWA_INVALID_ARGUMENT);
  swa_kv_store_t again = Make();
  ASSERT_EQ(swa_cache_set_store(h.cache, &again), SWA_OK) << swa_last_error();
  ExpectRoundTrip(h.cache, 10);
}

TEST_P(Handover, AfterReleaseOrDetachIsRefused) {
  CacheHolder h;
  MakeCache(&h);
  swa_kv_store_t dropped = Make();
  dropped.release(dropped.user_data);  // dropped unused
  dropped.release(dropped.user_data);  // a second release is no double free
  ExpectRefused(swa_cache_set_store(h.cache, &dropped), dropped, kReleased);
  swa_kv_store_t t = Make();
  ASSERT_EQ(swa_cache_set_store(h.cache, &t), SWA_OK) << swa_last_error();
  swa_kv_store_t next = Make();
  ASSERT_EQ(swa_cache_set_store(h.cache, &next), SWA_OK) << swa_last_error();  // t released
  ExpectRefused(swa_cache_set_store(h.cache, &t), t, kReleased);
  ExpectRoundTrip(h.cache, 11);
  ASSERT_EQ(swa_cache_set_store(h.cache, nullptr), SWA_OK);  // next released
  ExpectRefused(swa_cache_set_store(h.cache, &next), next, kReleased);
}

TEST_P(Handover, ATableWithAReplacedEntryIsClaimedToo) {
  CacheHolder a, b;
  MakeCache(&a);
  MakeCache(&b);
  swa_kv_store_t t = Make();
  swa_kv_store_t changed = t;
  changed.exists = nullptr;  // reached through the callbacks, still the built-in store
  ASSERT_EQ(swa_cache_set_store(a.cache, &changed), SWA_OK) << swa_last_error();
  ExpectRefused(swa_cache_set_store(b.cache, &t), t, kOwned);
  ExpectRefused(swa_cache_set_store(b.cache, &changed), t, kOwned);
  ExpectRoundTrip(a.cache, 12);
}

TEST(HandoverThreads, OneOfManyConcurrentHandOversWins) {
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  swa_store_memory_config_t c;
  swa_store_memory_config_init(&c);
  ASSERT_EQ(swa_store_memory_create(&c, &t), SWA_OK);
  constexpr int kThreads = 8;
  std::vector<std::unique_ptr<CacheHolder>> caches;
  for (int i = 0; i < kThreads; ++i) {
    caches.push_back(std::make_unique<CacheHolder>());
    MakeCache(caches.back().get());
  }
  std::vector<swa_status_t> got(kThreads, SWA_UNKNOWN);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] { got[i] = swa_cache_set_store(caches[i]->cache, &t); });
  for (std::thread& th : threads) th.join();
  int won = -1, wins = 0;
  for (int i = 0; i < kThreads; ++i) {
    if (got[i] == SWA_OK) {
      won = i;
      ++wins;
    } else {
      EXPECT_EQ(got[i], SWA_INVALID_ARGUMENT);
    }
  }
  ASSERT_EQ(wins, 1);
  ExpectRoundTrip(caches[won]->cache, 13);
}

INSTANTIATE_TEST_SUITE_P(Kinds, Handover,
                         ::testing::Values(Kind::kMemory, Kind::kDirectory, Kind::kTiered,
                                           Kind::kRedis),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                           switch (info.param) {
                             case Kind::kMemory: return "memory";
                             case Kind::kDirectory: return "directory";
                             case Kind::kTiered: return "tiered";
                             case Kind::kRedis: return "redis";
                           }
                           return "unknown";
                         });

}  // namespace
