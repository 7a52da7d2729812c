// The tiered store: hits promote into faster tiers, a failing tier is named,
// the memory tier's budget evicts without losing what the directory tier
// holds, exists/remove span the tiers, the fault wrapper under a cache, and
// the C calls (ownership of the tier tables, stats).
#include <unistd.h>

#include <filesystem>
#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "capi/store_table.h"
#include "gtest/gtest.h"
#include "store/directory_store.h"
#include "store/memory_store.h"
#include "store/tiered_store.h"
#include "swacache.h"
#include "unit/store_test_util.h"

namespace swa {
namespace {

using testing::Faults;
using testing::FaultStore;

absl::Status PutString(KvStore& s, std::string_view key, const std::string& v) {
  const ConstByteSpan one[1] = {ConstByteSpan(reinterpret_cast<const uint8_t*>(v.data()), v.size())};
  return s.Put(key, one);
}

absl::StatusOr<std::string> GetString(KvStore& s, std::string_view key, size_t size) {
  std::string v(size, '\xCC');
  const ByteSpan one[1] = {ByteSpan(reinterpret_cast<uint8_t*>(v.data()), v.size())};
  absl::StatusOr<uint64_t> got = s.Get(key, one);
  if (!got.ok()) return got.status();
  if (*got != size) return absl::InternalError("size " + std::to_string(*got));
  return v;
}

std::string Bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/swa-tiered-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct TwoTiers {
  std::shared_ptr<Faults> front_faults = std::make_shared<Faults>();
  std::shared_ptr<Faults> back_faults = std::make_shared<Faults>();
  std::unique_ptr<TieredStore> store;
  TwoTiers(uint64_t front_budget = 1 << 20) {
    std::vector<std::unique_ptr<KvStore>> tiers;
    tiers.push_back(std::make_unique<FaultStore>(std::make_unique<MemoryStore>(front_budget), front_faults));
    tiers.push_back(std::make_unique<FaultStore>(std::make_unique<MemoryStore>(64 << 20), back_faults));
    store = std::move(*TieredStore::Create(std::move(tiers)));
  }
};

TEST(TieredStore, HitsInASlowerTierArePromoted) {
  TwoTiers t;
  const std::string v = Bytes(5000, 1);
  ASSERT_TRUE(PutString(*t.store, "k", v).ok());
  EXPECT_EQ(t.store->Stats(0).puts, 1u);
  EXPECT_EQ(t.store->Stats(1).puts, 1u);
  ASSERT_TRUE(t.store->tier(0).Remove("k").ok());  // as if evicted from the front
  absl::StatusOr<std::string> got = GetString(*t.store, "k", v.size());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, v);
  EXPECT_EQ(t.store->Stats(0).misses, 1u);
  EXPECT_EQ(t.store->Stats(1).hits, 1u);
  EXPECT_EQ(t.store->Stats(1).bytes_read, v.size());
  EXPECT_EQ(t.store->Stats(0).promotions, 1u);
  got = GetString(t.store->tier(0), "k", v.size());  // the front has it again
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, v);
  const int back_gets = t.back_faults->gets;
  ASSERT_TRUE(GetString(*t.store, "k", v.size()).ok());
  EXPECT_EQ(t.back_faults->gets, back_gets);  // answered by the front
  EXPECT_EQ(t.store->Stats(0).hits, 1u);
  // A wrong-sized read reports the size and promotes nothing.
  ASSERT_TRUE(t.store->tier(0).Remove("k").ok());
  std::string small(10, '\0');
  const ByteSpan one[1] = {ByteSpan(reinterpret_cast<uint8_t*>(small.data()), small.size())};
  EXPECT_EQ(*t.store->Get("k", one), v.size());
  EXPECT_FALSE(*t.store->tier(0).Exists("k"));
}

