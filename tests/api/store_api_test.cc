// The store part of the public C API, through the shared library only:
// argument checks, ownership (release exactly once), message copying, the
// iov contract seen by an engine's callbacks, and the built-in stores.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "swacache.h"

namespace {

struct CacheHolder {
  swa_cache_t* cache = nullptr;
  swa_layout_t layout{};
  uint8_t* pool = nullptr;
  ~CacheHolder() { swa_cache_destroy(cache); }
};

void MakeCache(CacheHolder* h, uint32_t window = 32) {
  swa_layer_desc_t layers[3];
  for (int i = 0; i < 3; ++i) {
    swa_layer_desc_init(&layers[i]);
    layers[i].head_dim = 128;
    layers[i].role = i == 2 ? SWA_LAYER_DROPPED : SWA_LAYER_STORED;
  }
  swa_config_t c;
  swa_config_init(&c);
  c.window = window;
  c.max_slots = 4;
  c.backend = SWA_BACKEND_CPU;
  c.num_layers = 3;
  c.layers = layers;
  ASSERT_EQ(swa_cache_create(&c, &h->cache), SWA_OK) << swa_last_error();
  h->layout.struct_size = sizeof h->layout;
  ASSERT_EQ(swa_cache_layout(h->cache, &h->layout), SWA_OK);
  swa_tensor_view_t v;
  v.struct_size = sizeof v;
  ASSERT_EQ(swa_cache_layer_view(h->cache, 0, &v), SWA_OK);
  h->pool = static_cast<uint8_t*>(v.data);  // layer 0's ring starts the slot
}

uint8_t* SlotBase(const CacheHolder& h, uint32_t slot) { return h.pool + slot * h.layout.slot_bytes; }

const uint8_t kKey[] = {'s', 'e', 'q', 0, 7};

// An engine-written store that records what the library hands it.
struct Recorder {
  uint64_t claim_extra = 0;  // get reports the blob this much larger (a lying store)
  int releases = 0;
  int puts = 0;
  std::string last_key;
  std::vector<size_t> iov_sizes;
  std::vector<const void*> iov_data;
  std::vector<uint8_t> blob;
  // An int, as a C store would hold it: 99 is no swa_status_t value, and
  // loading it as the C++ enum would be undefined behaviour here in the test.
  int fail_with = SWA_OK;
  const char* message = "";
};

swa_status_t RecPut(void* ud, const uint8_t* key, size_t key_len, const swa_iov_t* iov,
                    size_t n_iov, char* message, size_t cap) {
  auto* r = static_cast<Recorder*>(ud);
  ++r->puts;
  if (r->fail_with != SWA_OK) {
    snprintf(message, cap, "%s", r->message);
    return static_cast<swa_status_t>(r->fail_with);
  }
  r->last_key.assign(reinterpret_cast<const char*>(key), key_len);
  r->iov_sizes.clear();
  r->iov_data.clear();
  r->blob.clear();
  for (size_t i = 0; i < n_iov; ++i) {
    r->iov_sizes.push_back(iov[i].size);
    r->iov_data.push_back(iov[i].data);
    const auto* p = static_cast<const uint8_t*>(iov[i].data);
    r->blob.insert(r->blob.end(), p, p + iov[i].size);
  }
  return SWA_OK;
}

swa_status_t RecGet(void* ud, const uint8_t*, size_t, const swa_iov_t* iov, size_t n_iov,
                    uint64_t* blob_size, char* message, size_t cap) {
  auto* r = static_cast<Recorder*>(ud);
  if (r->fail_with != SWA_OK) {
    snprintf(message, cap, "%s", r->message);
    return static_cast<swa_status_t>(r->fail_with);
  }
  if (r->blob.empty()) return SWA_NOT_FOUND;
  uint64_t total = 0;
  for (size_t i = 0; i < n_iov; ++i) total += iov[i].size;
  *blob_size = r->blob.size() + r->claim_extra;
  if (total != *blob_size) return SWA_OK;
  size_t at = 0;
  for (size_t i = 0; i < n_iov; ++i) {
    std::memcpy(iov[i].data, r->blob.data() + at, iov[i].size);
    at += iov[i].size;
  }
  return SWA_OK;
}

void RecRelease(void* ud) { ++static_cast<Recorder*>(ud)->releases; }

swa_kv_store_t RecorderTable(Recorder* r) {
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  t.user_data = r;
  t.put = RecPut;
  t.get = RecGet;
  t.release = RecRelease;
  return t;
}

TEST(StoreApi, InitFillsSizeAndNulls) {
  swa_kv_store_t t;
  std::memset(&t, 0xAB, sizeof t);
  swa_kv_store_init(&t);
  EXPECT_EQ(t.struct_size, sizeof t);
  EXPECT_EQ(t.user_data, nullptr);
  EXPECT_EQ(t.put, nullptr);
  EXPECT_EQ(t.release, nullptr);
  swa_kv_store_init(nullptr);  // ignored
  swa_store_memory_config_t m;
  swa_store_memory_config_init(&m);
  EXPECT_EQ(m.budget_bytes, uint64_t{1} << 30);
  swa_store_directory_config_t d;
  swa_store_directory_config_init(&d);
  EXPECT_EQ(d.create, 1u);
  EXPECT_EQ(d.sync, 1u);
  swa_store_redis_config_t r;
  swa_store_redis_config_init(&r);
  EXPECT_STREQ(r.host, "127.0.0.1");
  EXPECT_EQ(r.port, 6379u);
}

TEST(StoreApi, NoStoreAndBadArguments) {
  CacheHolder h;
  MakeCache(&h);
  uint32_t slot = 99;
  ASSERT_EQ(swa_slot_alloc(h.cache, &slot), SWA_OK);
  EXPECT_EQ(swa_slot_save(h.cache, slot, kKey, sizeof kKey), SWA_FAILED_PRECONDITION);
  EXPECT_NE(std::string(swa_last_error()).find("swa_cache_set_store"), std::string::npos);
  EXPECT_EQ(swa_slot_restore(h.cache, slot, kKey, sizeof kKey), SWA_FAILED_PRECONDITION);
  uint32_t exists = 5;
  EXPECT_EQ(swa_cache_store_exists(h.cache, kKey, sizeof kKey, &exists), SWA_FAILED_PRECONDITION);
  EXPECT_EQ(exists, 5u);
  EXPECT_EQ(swa_cache_store_remove(h.cache, kKey, sizeof kKey), SWA_FAILED_PRECONDITION);
  EXPECT_EQ(swa_slot_save(nullptr, slot, kKey, sizeof kKey), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_slot_save(h.cache, slot, nullptr, 3), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_slot_save(h.cache, slot, kKey, 0), SWA_INVALID_ARGUMENT);
  std::vector<uint8_t> long_key(SWA_STORE_MAX_KEY_BYTES + 1, 'k');
  EXPECT_EQ(swa_slot_restore(h.cache, slot, long_key.data(), long_key.size()),
            SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(swa_last_error()).find("1025"), std::string::npos) << swa_last_error();
  EXPECT_EQ(swa_cache_set_store(nullptr, nullptr), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_cache_set_store(h.cache, nullptr), SWA_OK);  // detach: fine when none
}

TEST(StoreApi, LibraryHandsTheSlotInPlaceWithAPrefixedKey) {
  Recorder rec;  // outlives the cache, which releases it
  CacheHolder h;
  MakeCache(&h);
  uint32_t slot = 0;
  ASSERT_EQ(swa_slot_alloc(h.cache, &slot), SWA_OK);
  std::mt19937 rng(1);
  for (uint64_t i = 0; i < h.layout.slot_bytes; ++i) SlotBase(h, slot)[i] = uint8_t(rng() | 1);
  swa_kv_store_t t = RecorderTable(&rec);
  ASSERT_EQ(swa_cache_set_store(h.cache, &t), SWA_OK);
  ASSERT_EQ(swa_slot_save(h.cache, slot, kKey, sizeof kKey), SWA_OK) << swa_last_error();
  char prefix[32];
  snprintf(prefix, sizeof prefix, "%016llx:", static_cast<unsigned long long>(h.layout.fingerprint));
  EXPECT_EQ(rec.last_key, std::string(prefix) + std::string(reinterpret_cast<const char*>(kKey), sizeof kKey));
  ASSERT_EQ(rec.iov_sizes.size(), 2u);
  EXPECT_EQ(rec.iov_sizes[0], 64u);
  EXPECT_EQ(rec.iov_sizes[1], h.layout.stored_bytes);
  EXPECT_EQ(rec.iov_data[1], SlotBase(h, slot));  // no staging copy for a host pool
  EXPECT_EQ(std::memcmp(rec.blob.data(), "SWAB", 4), 0);
  // Restore into another slot through the engine's get.
  uint32_t other = 0;
  ASSERT_EQ(swa_slot_alloc(h.cache, &other), SWA_OK);
  ASSERT_EQ(swa_slot_restore(h.cache, other, kKey, sizeof kKey), SWA_OK) << swa_last_error();
  EXPECT_EQ(std::memcmp(SlotBase(h, other), SlotBase(h, slot), h.layout.stored_bytes), 0);
  // exists/remove are NULL in this table: not supported.
  uint32_t exists = 0;
  EXPECT_EQ(swa_cache_store_exists(h.cache, kKey, sizeof kKey, &exists), SWA_UNIMPLEMENTED);
  EXPECT_EQ(swa_cache_store_remove(h.cache, kKey, sizeof kKey), SWA_UNIMPLEMENTED);
  EXPECT_EQ(rec.releases, 0);
}

// A store that claims a blob larger than this layout's blobs is refused before
// anything is allocated for the claim, and the slot is untouched.
TEST(StoreApi, AStoreClaimingAHugeBlobIsRefusedWithoutReadingIt) {
  Recorder rec;  // outlives the cache, which releases it
  CacheHolder h;
  MakeCache(&h);
  uint32_t slot = 0, other = 0;
  ASSERT_EQ(swa_slot_alloc(h.cache, &slot), SWA_OK);
  ASSERT_EQ(swa_slot_alloc(h.cache, &other), SWA_OK);
  for (uint64_t i = 0; i < h.layout.slot_bytes; ++i) SlotBase(h, slot)[i] = uint8_t(i * 7 + 1);
  swa_kv_store_t t = RecorderTable(&rec);
  ASSERT_EQ(swa_cache_set_store(h.cache, &t), SWA_OK);
  ASSERT_EQ(swa_slot_save(h.cache, slot, kKey, sizeof kKey), SWA_OK) << swa_last_error();
  std::vector<uint8_t> before(SlotBase(h, other), SlotBase(h, other) + h.layout.slot_bytes);
  rec.claim_extra = uint64_t{200} << 20;
  EXPECT_EQ(swa_slot_restore(h.cache, other, kKey, sizeof kKey), SWA_FAILED_PRECONDITION);
  EXPECT_NE(std::string(swa_last_error()).find("larger than any blob"), std::string::npos)
      << swa_last_error();
  EXPECT_EQ(std::memcmp(before.data(), SlotBase(h, other), before.size()), 0);
}

TEST(StoreApi, CallbackMessagesAndCodesAreCopied) {
  Recorder rec;  // outlives the cache, which releases it
  CacheHolder h;
  MakeCache(&h);
  uint32_t slot = 0;
  ASSERT_EQ(swa_slot_alloc(h.cache, &slot), SWA_OK);
  swa_kv_store_t t = RecorderTable(&rec);
  ASSERT_EQ(swa_cache_set_store(h.cache, &t), SWA_OK);
  rec.fail_with = SWA_UNAVAILABLE;
  rec.message = "disk on fire";
  EXPECT_EQ(swa_slot_save(h.cache, slot, kKey, sizeof kKey), SWA_UNAVAILABLE);
  EXPECT_NE(std::string(swa_last_error()).find("disk on fire"), std::string::npos);
  EXPECT_NE(std::string(swa_last_error()).find("put"), std::string::npos);
  rec.fail_with = 99;
  rec.message = "weird";
  EXPECT_EQ(swa_slot_restore(h.cache, slot, kKey, sizeof kKey), SWA_UNKNOWN);
  EXPECT_NE(std::string(swa_last_error()).find("99"), std::string::npos) << swa_last_error();
  rec.fail_with = SWA_OK;
  EXPECT_EQ(swa_slot_restore(h.cache, slot, kKey, sizeof kKey), SWA_NOT_FOUND);
}

TEST(StoreApi, ReleaseExactlyOnceAndNeverOnFailure) {
  Recorder a, b;
  {
    CacheHolder h;
    MakeCache(&h);
    swa_kv_store_t ta = RecorderTable(&a);
    ta.struct_size = 3;
    EXPECT_EQ(swa_cache_set_store(h.cache, &ta), SWA_INVALID_ARGUMENT);
    swa_kv_store_t empty;
    swa_kv_store_init(&empty);
    empty.user_data = &a;
    empty.release = RecRelease;
    EXPECT_EQ(swa_cache_set_store(h.cache, &empty), SWA_INVALID_ARGUMENT);  // no put, no get
    EXPECT_EQ(a.releases, 0);
    ta = RecorderTable(&a);
    ASSERT_EQ(swa_cache_set_store(h.cache, &ta), SWA_OK);
    swa_kv_store_t tb = RecorderTable(&b);
    ASSERT_EQ(swa_cache_set_store(h.cache, &tb), SWA_OK);  // replaces a
    EXPECT_EQ(a.releases, 1);
    EXPECT_EQ(b.releases, 0);
  }  // destroy releases b
  EXPECT_EQ(a.releases, 1);
  EXPECT_EQ(b.releases, 1);
}

// A put that, from inside the callback (no library lock is held there), tries
// every call that must refuse a slot being saved, and checks another slot.
struct BusyProbe {
  swa_cache_t* cache = nullptr;
  uint32_t busy = 0, other = 0;
  std::vector<std::pair<std::string, swa_status_t>> seen;
  std::vector<std::string> messages;
};

swa_status_t ProbePut(void* ud, const uint8_t*, size_t, const swa_iov_t*, size_t, char*, size_t) {
  auto* p = static_cast<BusyProbe*>(ud);
  auto note = [&](const char* call, swa_status_t code) {
    p->seen.emplace_back(call, code);
    p->messages.push_back(code == SWA_OK ? "" : swa_last_error());
  };
  swa_plan_t* plan = nullptr;
  if (swa_plan_create(p->cache, &plan) != SWA_OK) return SWA_INTERNAL;
  const swa_seq_t on_busy = {p->busy, 4, 4, 0};
  const swa_seq_t on_other = {p->other, 4, 4, 0};
  note("free", swa_slot_free(p->cache, p->busy));
  note("reset", swa_slot_reset(p->cache, p->busy));
  note("copy", swa_slot_copy(p->cache, p->other, p->busy));
  note("plan_build", swa_plan_build(plan, &on_busy, 1));
  note("restore", swa_slot_restore(p->cache, p->busy, kKey, sizeof kKey));
  note("other_plan_build", swa_plan_build(plan, &on_other, 1));
  swa_plan_destroy(plan);
  return SWA_OK;
}

TEST(StoreApi, ASlotBeingSavedRefusesOtherCallsAndOtherSlotsWork) {
  CacheHolder h;
  MakeCache(&h);
  BusyProbe probe;
  probe.cache = h.cache;
  ASSERT_EQ(swa_slot_alloc(h.cache, &probe.busy), SWA_OK);
  ASSERT_EQ(swa_slot_alloc(h.cache, &probe.other), SWA_OK);
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  t.user_data = &probe;
  t.put = ProbePut;
  ASSERT_EQ(swa_cache_set_store(h.cache, &t), SWA_OK);
  ASSERT_EQ(swa_slot_save(h.cache, probe.busy, kKey, sizeof kKey), SWA_OK) << swa_last_error();
  ASSERT_EQ(probe.seen.size(), 6u);
  const std::string busy_text = "slot " + std::to_string(probe.busy) + " is being saved/restored";
  for (size_t i = 0; i + 1 < probe.seen.size(); ++i) {
    EXPECT_EQ(probe.seen[i].second, SWA_FAILED_PRECONDITION) << probe.seen[i].first;
    EXPECT_NE(probe.messages[i].find(busy_text), std::string::npos)
        << probe.seen[i].first << ": " << probe.messages[i];
  }
  EXPECT_EQ(probe.seen.back().second, SWA_OK) << probe.messages.back();
  // The save is over: the slot is free to use again.
  EXPECT_EQ(swa_slot_free(h.cache, probe.busy), SWA_OK);
}

TEST(StoreApi, MemoryStoreRoundTripStatsExistsRemove) {
  CacheHolder h;
  MakeCache(&h);
  uint32_t s0 = 0, s1 = 0;
  ASSERT_EQ(swa_slot_alloc(h.cache, &s0), SWA_OK);
  ASSERT_EQ(swa_slot_alloc(h.cache, &s1), SWA_OK);
  std::mt19937 rng(2);
  for (uint64_t i = 0; i < 2 * h.layout.slot_bytes; ++i) h.pool[i] = uint8_t(rng() | 1);
  swa_store_memory_config_t mc;
  swa_store_memory_config_init(&mc);
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  ASSERT_EQ(swa_store_memory_create(&mc, &t), SWA_OK);
  ASSERT_EQ(swa_cache_set_store(h.cache, &t), SWA_OK);
  const std::vector<uint8_t> saved(SlotBase(h, s0), SlotBase(h, s0) + h.layout.stored_bytes);
  const std::vector<uint8_t> s1_tail(SlotBase(h, s1) + h.layout.stored_bytes,
                                     SlotBase(h, s1) + h.layout.slot_bytes);
  ASSERT_EQ(swa_slot_save(h.cache, s0, kKey, sizeof kKey), SWA_OK) << swa_last_error();
  ASSERT_EQ(swa_slot_restore(h.cache, s1, kKey, sizeof kKey), SWA_OK) << swa_last_error();
  EXPECT_EQ(std::memcmp(SlotBase(h, s1), saved.data(), saved.size()), 0);
  EXPECT_EQ(std::memcmp(SlotBase(h, s1) + h.layout.stored_bytes, s1_tail.data(), s1_tail.size()), 0)
      << "the dropped layer of the target slot must be left alone";
  uint32_t exists = 0;
  ASSERT_EQ(swa_cache_store_exists(h.cache, kKey, sizeof kKey, &exists), SWA_OK);
  EXPECT_EQ(exists, 1u);
  EXPECT_EQ(swa_slot_restore(h.cache, s1, kKey, 3), SWA_NOT_FOUND);
  swa_store_memory_stats_t st;
  st.struct_size = sizeof st;
  ASSERT_EQ(swa_store_memory_stats(&t, &st), SWA_OK);
  EXPECT_EQ(st.puts, 1u);
  EXPECT_EQ(st.hits, 1u);
  EXPECT_EQ(st.misses, 1u);
  EXPECT_EQ(st.entries, 1u);
  EXPECT_EQ(st.bytes, 17 + sizeof kKey + 64 + h.layout.stored_bytes);
  EXPECT_EQ(st.budget_bytes, mc.budget_bytes);
  ASSERT_EQ(swa_cache_store_remove(h.cache, kKey, sizeof kKey), SWA_OK);
  EXPECT_EQ(swa_cache_store_remove(h.cache, kKey, sizeof kKey), SWA_NOT_FOUND);
  ASSERT_EQ(swa_cache_store_exists(h.cache, kKey, sizeof kKey, &exists), SWA_OK);
  EXPECT_EQ(exists, 0u);
  EXPECT_EQ(swa_cache_store_exists(h.cache, kKey, sizeof kKey, nullptr), SWA_INVALID_ARGUMENT);
  // Stats of a table that is not a memory store, and bad arguments.
  Recorder rec;
  swa_kv_store_t other = RecorderTable(&rec);
  EXPECT_EQ(swa_store_memory_stats(&other, &st), SWA_INVALID_ARGUMENT);
  mc.budget_bytes = 0;
  swa_kv_store_t unused;
  swa_kv_store_init(&unused);
  EXPECT_EQ(swa_store_memory_create(&mc, &unused), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(unused.user_data, nullptr);
  mc.budget_bytes = 100;
  mc.struct_size = 1;
  EXPECT_EQ(swa_store_memory_create(&mc, &unused), SWA_INVALID_ARGUMENT);
}

TEST(StoreApi, DirectoryStoreSurvivesAnotherCache) {
  char tmpl[] = "/tmp/swa_apidir_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string root = std::string(tmpl) + "/nested/store";
  swa_store_directory_config_t dc;
  swa_store_directory_config_init(&dc);
  dc.path = root.c_str();
  std::vector<uint8_t> saved;
  {
    CacheHolder h;
    MakeCache(&h);
    uint32_t s = 0;
    ASSERT_EQ(swa_slot_alloc(h.cache, &s), SWA_OK);
    std::mt19937 rng(3);
    for (uint64_t i = 0; i < h.layout.stored_bytes; ++i) SlotBase(h, s)[i] = uint8_t(rng() | 1);
    saved.assign(SlotBase(h, s), SlotBase(h, s) + h.layout.stored_bytes);
    swa_kv_store_t t;
    swa_kv_store_init(&t);
    ASSERT_EQ(swa_store_directory_create(&dc, &t), SWA_OK) << swa_last_error();
    ASSERT_EQ(swa_cache_set_store(h.cache, &t), SWA_OK);
    ASSERT_EQ(swa_slot_save(h.cache, s, kKey, sizeof kKey), SWA_OK) << swa_last_error();
  }
  CacheHolder h;
  MakeCache(&h);
  uint32_t s = 0;
  ASSERT_EQ(swa_slot_alloc(h.cache, &s), SWA_OK);
  dc.create = 0;
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  ASSERT_EQ(swa_store_directory_create(&dc, &t), SWA_OK) << swa_last_error();
  ASSERT_EQ(swa_cache_set_store(h.cache, &t), SWA_OK);
  ASSERT_EQ(swa_slot_restore(h.cache, s, kKey, sizeof kKey), SWA_OK) << swa_last_error();
  EXPECT_EQ(std::memcmp(SlotBase(h, s), saved.data(), saved.size()), 0);
  // A cache with another window uses another key prefix: a plain miss.
  CacheHolder other;
  MakeCache(&other, /*window=*/64);
  uint32_t os = 0;
  ASSERT_EQ(swa_slot_alloc(other.cache, &os), SWA_OK);
  swa_kv_store_t t2;
  swa_kv_store_init(&t2);
  ASSERT_EQ(swa_store_directory_create(&dc, &t2), SWA_OK);
  ASSERT_EQ(swa_cache_set_store(other.cache, &t2), SWA_OK);
  EXPECT_EQ(swa_slot_restore(other.cache, os, kKey, sizeof kKey), SWA_NOT_FOUND);
  // Bad configurations.
  dc.path = nullptr;
  EXPECT_EQ(swa_store_directory_create(&dc, &t2), SWA_INVALID_ARGUMENT);
  const std::string missing = std::string(tmpl) + "/missing";
  dc.path = missing.c_str();
  EXPECT_EQ(swa_store_directory_create(&dc, &t2), SWA_NOT_FOUND);
  std::filesystem::remove_all(tmpl);
}

TEST(StoreApi, RedisCreateValidatesOrIsUnimplemented) {
  swa_store_redis_config_t c;
  swa_store_redis_config_init(&c);
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  c.host = nullptr;
  EXPECT_EQ(swa_store_redis_create(&c, &t), SWA_INVALID_ARGUMENT);
  c.host = "127.0.0.1";
  c.port = 0;
  const swa_status_t s = swa_store_redis_create(&c, &t);
  EXPECT_TRUE(s == SWA_INVALID_ARGUMENT || s == SWA_UNIMPLEMENTED) << swa_status_string(s);
  if (s == SWA_UNIMPLEMENTED)
    EXPECT_NE(std::string(swa_last_error()).find("hiredis"), std::string::npos);
}

}  // namespace
