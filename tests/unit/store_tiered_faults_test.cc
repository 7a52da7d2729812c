// The tiered store when tiers fail (docs/store.md, "Tiered"): a put that
// fails never becomes visible (the slowest tier is written first), a faster
// tier that cannot take a put or drop its old copy is fenced, removes obey the
// same rule, calls on one key are ordered (forced interleavings through the
// fault store's gates), and a random model check over fault combinations.
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "store/memory_store.h"
#include "store/tiered_store.h"
#include "unit/store_test_util.h"

namespace swa {
namespace {

using testing::Faults;
using testing::FaultStore;

constexpr int kUnavailable = static_cast<int>(absl::StatusCode::kUnavailable);

absl::Status PutString(KvStore& s, std::string_view key, const std::string& v) {
  const ConstByteSpan one[1] = {ConstByteSpan(reinterpret_cast<const uint8_t*>(v.data()), v.size())};
  return s.Put(key, one);
}

// The blob under `key` whole, or the status. A right `guess` reads in one
// call (the gated tests need their held call to be the one that promotes).
absl::StatusOr<std::string> GetString(KvStore& s, std::string_view key, size_t guess = 16) {
  std::string v(guess, '\xCC');
  for (int i = 0; i < 2; ++i) {
    const ByteSpan one[1] = {ByteSpan(reinterpret_cast<uint8_t*>(v.data()), v.size())};
    absl::StatusOr<uint64_t> size = s.Get(key, one);
    if (!size.ok()) return size.status();
    if (*size == v.size()) return v;
    v.assign(*size, '\xCC');
  }
  return absl::InternalError("size changed between two reads");
}

std::string Bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() | 1);
  return s;
}

// Tiers of fault-wrapped memory stores, fastest first.
struct Stack {
  std::vector<std::shared_ptr<Faults>> faults;
  std::unique_ptr<TieredStore> store;
  explicit Stack(int n = 2) {
    std::vector<std::unique_ptr<KvStore>> tiers;
    for (int i = 0; i < n; ++i) {
      faults.push_back(std::make_shared<Faults>());
      tiers.push_back(std::make_unique<FaultStore>(std::make_unique<MemoryStore>(64 << 20), faults.back()));
    }
    store = std::move(*TieredStore::Create(std::move(tiers)));
  }
  Faults& f(size_t i) { return *faults[i]; }
  // What tier i holds, read past the fault wrapper's faults.
  std::optional<std::string> Held(size_t i) {
    const int fail = f(i).fail_get.exchange(0);
    absl::StatusOr<std::string> v = GetString(store->tier(i), "k");
    f(i).fail_get = fail;
    if (absl::IsNotFound(v.status())) return std::nullopt;
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? std::optional<std::string>(*v) : std::nullopt;
  }
};

// ---- The case of issue 27, through a cache ----

struct CacheOverStack {
  Stack stack;
  std::unique_ptr<Cache> cache = testing::MakeCache();
  uint32_t a = 0, b = 0;
  CacheOverStack() {
    std::mt19937_64 rng(27);
    testing::FillRandom(cache->pool(), cache->layout().pool_bytes(), rng);
    a = *cache->slots().Alloc();
    b = *cache->slots().Alloc();
    EXPECT_TRUE(cache->slots().Set(b, {true, 40, 30}).ok());
    cache->SetStore(std::make_shared<BlobStore>(std::move(stack.store), cache->layout().fingerprint()));
  }
  std::vector<uint8_t> Stored(uint32_t slot) const {
    return std::vector<uint8_t>(cache->slot_base(slot), cache->slot_base(slot) + cache->layout().stored_bytes());
  }
  void Rewrite(uint32_t slot, int32_t written_end, uint64_t seed) {
    std::mt19937_64 rng(seed);
    testing::FillRandom(cache->slot_base(slot), cache->layout().stored_bytes(), rng);
    ASSERT_TRUE(cache->slots().Set(slot, {true, written_end, written_end - 10}).ok());
  }
};

