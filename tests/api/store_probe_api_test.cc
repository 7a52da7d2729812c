// swa_cache_store_probe through the public C API: an engine's callback table
// (asked key by key, stopping at the first hit; a failing exists mid-probe is
// a status naming the key), the memory store, and the argument checks.
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "swacache.h"

namespace {

// An engine store: a map, and an exists that fails on call number `fail_at`.
struct EngineStore {
  std::map<std::string, std::string> blobs;
  int exists_calls = 0;
  int fail_at = -1;
};

swa_status_t Exists(void* user, const uint8_t* key, size_t len, uint32_t* out, char* message,
                    size_t message_cap) {
  auto* s = static_cast<EngineStore*>(user);
  if (s->exists_calls++ == s->fail_at) {
    std::snprintf(message, message_cap, "engine store timed out");
    return SWA_DEADLINE_EXCEEDED;
  }
  *out = s->blobs.count(std::string(reinterpret_cast<const char*>(key), len)) ? 1 : 0;
  return SWA_OK;
}

swa_cache_t* MakeCache() {
  swa_layer_desc_t l;
  swa_layer_desc_init(&l);
  l.q_heads = 2;
  l.head_dim = 64;
  swa_config_t c;
  swa_config_init(&c);
  c.window = 16;
  c.max_slots = 2;
  c.backend = SWA_BACKEND_CPU;
  c.num_threads = 1;
  c.num_layers = 1;
  c.layers = &l;
  swa_cache_t* cache = nullptr;
  EXPECT_EQ(swa_cache_create(&c, &cache), SWA_OK) << swa_last_error();
  return cache;
}

struct Keys {
  std::vector<std::string> s;
  std::vector<const uint8_t*> ptr;
  std::vector<size_t> len;
  explicit Keys(int n) {
    for (int i = 0; i < n; ++i) s.push_back("req/" + std::string(size_t(n - i), 'p'));
    for (const std::string& k : s) {
      ptr.push_back(reinterpret_cast<const uint8_t*>(k.data()));
      len.push_back(k.size());
    }
  }
};

TEST(StoreProbeApi, EngineTableEveryPatternAndFailure) {
  swa_cache_t* cache = MakeCache();
  EngineStore engine;
  swa_kv_store_t table;
  swa_kv_store_init(&table);
  table.user_data = &engine;
  table.exists = Exists;
  table.get = [](void*, const uint8_t*, size_t, const swa_iov_t*, size_t, uint64_t*, char*,
                 size_t) { return SWA_NOT_FOUND; };  // a table needs put or get
  ASSERT_EQ(swa_cache_set_store(cache, &table), SWA_OK) << swa_last_error();
  swa_layout_t lay;
  lay.struct_size = sizeof lay;
  ASSERT_EQ(swa_cache_layout(cache, &lay), SWA_OK);
  char prefix[32];
  std::snprintf(prefix, sizeof prefix, "%016llx:", (unsigned long long)lay.fingerprint);
  const int n = 4;
  Keys k(n);
  for (int fail_at = -1; fail_at < n; ++fail_at) {
    for (int mask = 0; mask < (1 << n); ++mask) {
      engine.blobs.clear();
      int first = -1;
      for (int i = 0; i < n; ++i)
        if (mask & (1 << i)) {
          engine.blobs[prefix + k.s[i]] = "x";
          if (first < 0) first = i;
        }
      engine.exists_calls = 0;
      engine.fail_at = fail_at;
      int32_t found = -7;
      const swa_status_t st = swa_cache_store_probe(cache, k.ptr.data(), k.len.data(), n, &found);
      const int asked = first >= 0 ? first + 1 : n;  // stops at the first hit
      if (fail_at >= 0 && fail_at < asked) {
        ASSERT_EQ(st, SWA_DEADLINE_EXCEEDED) << "mask " << mask << " fail_at " << fail_at;
        EXPECT_EQ(found, -7);  // unchanged on failure
        const std::string msg = swa_last_error();
        EXPECT_NE(msg.find("key " + std::to_string(fail_at)), std::string::npos) << msg;
        EXPECT_NE(msg.find("engine store timed out"), std::string::npos) << msg;
      } else {
        ASSERT_EQ(st, SWA_OK) << swa_last_error();
        EXPECT_EQ(found, first) << "mask " << mask;
        EXPECT_EQ(engine.exists_calls, asked);
      }
    }
  }
  swa_cache_destroy(cache);
}

TEST(StoreProbeApi, MemoryStoreAndArguments) {
  swa_cache_t* cache = MakeCache();
  Keys k(3);
  int32_t found = -7;
  // No store yet.
  EXPECT_EQ(swa_cache_store_probe(cache, k.ptr.data(), k.len.data(), 3, &found),
            SWA_FAILED_PRECONDITION);
  swa_store_memory_config_t mc;
  swa_store_memory_config_init(&mc);
  swa_kv_store_t store;
  swa_kv_store_init(&store);
  ASSERT_EQ(swa_store_memory_create(&mc, &store), SWA_OK);
  ASSERT_EQ(swa_cache_set_store(cache, &store), SWA_OK);
  uint32_t slot;
  ASSERT_EQ(swa_slot_alloc(cache, &slot), SWA_OK);
  ASSERT_EQ(swa_cache_store_probe(cache, k.ptr.data(), k.len.data(), 3, &found), SWA_OK);
  EXPECT_EQ(found, -1);
  ASSERT_EQ(swa_slot_save(cache, slot, k.ptr[2], k.len[2]), SWA_OK);
  ASSERT_EQ(swa_cache_store_probe(cache, k.ptr.data(), k.len.data(), 3, &found), SWA_OK);
  EXPECT_EQ(found, 2);
  ASSERT_EQ(swa_slot_save(cache, slot, k.ptr[1], k.len[1]), SWA_OK);
  ASSERT_EQ(swa_cache_store_probe(cache, k.ptr.data(), k.len.data(), 3, &found), SWA_OK);
  EXPECT_EQ(found, 1);
  ASSERT_EQ(swa_cache_store_probe(cache, nullptr, nullptr, 0, &found), SWA_OK);
  EXPECT_EQ(found, -1);
  // Arguments: nothing asked, found unchanged.
  found = -7;
  EXPECT_EQ(swa_cache_store_probe(nullptr, k.ptr.data(), k.len.data(), 3, &found),
            SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_cache_store_probe(cache, k.ptr.data(), k.len.data(), 3, nullptr),
            SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_cache_store_probe(cache, nullptr, k.len.data(), 3, &found), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_cache_store_probe(cache, k.ptr.data(), nullptr, 3, &found), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_cache_store_probe(cache, k.ptr.data(), k.len.data(), 5000, &found),
            SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(swa_last_error()).find("5000"), std::string::npos) << swa_last_error();
  std::vector<size_t> bad_len = k.len;
  bad_len[1] = 0;
  EXPECT_EQ(swa_cache_store_probe(cache, k.ptr.data(), bad_len.data(), 3, &found),
            SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(swa_last_error()).find("keys[1]"), std::string::npos) << swa_last_error();
  bad_len[1] = SWA_STORE_MAX_KEY_BYTES + 1;
  EXPECT_EQ(swa_cache_store_probe(cache, k.ptr.data(), bad_len.data(), 3, &found),
            SWA_INVALID_ARGUMENT);
  std::vector<const uint8_t*> bad_ptr = k.ptr;
  bad_ptr[2] = nullptr;
  EXPECT_EQ(swa_cache_store_probe(cache, bad_ptr.data(), k.len.data(), 3, &found),
            SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(swa_last_error()).find("keys[2]"), std::string::npos) << swa_last_error();
  EXPECT_EQ(found, -7);
  swa_cache_destroy(cache);
}

TEST(StoreProbeApi, TableWithoutExistsIsUnimplemented) {
  swa_cache_t* cache = MakeCache();
  EngineStore engine;
  swa_kv_store_t table;
  swa_kv_store_init(&table);
  table.user_data = &engine;
  table.put = [](void*, const uint8_t*, size_t, const swa_iov_t*, size_t, char*, size_t) {
    return SWA_OK;
  };
  ASSERT_EQ(swa_cache_set_store(cache, &table), SWA_OK) << swa_last_error();
  Keys k(2);
  int32_t found = -7;
  EXPECT_EQ(swa_cache_store_probe(cache, k.ptr.data(), k.len.data(), 2, &found),
            SWA_UNIMPLEMENTED);
  EXPECT_EQ(found, -7);
  swa_cache_destroy(cache);
}

}  // namespace