TEST(TieredStore, AFailingTierIsNamed) {
  TwoTiers t;
  const std::string v = Bytes(300, 2);
  t.back_faults->fail_put = static_cast<int>(absl::StatusCode::kUnavailable);
  absl::Status put = PutString(*t.store, "k", v);
  EXPECT_TRUE(absl::IsUnavailable(put)) << put;
  EXPECT_TRUE(absl::StrContains(put.message(), "tier 1 of 2")) << put;
  EXPECT_TRUE(absl::StrContains(put.message(), "injected failure of put")) << put;
  EXPECT_FALSE(*t.store->tier(0).Exists("k"));  // the front holds nothing the back lacks
  EXPECT_EQ(t.store->Stats(1).errors, 1u);
  t.back_faults->fail_put = 0;
  ASSERT_TRUE(PutString(*t.store, "k", v).ok());
  // A failing front is skipped when the back has the key ...
  t.front_faults->fail_get = static_cast<int>(absl::StatusCode::kDataLoss);
  absl::StatusOr<std::string> got = GetString(*t.store, "k", v.size());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, v);
  // ... and reported, named, when no tier has it.
  absl::StatusOr<std::string> missing = GetString(*t.store, "absent", 10);
  EXPECT_TRUE(absl::IsDataLoss(missing.status())) << missing.status();
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "tier 0 of 2"));
  t.front_faults->fail_get = 0;
  t.back_faults->fail_get = static_cast<int>(absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(t.store->tier(0).Remove("k").ok());
  got = GetString(*t.store, "k", v.size());
  EXPECT_TRUE(absl::IsDeadlineExceeded(got.status()));
  EXPECT_TRUE(absl::StrContains(got.status().message(), "tier 1 of 2"));
  t.back_faults->fail_exists = static_cast<int>(absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::IsUnavailable(t.store->Exists("k").status()));
  t.back_faults->fail_remove = static_cast<int>(absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::IsUnavailable(t.store->Remove("k")));
}

TEST(TieredStore, ExistsAndRemoveSpanTheTiers) {
  TwoTiers t;
  ASSERT_TRUE(PutString(t.store->tier(1), "low", "x").ok());
  EXPECT_TRUE(*t.store->Exists("low"));
  EXPECT_FALSE(*t.store->Exists("none"));
  ASSERT_TRUE(PutString(*t.store, "both", "y").ok());
  ASSERT_TRUE(t.store->Remove("both").ok());
  EXPECT_FALSE(*t.store->tier(0).Exists("both"));
  EXPECT_FALSE(*t.store->tier(1).Exists("both"));
  ASSERT_TRUE(t.store->Remove("low").ok());
  EXPECT_TRUE(absl::IsNotFound(t.store->Remove("low")));
  EXPECT_TRUE(absl::IsNotFound(t.store->Get("low", {}).status()));
}

TEST(TieredStore, MemoryBudgetEvictsWithoutLosingTheDirectoryTier) {
  TempDir dir;
  DirectoryStoreOptions o;
  o.path = dir.path();
  o.sync = false;
  std::vector<std::unique_ptr<KvStore>> tiers;
  auto* memory = new MemoryStore(10 * 4200);  // room for about 10 blobs
  tiers.emplace_back(memory);
  tiers.push_back(std::move(*DirectoryStore::Open(o)));
  auto store = std::move(*TieredStore::Create(std::move(tiers)));
  for (int i = 0; i < 60; ++i)
    ASSERT_TRUE(PutString(*store, "seq" + std::to_string(i), Bytes(4096, i)).ok());
  EXPECT_GT(memory->Stats().evictions, 40u);
  EXPECT_LE(memory->Stats().bytes, 10u * 4200);
  for (int round = 0; round < 2; ++round)
    for (int i = 0; i < 60; ++i) {
      absl::StatusOr<std::string> got = GetString(*store, "seq" + std::to_string(i), 4096);
      ASSERT_TRUE(got.ok()) << i << ": " << got.status();
      ASSERT_EQ(*got, Bytes(4096, i));
    }
  EXPECT_GT(store->Stats(1).hits, 50u);
  EXPECT_GT(store->Stats(0).promotions, 50u);
  EXPECT_LE(memory->Stats().bytes, 10u * 4200);
}

TEST(TieredStore, SlotRoundTripAndCorruptionBelowTheFront) {
  TwoTiers t;
  auto* tiered = t.store.get();
  auto cache = testing::MakeCache();
  std::mt19937_64 rng(9);
  testing::FillRandom(cache->pool(), cache->layout().pool_bytes(), rng);
  const uint32_t a = *cache->slots().Alloc(), b = *cache->slots().Alloc();
  ASSERT_TRUE(cache->slots().Set(a, {true, 321, 300}).ok());
  cache->SetStore(std::make_shared<BlobStore>(std::move(t.store), cache->layout().fingerprint()));
  ASSERT_TRUE(testing::Save(*cache, a, "seq").ok());
  const std::vector<uint8_t> before = testing::PoolBytes(*cache);
  // Drop the front copy and corrupt what the back returns: the CRC32C catches it.
  t.front_faults->fail_get = static_cast<int>(absl::StatusCode::kNotFound);
  t.back_faults->flip_bit = 64 * 8 + 777;
  EXPECT_TRUE(absl::IsDataLoss(testing::Restore(*cache, b, "seq")));
  EXPECT_TRUE(testing::PoolBytes(*cache) == before);
  t.back_faults->flip_bit = -1;
  ASSERT_TRUE(testing::Restore(*cache, b, "seq").ok());
  EXPECT_TRUE(std::equal(cache->slot_base(a), cache->slot_base(a) + cache->layout().stored_bytes(),
                         cache->slot_base(b)));
  EXPECT_EQ(cache->slots().Get(b)->written_end, 321);
  EXPECT_GE(tiered->Stats(1).hits, 2u);
}