// Slow tier fails, the fast tier's clean-up would fail too: the save is an
// error and a restore misses; the target slot and the whole pool are untouched.
TEST(TieredStoreFaults, AFailedSaveIsNeverRestored) {
  CacheOverStack t;
  t.Rewrite(t.a, 321, 1);
  t.stack.f(1).fail_put = kUnavailable;
  t.stack.f(0).fail_remove = kUnavailable;
  absl::Status save = testing::Save(*t.cache, t.a, "seq");
  EXPECT_TRUE(absl::IsUnavailable(save)) << save;
  EXPECT_TRUE(absl::StrContains(save.message(), "tier 1 of 2")) << save;
  EXPECT_EQ(t.stack.f(0).puts, 0);  // the fast tier was never written
  const std::vector<uint8_t> pool = testing::PoolBytes(*t.cache);
  absl::Status restore = testing::Restore(*t.cache, t.b, "seq");
  EXPECT_TRUE(absl::IsNotFound(restore)) << restore;
  EXPECT_TRUE(testing::PoolBytes(*t.cache) == pool);
  EXPECT_EQ(t.cache->slots().Get(t.b)->written_end, 40);
  EXPECT_EQ(t.cache->slots().Get(t.b)->valid_start, 30);
}

// The same over a previous save of the key: a restore gets that one, exactly.
TEST(TieredStoreFaults, AFailedOverwriteRestoresThePreviousSave) {
  CacheOverStack t;
  t.Rewrite(t.a, 200, 2);
  ASSERT_TRUE(testing::Save(*t.cache, t.a, "seq").ok());
  const std::vector<uint8_t> first = t.Stored(t.a);
  t.Rewrite(t.a, 321, 3);
  t.stack.f(1).fail_put = kUnavailable;
  t.stack.f(0).fail_remove = kUnavailable;
  EXPECT_TRUE(absl::IsUnavailable(testing::Save(*t.cache, t.a, "seq")));
  const std::vector<uint8_t> second = t.Stored(t.a);
  ASSERT_TRUE(testing::Restore(*t.cache, t.b, "seq").ok());
  EXPECT_TRUE(t.Stored(t.b) == first);
  EXPECT_FALSE(t.Stored(t.b) == second);
  EXPECT_EQ(t.cache->slots().Get(t.b)->written_end, 200);
  EXPECT_EQ(t.cache->slots().Get(t.b)->valid_start, 190);
  // Also when the front copy is gone and the back tier answers.
  t.stack.f(0).fail_get = static_cast<int>(absl::StatusCode::kNotFound);
  ASSERT_TRUE(t.cache->slots().Set(t.b, {true, 1, 0}).ok());
  ASSERT_TRUE(testing::Restore(*t.cache, t.b, "seq").ok());
  EXPECT_TRUE(t.Stored(t.b) == first);
  EXPECT_EQ(t.cache->slots().Get(t.b)->written_end, 200);
}

// ---- Puts ----

TEST(TieredStoreFaults, TheSlowestTiersFailureTouchesNoOtherTier) {
  Stack t(3);
  const std::string v0 = Bytes(300, 10), v1 = Bytes(300, 11);
  ASSERT_TRUE(PutString(*t.store, "k", v0).ok());
  const int front_puts = t.f(0).puts, middle_puts = t.f(1).puts;
  t.f(2).fail_put = kUnavailable;
  t.f(1).fail_remove = t.f(0).fail_remove = kUnavailable;
  absl::Status put = PutString(*t.store, "k", v1);
  EXPECT_TRUE(absl::IsUnavailable(put)) << put;
  EXPECT_TRUE(absl::StrContains(put.message(), "tier 2 of 3")) << put;
  EXPECT_EQ(t.f(0).puts, front_puts);
  EXPECT_EQ(t.f(1).puts, middle_puts);
  EXPECT_EQ(t.f(0).removes + t.f(1).removes, 0);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(t.Held(i), v0) << i;
  EXPECT_EQ(GetString(*t.store, "k").value_or("<error>"), v0);
  EXPECT_EQ(t.store->Stats(2).errors, 1u);
}

