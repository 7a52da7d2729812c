// Concurrency at a scale that finds races, through exactly the calls the
// header calls thread-safe: 8 threads allocating, freeing and inspecting
// slots; saving and restoring distinct slots through the memory, directory and
// Redis stores; replacing the store while saves run; planning while others
// save. Runs in the normal suite and under ThreadSanitizer
// (scripts/sanitize.sh tsan). SWACACHE_STRESS_SCALE multiplies the iterations.
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api/redis_server.h"
#include "gtest/gtest.h"
#include "api/test_util.h"
#include "swacache.h"

namespace {

constexpr int kThreads = 8;

int Scale(int base) {
  const char* s = std::getenv("SWACACHE_STRESS_SCALE");
  const int k = s != nullptr ? std::atoi(s) : 1;
  return base * (k > 0 ? k : 1);
}

// Two stored MXFP8 layers and one dropped, W 16, 32 slots, CPU.
struct Fixture {
  std::vector<swa_layer_desc_t> layers;
  swa_cache_t* cache = nullptr;
  swa_layout_t layout{};
  uint8_t* pool = nullptr;

  explicit Fixture(uint32_t max_slots = 32) {
    for (int i = 0; i < 3; ++i) {
      swa_layer_desc_t l;
      swa_layer_desc_init(&l);
      l.role = i < 2 ? SWA_LAYER_STORED : SWA_LAYER_DROPPED;
      l.q_heads = 2;
      l.kv_heads = 1;
      l.head_dim = 64;
      layers.push_back(l);
    }
    swa_config_t c;
    swa_config_init(&c);
    c.window = 16;
    c.max_slots = max_slots;
    c.backend = SWA_BACKEND_CPU;
    c.num_threads = 1;
    c.num_layers = static_cast<uint32_t>(layers.size());
    c.layers = layers.data();
    EXPECT_EQ(swa_cache_create(&c, &cache), SWA_OK) << swa_last_error();
    layout.struct_size = sizeof layout;
    EXPECT_EQ(swa_cache_layout(cache, &layout), SWA_OK);
    pool = swa_test::PoolBase(cache);
    EXPECT_NE(pool, nullptr) << swa_last_error();
  }
  ~Fixture() { swa_cache_destroy(cache); }

  uint8_t* Slot(uint32_t s) const { return pool + s * layout.slot_bytes; }
  void Fill(uint32_t s, uint64_t seed) const {
    std::mt19937_64 rng(seed);
    for (uint64_t i = 0; i < layout.stored_bytes; ++i) Slot(s)[i] = static_cast<uint8_t>(rng());
  }
  bool Holds(uint32_t s, uint64_t seed) const {
    std::mt19937_64 rng(seed);
    for (uint64_t i = 0; i < layout.stored_bytes; ++i)
      if (Slot(s)[i] != static_cast<uint8_t>(rng())) return false;
    return true;
  }
  swa_slot_info_t Info(uint32_t s) const {
    swa_slot_info_t i;
    i.struct_size = sizeof i;
    EXPECT_EQ(swa_slot_info(cache, s, &i), SWA_OK);
    return i;
  }
};

swa_status_t Save(swa_cache_t* c, uint32_t slot, const std::string& key) {
  return swa_slot_save(c, slot, reinterpret_cast<const uint8_t*>(key.data()), key.size());
}
swa_status_t Restore(swa_cache_t* c, uint32_t slot, const std::string& key) {
  return swa_slot_restore(c, slot, reinterpret_cast<const uint8_t*>(key.data()), key.size());
}

void RunThreads(int n, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) threads.emplace_back(body, t);
  for (std::thread& th : threads) th.join();
}