// A blob the restore refuses is never copied into a faster tier: a bad read
// from the slow tier (a flipped bit in transit) must not leave a copy in the
// front that fails every later restore while the tier of record is sound.
TEST(TieredStore, ARefusedBlobIsNeverPromoted) {
  TwoTiers t;
  auto* tiered = t.store.get();
  auto cache = testing::MakeCache();
  std::mt19937_64 rng(41);
  testing::FillRandom(cache->pool(), cache->layout().pool_bytes(), rng);
  const uint32_t a = *cache->slots().Alloc(), b = *cache->slots().Alloc();
  ASSERT_TRUE(cache->slots().Set(a, {true, 517, 400}).ok());
  cache->SetStore(std::make_shared<BlobStore>(std::move(t.store), cache->layout().fingerprint()));
  ASSERT_TRUE(testing::Save(*cache, a, "seq").ok());
  const std::string full = (*cache->store())->FullKey("seq");
  ASSERT_TRUE(tiered->tier(0).Remove(full).ok());  // evicted from the front
  const std::vector<uint8_t> before = testing::PoolBytes(*cache);
  for (int64_t bit : {64 * 8 + 3, 5 * 8 + 1}) {  // a payload bit, a header bit
    t.back_faults->flip_bit = bit;
    EXPECT_FALSE(testing::Restore(*cache, b, "seq").ok()) << bit;
    EXPECT_TRUE(testing::PoolBytes(*cache) == before) << bit;
    EXPECT_FALSE(*tiered->tier(0).Exists(full)) << "bit " << bit << ": promoted a refused blob";
    EXPECT_EQ(tiered->Stats(0).promotions, 0u);
  }
  // A blob of another size (another layout's, or this one's with a tag) read
  // whole to explain the mismatch is not promoted either.
  t.back_faults->flip_bit = -1;
  t.back_faults->extend_by = 32;
  EXPECT_FALSE(testing::Restore(*cache, b, "seq").ok());
  EXPECT_FALSE(*tiered->tier(0).Exists(full)) << "promoted a blob of the wrong size";
  // The slow tier reads soundly again: the restore succeeds, and only now is
  // the blob promoted.
  t.back_faults->extend_by = 0;
  ASSERT_TRUE(testing::Restore(*cache, b, "seq").ok());
  EXPECT_TRUE(std::equal(cache->slot_base(a), cache->slot_base(a) + cache->layout().stored_bytes(),
                         cache->slot_base(b)));
  EXPECT_EQ(cache->slots().Get(b)->written_end, 517);
  EXPECT_TRUE(*tiered->tier(0).Exists(full));
  EXPECT_EQ(tiered->Stats(0).promotions, 1u);
  // The promoted copy answers the next restore by itself.
  t.back_faults->fail_get = static_cast<int>(absl::StatusCode::kUnavailable);
  EXPECT_TRUE(testing::Restore(*cache, b, "seq").ok());
}

// One key saved from two slots by one thread while another restores it, with
// a front tier too small for two blobs (every other restore is a promotion):
// each restore yields exactly one of the two saved states, bytes and
// positions together, never a mix.
TEST(TieredStore, ConcurrentSavesAndRestoresOfOneKeyAreNeverTorn) {
  auto probe = testing::MakeCache();
  const uint64_t blob = kBlobHeaderBytes + probe->layout().stored_bytes() + 64;
  TwoTiers t(blob + blob / 2);  // room for one blob and its key
  auto cache = testing::MakeCache();
  std::mt19937_64 rng(59);
  testing::FillRandom(cache->pool(), cache->layout().pool_bytes(), rng);
  const uint32_t a = *cache->slots().Alloc(), c = *cache->slots().Alloc(),
                 b = *cache->slots().Alloc();
  ASSERT_TRUE(cache->slots().Set(a, {true, 200, 10}).ok());
  ASSERT_TRUE(cache->slots().Set(c, {true, 300, 20}).ok());
  auto* tiered = t.store.get();
  cache->SetStore(std::make_shared<BlobStore>(std::move(t.store), cache->layout().fingerprint()));
  ASSERT_TRUE(testing::Save(*cache, a, "k").ok());
  ASSERT_TRUE(testing::Save(*cache, a, "other").ok());  // evicts "k" from the front
  const uint64_t stored = cache->layout().stored_bytes();
  std::atomic<bool> stop{false};
  std::atomic<int> save_errors{0};
  std::thread saver([&] {
    for (int i = 0; !stop.load(); ++i) {
      if (!testing::Save(*cache, i % 2 ? c : a, "k").ok()) save_errors.fetch_add(1);
      if (!testing::Save(*cache, a, "other").ok()) save_errors.fetch_add(1);
    }
  });
  int torn = 0, failed = 0, from_a = 0, from_c = 0;
  for (int i = 0; i < 400; ++i) {
    if (!testing::Restore(*cache, b, "k").ok()) {
      ++failed;
      continue;
    }
    const SlotState st = *cache->slots().Get(b);
    const uint32_t src = st.written_end == 200 ? a : c;
    const bool same = std::equal(cache->slot_base(src), cache->slot_base(src) + stored,
                                 cache->slot_base(b));
    if (!same || (st.written_end != 200 && st.written_end != 300) ||
        st.valid_start != (src == a ? 10 : 20))
      ++torn;
    (src == a ? from_a : from_c)++;
  }
  stop = true;
  saver.join();
  EXPECT_EQ(torn, 0);
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(save_errors.load(), 0);
  EXPECT_GT(from_a + from_c, 0);
  EXPECT_GT(tiered->Stats(0).promotions, 0u);
}