TEST(TieredStoreFaults, AFastTierThatRefusesAPutLosesItsOldCopy) {
  Stack t;
  const std::string v0 = Bytes(300, 20), v1 = Bytes(300, 21);
  ASSERT_TRUE(PutString(*t.store, "k", v0).ok());
  t.f(0).fail_put = static_cast<int>(absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(PutString(*t.store, "k", v1).ok());  // the tier of record has it
  EXPECT_EQ(t.Held(0), std::nullopt);
  EXPECT_EQ(t.Held(1), v1);
  EXPECT_EQ(GetString(*t.store, "k").value_or("<error>"), v1);  // its promotion fails: counted
  EXPECT_EQ(t.store->Stats(0).errors, 2u);
  EXPECT_EQ(t.store->Stats(0).fenced, 0u);
  t.f(0).fail_put = 0;
  EXPECT_EQ(GetString(*t.store, "k").value_or("<error>"), v1);
  EXPECT_EQ(t.Held(0), v1);
}

TEST(TieredStoreFaults, AFastTierThatCannotDropItsOldCopyIsFenced) {
  Stack t;
  const std::string v0 = Bytes(300, 30), v1 = Bytes(300, 31);
  ASSERT_TRUE(PutString(*t.store, "k", v0).ok());
  t.f(0).fail_put = kUnavailable;
  t.f(0).fail_remove = kUnavailable;
  ASSERT_TRUE(PutString(*t.store, "k", v1).ok());
  EXPECT_EQ(t.Held(0), v0);  // stale, and never served
  EXPECT_EQ(t.store->Stats(0).fenced, 1u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(GetString(*t.store, "k").value_or("<error>"), v1);
  EXPECT_TRUE(t.store->Exists("k").value_or(false));
  // Once a promotion reaches the tier again it holds the current blob and answers.
  t.f(0).fail_put = 0;
  EXPECT_EQ(GetString(*t.store, "k").value_or("<error>"), v1);
  EXPECT_EQ(t.Held(0), v1);
  EXPECT_EQ(t.store->Stats(0).fenced, 0u);
  const int back_gets = t.f(1).gets;
  EXPECT_EQ(GetString(*t.store, "k").value_or("<error>"), v1);
  EXPECT_EQ(t.f(1).gets, back_gets);
}

TEST(TieredStoreFaults, AFencedCopyNeverCountsAsTheKey) {
  Stack t;
  ASSERT_TRUE(PutString(*t.store, "k", Bytes(100, 40)).ok());
  t.f(0).fail_put = t.f(0).fail_remove = kUnavailable;
  ASSERT_TRUE(PutString(*t.store, "k", Bytes(100, 41)).ok());
  ASSERT_TRUE(t.store->tier(1).Remove("k").ok());  // as if the back's TTL ran out
  EXPECT_TRUE(absl::IsNotFound(GetString(*t.store, "k").status()));
  EXPECT_FALSE(t.store->Exists("k").value_or(true));
  EXPECT_TRUE(absl::IsNotFound(t.store->Remove("k")));
  EXPECT_TRUE(t.Held(0).has_value());  // the stale copy is still there, fenced
}

TEST(TieredStoreFaults, AFailingMiddleTierIsFencedAndSkipped) {
  Stack t(3);
  const std::string v0 = Bytes(300, 50), v1 = Bytes(300, 51);
  ASSERT_TRUE(PutString(*t.store, "k", v0).ok());
  t.f(1).fail_put = t.f(1).fail_remove = kUnavailable;
  ASSERT_TRUE(PutString(*t.store, "k", v1).ok());
  EXPECT_EQ(t.Held(0), v1);
  EXPECT_EQ(t.Held(1), v0);
  EXPECT_EQ(t.Held(2), v1);
  ASSERT_TRUE(t.store->tier(0).Remove("k").ok());  // evicted from the front
  const int middle_gets = t.f(1).gets;
  EXPECT_EQ(GetString(*t.store, "k").value_or("<error>"), v1);  // the middle's stale copy is not even read
  EXPECT_EQ(t.f(1).gets, middle_gets);
  EXPECT_EQ(t.store->Stats(1).hits, 0u);
  EXPECT_EQ(t.Held(0), v1);  // promoted into the front; the middle refused
  EXPECT_EQ(t.store->Stats(1).fenced, 1u);
}

// ---- Removes ----

TEST(TieredStoreFaults, AFailedRemoveInTheSlowestTierChangesNothing) {
  Stack t;
  const std::string v0 = Bytes(300, 60);
  ASSERT_TRUE(PutString(*t.store, "k", v0).ok());
  t.f(1).fail_remove = kUnavailable;
  absl::Status rm = t.store->Remove("k");
  EXPECT_TRUE(absl::IsUnavailable(rm)) << rm;
  EXPECT_TRUE(absl::StrContains(rm.message(), "tier 1 of 2")) << rm;
  EXPECT_EQ(t.f(0).removes, 0);
  EXPECT_EQ(t.Held(0), v0);
  EXPECT_EQ(GetString(*t.store, "k").value_or("<error>"), v0);
}

TEST(TieredStoreFaults, AFastTierThatCannotRemoveIsFenced) {
  Stack t;
  ASSERT_TRUE(PutString(*t.store, "k", Bytes(300, 70)).ok());
  t.f(0).fail_remove = kUnavailable;
  EXPECT_TRUE(t.store->Remove("k").ok());  // gone from the tier of record
  EXPECT_TRUE(t.Held(0).has_value());
  EXPECT_TRUE(absl::IsNotFound(GetString(*t.store, "k").status()));
  EXPECT_FALSE(t.store->Exists("k").value_or(true));
  EXPECT_EQ(t.store->Stats(0).fenced, 1u);
  const std::string v1 = Bytes(300, 71);
  ASSERT_TRUE(PutString(*t.store, "k", v1).ok());  // a put there lifts the fence
  EXPECT_EQ(t.store->Stats(0).fenced, 0u);
  const int back_gets = t.f(1).gets;
  EXPECT_EQ(GetString(*t.store, "k").value_or("<error>"), v1);
  EXPECT_EQ(t.f(1).gets, back_gets);
}

// ---- Calls on one key from two threads ----

// Waits up to `ms` for `done`; the interleavings below must hold whether the
// second call was held back (the fix) or ran through (what they guard against).
void WaitFor(const std::atomic<bool>& done, int ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!done && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

TEST(TieredStoreFaults, AGetDuringASaveThatFailsNeverSeesIt) {
  Stack t;
  const std::string v0 = Bytes(300, 80), v1 = Bytes(300, 81);
  ASSERT_TRUE(PutString(*t.store, "k", v0).ok());
  t.f(1).fail_put = kUnavailable;
  t.f(1).put_gate.Hold(1);
  absl::Status put;
  std::thread writer([&] { put = PutString(*t.store, "k", v1); });
  ASSERT_TRUE(t.f(1).put_gate.WaitArrived(1, std::chrono::seconds(10)));
  std::atomic<bool> read{false};
  absl::StatusOr<std::string> got;
  std::thread reader([&] {
    got = GetString(*t.store, "k", v0.size());
    read = true;
  });
  WaitFor(read, 300);
  t.f(1).put_gate.Open();
  writer.join();
  reader.join();
  EXPECT_TRUE(absl::IsUnavailable(put)) << put;
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, v0);
}

TEST(TieredStoreFaults, APromotionNeverOverwritesANewerPut) {
  Stack t;
  const std::string v0 = Bytes(300, 90), v1 = Bytes(300, 91);
  ASSERT_TRUE(PutString(t.store->tier(1), "k", v0).ok());  // in the back only
  t.f(1).get_gate.Hold(1);
  absl::StatusOr<std::string> first;
  std::thread reader([&] { first = GetString(*t.store, "k", v0.size()); });
  ASSERT_TRUE(t.f(1).get_gate.WaitArrived(1, std::chrono::seconds(10)));  // it has read v0
  std::atomic<bool> written{false};
  absl::Status put;
  std::thread writer([&] {
    put = PutString(*t.store, "k", v1);
    written = true;
  });
  WaitFor(written, 300);
  t.f(1).get_gate.Open();
  reader.join();
  writer.join();
  ASSERT_TRUE(put.ok()) << put;
  EXPECT_EQ(first.value_or("<error>"), v0);
  EXPECT_EQ(GetString(*t.store, "k").value_or("<error>"), v1);
  EXPECT_EQ(t.Held(0), v1);
  EXPECT_EQ(t.Held(1), v1);
}

TEST(TieredStoreFaults, TwoPutsOfOneKeyLeaveOneBlobInEveryTier) {
  Stack t;
  const std::string v1 = Bytes(300, 101), v2 = Bytes(300, 102);
  t.f(0).put_gate.Hold(1);
  std::thread first([&] { EXPECT_TRUE(PutString(*t.store, "k", v1).ok()); });
  ASSERT_TRUE(t.f(0).put_gate.WaitArrived(1, std::chrono::seconds(10)));
  std::atomic<bool> done{false};
  std::thread second([&] {
    EXPECT_TRUE(PutString(*t.store, "k", v2).ok());
    done = true;
  });
  WaitFor(done, 300);
  t.f(0).put_gate.Open();
  first.join();
  second.join();
  EXPECT_EQ(t.Held(0), t.Held(1));
  EXPECT_EQ(GetString(*t.store, "k").value_or("<error>"), t.Held(1).value_or("<none>"));
}

// ---- A model check ----

// Random puts, gets, exists and removes over three keys, with every tier's
// calls failing at random, against a model that holds the last successful
// put per key: a put or remove fails exactly when the slowest tier's does and
// then changes nothing; a get returns the model's blob, NOT_FOUND when it has
// none, or an error; exists likewise.
void ModelCheck(int n_tiers, uint64_t seed) {
  Stack t(n_tiers);
  std::mt19937_64 rng(seed);
  const std::string keys[3] = {"k", "seq-1", std::string("\0bin", 4)};
  std::optional<std::string> model[3];
  auto fault = [&](double p) { return std::bernoulli_distribution(p)(rng) ? kUnavailable : 0; };
  for (int op = 0; op < 3000; ++op) {
    for (int i = 0; i < n_tiers; ++i) {
      t.f(i).fail_put = fault(0.3);
      t.f(i).fail_remove = fault(0.3);
      t.f(i).fail_get = fault(0.15);
      t.f(i).fail_exists = fault(0.15);
    }
    const int k = static_cast<int>(rng() % 3);
    const std::string& key = keys[k];
    const bool slow_put_fails = t.f(n_tiers - 1).fail_put != 0;
    const bool slow_remove_fails = t.f(n_tiers - 1).fail_remove != 0;
    switch (rng() % 5) {
      case 0:
      case 1: {
        const std::string v = Bytes(16 + rng() % 64, rng());
        absl::Status s = PutString(*t.store, key, v);
        ASSERT_EQ(s.ok(), !slow_put_fails) << op << ": " << s;
        if (s.ok()) model[k] = v;
        break;
      }
      case 2: {
        absl::StatusOr<std::string> got = GetString(*t.store, key);
        if (got.ok()) {
          ASSERT_TRUE(model[k].has_value()) << op << ": a blob of a removed or failed put";
          ASSERT_EQ(*got, *model[k]) << op << ": not the last successful put";
        } else if (absl::IsNotFound(got.status())) {
          ASSERT_FALSE(model[k].has_value()) << op << ": the last successful put is lost";
        } else {
          ASSERT_TRUE(absl::IsUnavailable(got.status())) << op << ": " << got.status();
        }
        break;
      }
      case 3: {
        absl::StatusOr<bool> e = t.store->Exists(key);
        if (e.ok()) ASSERT_EQ(*e, model[k].has_value()) << op;
        break;
      }
      case 4: {
        absl::Status s = t.store->Remove(key);
        if (slow_remove_fails) {
          ASSERT_TRUE(absl::IsUnavailable(s)) << op << ": " << s;
        } else {
          ASSERT_EQ(s.ok(), model[k].has_value()) << op << ": " << s;
          if (!s.ok()) ASSERT_TRUE(absl::IsNotFound(s)) << op << ": " << s;
          model[k].reset();
        }
        break;
      }
    }
    if (rng() % 10 == 0) (void)t.store->tier(rng() % (n_tiers - 1)).Remove(key);  // an eviction
  }
}

TEST(TieredStoreFaults, ModelCheckOfTwoTiers) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    ModelCheck(2, seed);
    if (HasFatalFailure()) return;
  }
}

TEST(TieredStoreFaults, ModelCheckOfThreeTiers) {
  for (uint64_t seed = 11; seed <= 14; ++seed) {
    ModelCheck(3, seed);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace swa