TEST(Concurrency, SlotsAllocFreeInspect) {
  Fixture f(16);  // fewer slots than 2 per thread: exhaustion is part of the run
  std::atomic<int> owner[16];
  for (auto& o : owner) o = -1;
  std::atomic<int> exhausted{0}, failures{0};
  RunThreads(kThreads, [&](int t) {
    std::mt19937 rng(t);
    std::vector<uint32_t> mine;
    for (int it = 0; it < Scale(20000); ++it) {
      const int op = static_cast<int>(rng() % 6);
      if (op <= 1 && mine.size() < 3) {
        uint32_t s = 99;
        const swa_status_t st = swa_slot_alloc(f.cache, &s);
        if (st == SWA_RESOURCE_EXHAUSTED) {
          ++exhausted;
          continue;
        }
        int expected = -1;
        if (st != SWA_OK || s >= 16 || !owner[s].compare_exchange_strong(expected, t)) ++failures;
        else mine.push_back(s);
      } else if (op == 2 && !mine.empty()) {
        const uint32_t s = mine.back();
        mine.pop_back();
        owner[s] = -1;  // before the free: another thread may get it at once
        if (swa_slot_free(f.cache, s) != SWA_OK) ++failures;
      } else if (op == 3 && !mine.empty()) {
        const uint32_t s = mine[rng() % mine.size()];
        int32_t start = -1, len = -1;
        if (swa_slot_reset(f.cache, s) != SWA_OK ||
            swa_slot_begin_replay(f.cache, s, 40, &start, &len) != SWA_OK || start != 24 ||
            len != 16 || swa_slot_set_valid_start(f.cache, s, 30) != SWA_OK)
          ++failures;
        const swa_slot_info_t i = f.Info(s);
        if (!i.allocated || i.valid_start != 30 || i.written_end != 24) ++failures;
      } else if (op == 4 && mine.size() >= 2) {
        if (swa_slot_copy(f.cache, mine[0], mine[1]) != SWA_OK) ++failures;
      } else {
        // Inspect any slot, owned or not: only the call's own promises hold.
        swa_slot_info_t i;
        i.struct_size = sizeof i;
        const uint32_t s = rng() % 16;
        if (swa_slot_info(f.cache, s, &i) != SWA_OK || i.slot != s) ++failures;
        swa_cache_stats_t st;
        st.struct_size = sizeof st;
        if (swa_cache_stats(f.cache, &st) != SWA_OK || st.slots_in_use > 16) ++failures;
        // A double free of a slot this thread does not own fails or frees an
        // unowned slot; never call it on someone else's: only probe bad ids.
        if (swa_slot_free(f.cache, 16 + s) != SWA_OUT_OF_RANGE) ++failures;
      }
    }
    for (uint32_t s : mine) {
      owner[s] = -1;
      if (swa_slot_free(f.cache, s) != SWA_OK) ++failures;
    }
  });
  EXPECT_EQ(failures.load(), 0);
  swa_cache_stats_t st;
  st.struct_size = sizeof st;
  ASSERT_EQ(swa_cache_stats(f.cache, &st), SWA_OK);
  EXPECT_EQ(st.slots_in_use, 0u);
}

// Each thread owns two slots: plans a step on one, fills it, saves it under a
// fresh key, restores it into the other and checks bytes and positions.
void SaveRestoreLoop(Fixture& f, int iters, bool tolerate_missing, int threads = kThreads) {
  std::atomic<int> failures{0}, missing{0};
  RunThreads(threads, [&](int t) {
    uint32_t a = 0, b = 0;
    ASSERT_EQ(swa_slot_alloc(f.cache, &a), SWA_OK);
    ASSERT_EQ(swa_slot_alloc(f.cache, &b), SWA_OK);
    swa_plan_t* plan = nullptr;
    ASSERT_EQ(swa_plan_create(f.cache, &plan), SWA_OK);
    for (int it = 0; it < iters; ++it) {
      const uint64_t seed = (uint64_t(t) << 32) | uint64_t(it);
      // Advance slot a by one decode token (a planning call on a cache that
      // other threads are saving from).
      const swa_slot_info_t before = f.Info(a);
      const swa_seq_t seq = {a, 1, before.written_end + 1, 0};
      if (swa_plan_build(plan, &seq, 1) != SWA_OK) ++failures;
      if (it % 2 == 1 && swa_plan_cancel(plan) != SWA_OK) ++failures;
      f.Fill(a, seed);
      const swa_slot_info_t saved = f.Info(a);
      const std::string key = "t" + std::to_string(t) + "-" + std::to_string(it);
      if (swa_status_t s = Save(f.cache, a, key); s != SWA_OK) {
        ADD_FAILURE() << "save: " << swa_status_string(s) << ": " << swa_last_error();
        ++failures;
        continue;
      }
      // Restore into the other slot; the source slot stays as it was.
      f.Fill(b, ~seed);
      const swa_status_t s = Restore(f.cache, b, key);
      if (s == SWA_NOT_FOUND && tolerate_missing) {
        ++missing;
        if (!f.Holds(b, ~seed)) ++failures;  // a failed restore wrote nothing
        continue;
      }
      if (s != SWA_OK) {
        ADD_FAILURE() << "restore: " << swa_status_string(s) << ": " << swa_last_error();
        ++failures;
        continue;
      }
      const swa_slot_info_t got = f.Info(b);
      if (!f.Holds(b, seed) || !f.Holds(a, seed) || got.written_end != saved.written_end ||
          got.valid_start != saved.valid_start)
        ++failures;
    }
    swa_plan_destroy(plan);
    EXPECT_EQ(swa_slot_free(f.cache, a), SWA_OK);
    EXPECT_EQ(swa_slot_free(f.cache, b), SWA_OK);
  });
  EXPECT_EQ(failures.load(), 0);
  if (tolerate_missing) ::testing::Test::RecordProperty("missing", missing.load());
}