// ---- C calls ----

struct Counted {
  int releases = 0;
};
void CountRelease(void* ud) { ++static_cast<Counted*>(ud)->releases; }
swa_status_t NoPut(void*, const uint8_t*, size_t, const swa_iov_t*, size_t, char* msg, size_t cap) {
  std::snprintf(msg, cap, "engine store is read-only");
  return SWA_PERMISSION_DENIED;
}

TEST(TieredStoreApi, OwnsItsTiersAndReportsStats) {
  swa_store_memory_config_t mc;
  swa_store_memory_config_init(&mc);
  swa_kv_store_t tiers[2];
  swa_kv_store_init(&tiers[0]);
  ASSERT_EQ(swa_store_memory_create(&mc, &tiers[0]), SWA_OK);
  Counted engine;
  swa_kv_store_init(&tiers[1]);
  tiers[1].user_data = &engine;
  tiers[1].put = &NoPut;
  tiers[1].release = &CountRelease;

  swa_store_tiered_config_t c;
  swa_store_tiered_config_init(&c);
  swa_kv_store_t out;
  swa_kv_store_init(&out);
  EXPECT_EQ(swa_store_tiered_create(&c, &out), SWA_INVALID_ARGUMENT);  // no tiers
  swa_kv_store_t twice[2] = {tiers[1], tiers[1]};
  c.tiers = twice;
  c.n_tiers = 2;
  EXPECT_EQ(swa_store_tiered_create(&c, &out), SWA_INVALID_ARGUMENT) << swa_last_error();
  EXPECT_EQ(engine.releases, 0);  // refused: the caller still owns both
  c.tiers = tiers;
  ASSERT_EQ(swa_store_tiered_create(&c, &out), SWA_OK) << swa_last_error();

  char msg[SWA_STORE_MESSAGE_BYTES] = {0};
  const uint8_t key[] = {'k'};
  const std::string v = "value";
  const swa_iov_t iov[1] = {{const_cast<char*>(v.data()), v.size()}};
  EXPECT_EQ(out.put(out.user_data, key, 1, iov, 1, msg, sizeof msg), SWA_PERMISSION_DENIED);
  EXPECT_NE(std::string(msg).find("tier 1 of 2"), std::string::npos) << msg;
  EXPECT_NE(std::string(msg).find("read-only"), std::string::npos) << msg;
  swa_store_tier_stats_t st;
  st.struct_size = sizeof st;
  ASSERT_EQ(swa_store_tiered_stats(&out, 1, &st), SWA_OK);
  EXPECT_EQ(st.errors, 1u);
  ASSERT_EQ(swa_store_tiered_stats(&out, 0, &st), SWA_OK);
  EXPECT_EQ(st.puts, 0u);  // the slowest tier is written first: the front never was
  EXPECT_EQ(swa_store_tiered_stats(&out, 2, &st), SWA_OUT_OF_RANGE);
  EXPECT_EQ(swa_store_tiered_stats(&tiers[0], 0, &st), SWA_INVALID_ARGUMENT);
  swa_store_memory_stats_t ms;
  ms.struct_size = sizeof ms;
  ASSERT_EQ(swa_store_memory_stats(&tiers[0], &ms), SWA_OK);  // still alive inside
  EXPECT_EQ(ms.entries, 0u);
  out.release(out.user_data);
  EXPECT_EQ(engine.releases, 1);
}

}  // namespace
}  // namespace swa