// Seven savers and one thread running `extra` until they are done.
void SaveRestoreWithExtra(Fixture& f, int iters, const std::function<void(int)>& extra) {
  std::atomic<bool> stop{false};
  std::thread side([&] {
    for (int i = 0; !stop.load(); ++i) extra(i);
  });
  SaveRestoreLoop(f, iters, /*tolerate_missing=*/true, kThreads - 1);
  stop = true;
  side.join();
}

swa_kv_store_t MemoryStore() {
  swa_store_memory_config_t mc;
  swa_store_memory_config_init(&mc);
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  EXPECT_EQ(swa_store_memory_create(&mc, &t), SWA_OK);
  return t;
}

TEST(Concurrency, SaveRestoreMemoryStore) {
  Fixture f;
  const swa_kv_store_t t = MemoryStore();
  ASSERT_EQ(swa_cache_set_store(f.cache, &t), SWA_OK);
  SaveRestoreLoop(f, Scale(1500), false);
}

TEST(Concurrency, SaveRestoreDirectoryStore) {
  char tmpl[] = "/tmp/swa_conc_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  struct Rm {
    std::string p;
    ~Rm() { std::filesystem::remove_all(p); }
  } rm{tmpl};
  Fixture f;
  swa_store_directory_config_t dc;
  swa_store_directory_config_init(&dc);
  dc.path = tmpl;
  dc.sync = 0;  // fsync measures the disk, not the library
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  ASSERT_EQ(swa_store_directory_create(&dc, &t), SWA_OK) << swa_last_error();
  ASSERT_EQ(swa_cache_set_store(f.cache, &t), SWA_OK);
  SaveRestoreLoop(f, Scale(300), false);
}

TEST(Concurrency, SaveRestoreRedisStore) {
  if (!swa_test::BuildHasRedisStore()) GTEST_SKIP() << "this build has no Redis store";
  if (!swa_test::RedisServerOnPath()) GTEST_SKIP() << "redis-server is not on PATH";
  swa_test::RedisServer server;
  if (server.port() < 0) GTEST_SKIP() << "redis-server did not start";
  Fixture f;
  swa_store_redis_config_t rc;
  swa_store_redis_config_init(&rc);
  rc.port = static_cast<uint32_t>(server.port());
  rc.max_connections = 4;  // fewer than the threads: connections come and go
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  ASSERT_EQ(swa_store_redis_create(&rc, &t), SWA_OK) << swa_last_error();
  ASSERT_EQ(swa_cache_set_store(f.cache, &t), SWA_OK);
  SaveRestoreLoop(f, Scale(600), false);
}

// An engine store whose release is counted: every table is released once.
struct Counted {
  std::atomic<int>* releases;
  swa_kv_store_t inner;
};

swa_kv_store_t CountedStore(std::atomic<int>* releases) {
  auto* c = new Counted{releases, MemoryStore()};
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  t.user_data = c;
  t.put = [](void* u, const uint8_t* k, size_t kl, const swa_iov_t* iov, size_t n, char* m,
             size_t mc) {
    auto* c = static_cast<Counted*>(u);
    return c->inner.put(c->inner.user_data, k, kl, iov, n, m, mc);
  };
  t.get = [](void* u, const uint8_t* k, size_t kl, const swa_iov_t* iov, size_t n, uint64_t* sz,
             char* m, size_t mc) {
    auto* c = static_cast<Counted*>(u);
    return c->inner.get(c->inner.user_data, k, kl, iov, n, sz, m, mc);
  };
  t.release = [](void* u) {
    auto* c = static_cast<Counted*>(u);
    c->inner.release(c->inner.user_data);
    ++*c->releases;
    delete c;
  };
  return t;
}

TEST(Concurrency, ReplaceStoreWhileSaving) {
  Fixture f;
  std::atomic<int> releases{0};
  int attached = 0;
  const swa_kv_store_t first = CountedStore(&releases);
  ASSERT_EQ(swa_cache_set_store(f.cache, &first), SWA_OK);
  ++attached;
  SaveRestoreWithExtra(f, Scale(1000), [&](int i) {
    // Alternate engine tables and built-in tables (never detached: a save
    // without a store fails by design).
    if (i % 5 == 4) {
      const swa_kv_store_t m = MemoryStore();
      ASSERT_EQ(swa_cache_set_store(f.cache, &m), SWA_OK);
    } else {
      const swa_kv_store_t t = CountedStore(&releases);
      ASSERT_EQ(swa_cache_set_store(f.cache, &t), SWA_OK);
      ++attached;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  });
  swa_cache_destroy(f.cache);
  f.cache = nullptr;
  EXPECT_EQ(releases.load(), attached);
}

// Plans are built and cancelled on one cache while another cache's slots are
// saved and restored, and while this cache's other slots are saved.
TEST(Concurrency, PlanOneCacheWhileOthersSave) {
  Fixture planned, saved;
  const swa_kv_store_t t1 = MemoryStore(), t2 = MemoryStore();
  ASSERT_EQ(swa_cache_set_store(planned.cache, &t1), SWA_OK);
  ASSERT_EQ(swa_cache_set_store(saved.cache, &t2), SWA_OK);
  std::atomic<int> failures{0};
  std::thread saver([&] { SaveRestoreLoop(saved, Scale(600), false, 4); });
  RunThreads(4, [&](int t) {
    uint32_t s[2];
    ASSERT_EQ(swa_slot_alloc(planned.cache, &s[0]), SWA_OK);
    ASSERT_EQ(swa_slot_alloc(planned.cache, &s[1]), SWA_OK);
    swa_plan_t* plan = nullptr;
    ASSERT_EQ(swa_plan_create(planned.cache, &plan), SWA_OK);
    for (int it = 0; it < Scale(3000); ++it) {
      if (t % 2 == 1 && it % 8 == 0) {  // saves of this cache's own slots too
        if (Save(planned.cache, s[1], "p" + std::to_string(t)) != SWA_OK) ++failures;
        continue;
      }
      const swa_slot_info_t i0 = planned.Info(s[0]);
      const swa_seq_t seqs[1] = {{s[0], 2, i0.written_end + 2, 0}};
      if (swa_plan_build(plan, seqs, 1) != SWA_OK) ++failures;
      swa_plan_info_t pi;
      pi.struct_size = sizeof pi;
      if (swa_plan_info(plan, &pi) != SWA_OK || pi.n_tokens != 2) ++failures;
      if (it % 3 == 0 && swa_plan_cancel(plan) != SWA_OK) ++failures;
    }
    swa_plan_destroy(plan);
    EXPECT_EQ(swa_slot_free(planned.cache, s[0]), SWA_OK);
    EXPECT_EQ(swa_slot_free(planned.cache, s[1]), SWA_OK);
  });
  saver.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
