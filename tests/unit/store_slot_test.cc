// Save and restore through Cache: exact round trips through the built-in
// stores, and every kind of store fault or corruption leaves the pool and the
// slot table exactly as they were.
#include <atomic>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "store/blob.h"
#include "store/directory_store.h"
#include "store/memory_store.h"
#include "capi/callback_store.h"
#include "capi/store_table.h"
#include "store/blob_store.h"
#include "unit/store_test_util.h"

namespace swa {
namespace {

using swa::testing::Faults;
using swa::testing::FaultStore;
using swa::testing::FillRandom;
using swa::testing::MakeCache;
using swa::testing::PoolBytes;

using swa::testing::Restore;
using swa::testing::Save;

// The C++ store attached directly, as swa_cache_set_store does for a built-in table.
std::shared_ptr<BlobStore> Adapt(std::unique_ptr<KvStore> store, const Cache& cache) {
  return std::make_shared<BlobStore>(std::move(store), cache.layout().fingerprint());
}

// The C++ store attached through the C callback table and the capi adaptor,
// the path of an engine's own store: statuses and messages cross C twice.
std::shared_ptr<BlobStore> AdaptThroughC(std::unique_ptr<KvStore> store, const Cache& cache) {
  absl::StatusOr<std::unique_ptr<capi::CallbackStore>> cb =
      capi::CallbackStore::Create(capi::MakeStoreTable(std::move(store)));
  EXPECT_TRUE(cb.ok()) << cb.status();
  return std::make_shared<BlobStore>(std::move(*cb), cache.layout().fingerprint());
}

std::vector<SlotState> AllStates(const Cache& c) {
  std::vector<SlotState> v;
  for (uint32_t s = 0; s < c.layout().max_slots(); ++s) v.push_back(*c.slots().Get(s));
  return v;
}

bool SameStates(const std::vector<SlotState>& a, const std::vector<SlotState>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].allocated != b[i].allocated || a[i].written_end != b[i].written_end ||
        a[i].valid_start != b[i].valid_start || a[i].ring_high != b[i].ring_high)
      return false;
  return true;
}

class SlotStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = MakeCache();
    ASSERT_NE(cache_, nullptr);
    faults_ = std::make_shared<Faults>();
    cache_->SetStore(AdaptThroughC(
        std::make_unique<FaultStore>(std::make_unique<MemoryStore>(64 << 20), faults_), *cache_));
    for (int i = 0; i < 4; ++i) slots_.push_back(*cache_->slots().Alloc());
    // Random non-zero bytes everywhere, and distinct positions per slot.
    FillRandom(cache_->pool(), cache_->layout().pool_bytes(), rng_);
    for (uint32_t s : slots_)
      ASSERT_TRUE(cache_->slots()
                      .Set(s, {true, int32_t(1000 + 37 * s), int32_t(900 + 5 * s), int32_t(1003 + 37 * s)})
                      .ok());
  }

  // Restores slot 1 from `key` and expects `code`; unless that is OK, the pool
  // and every slot state must be exactly as before.
  void ExpectRestoreFailsUntouched(absl::StatusCode code, const std::string& what,
                                   const std::string& key = "seq") {
    const std::vector<uint8_t> pool = PoolBytes(*cache_);
    const std::vector<SlotState> states = AllStates(*cache_);
    absl::Status st = Restore(*cache_, slots_[1], key);
    EXPECT_EQ(st.code(), code) << what << ": " << st;
    if (code == absl::StatusCode::kOk) return;  // a success may of course change the slot
    EXPECT_TRUE(PoolBytes(*cache_) == pool) << what << ": the pool changed";
    EXPECT_TRUE(SameStates(AllStates(*cache_), states)) << what << ": a slot state changed";
  }

  std::mt19937_64 rng_{42};
  std::unique_ptr<Cache> cache_;
  std::shared_ptr<Faults> faults_;
  std::vector<uint32_t> slots_;
};

// Restoring `src`'s blob into `dst` must copy exactly the stored region and the
// positions, and change no other byte of the pool.
void CheckRoundTrip(Cache& cache, uint32_t src, uint32_t dst, const std::string& key) {
  const Layout& lay = cache.layout();
  const std::vector<uint8_t> stored(cache.slot_base(src), cache.slot_base(src) + lay.stored_bytes());
  const SlotState src_state = *cache.slots().Get(src);
  ASSERT_TRUE(Save(cache, src, key).ok());
  std::vector<uint8_t> want = PoolBytes(cache);
  std::copy(stored.begin(), stored.end(), want.begin() + lay.SlotOffset(dst));
  std::vector<SlotState> want_states = AllStates(cache);
  want_states[dst].written_end = src_state.written_end;
  want_states[dst].valid_start = src_state.valid_start;
  want_states[dst].ring_high = src_state.ring_high;
  absl::Status st = Restore(cache, dst, key);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_TRUE(PoolBytes(cache) == want) << "restored bytes differ from the saved stored region";
  EXPECT_TRUE(SameStates(AllStates(cache), want_states));
  EXPECT_EQ(cache.slots().Get(dst)->written_end, src_state.written_end);
  EXPECT_EQ(cache.slots().Get(dst)->valid_start, src_state.valid_start);
  EXPECT_EQ(cache.slots().Get(dst)->ring_high, src_state.ring_high);
}

TEST_F(SlotStoreTest, RoundTripIntoAnotherSlotAndIntoItself) {
  ASSERT_GT(cache_->layout().stored_bytes(), 0u);
  ASSERT_LT(cache_->layout().stored_bytes(), cache_->layout().slot_bytes());  // dropped layers exist
  CheckRoundTrip(*cache_, slots_[0], slots_[1], "seq-a");
  // Scribble over slot 2 after saving, then restore it from its own blob.
  ASSERT_TRUE(Save(*cache_, slots_[2], "seq-b").ok());
  const std::vector<uint8_t> saved(cache_->slot_base(slots_[2]),
                                   cache_->slot_base(slots_[2]) + cache_->layout().stored_bytes());
  FillRandom(cache_->slot_base(slots_[2]), cache_->layout().slot_bytes(), rng_);
  ASSERT_TRUE(cache_->slots().Set(slots_[2], {true, 1, 0}).ok());
  ASSERT_TRUE(Restore(*cache_, slots_[2], "seq-b").ok());
  EXPECT_TRUE(std::equal(saved.begin(), saved.end(), cache_->slot_base(slots_[2])));
  EXPECT_EQ(cache_->slots().Get(slots_[2])->written_end, int32_t(1000 + 37 * slots_[2]));
  EXPECT_EQ(cache_->slots().Get(slots_[2])->valid_start, int32_t(900 + 5 * slots_[2]));
}

TEST(SlotStoreLarge, DeepSeekSizedRoundTripUsesTheStreamingCopy) {
  // 20 stored + 4 dropped MQA layers of 134 x 528 bytes: 1.4 MB stored, above
  // the streaming-copy threshold, unlike the small fixture cache.
  ModelSpec spec;
  spec.window = 128;
  spec.draft_tokens = 5;
  spec.max_slots = 3;
  for (int i = 0; i < 24; ++i) {
    LayerSpec l;
    l.role = i < 20 ? Role::kStored : Role::kDropped;
    spec.layers.push_back(l);
  }
  auto cache = MakeCache(spec);
  ASSERT_EQ(cache->layout().stored_bytes(), 20u * 134 * 528);
  std::mt19937_64 rng(77);
  FillRandom(cache->pool(), cache->layout().pool_bytes(), rng);
  cache->SetStore(Adapt(std::make_unique<MemoryStore>(64 << 20), *cache));
  const uint32_t a = *cache->slots().Alloc(), b = *cache->slots().Alloc();
  ASSERT_TRUE(cache->slots().Set(a, {true, 123456, 123328, 123460}).ok());
  CheckRoundTrip(*cache, a, b, "deepseek");
}

TEST_F(SlotStoreTest, RoundTripThroughDirectoryStoreAndReopen) {
  char tmpl[] = "/tmp/swa_slotdir_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  DirectoryStoreOptions o;
  o.path = dir;
  cache_->SetStore(Adapt(*DirectoryStore::Open(o), *cache_));
  CheckRoundTrip(*cache_, slots_[0], slots_[3], "dir-seq");
  // A second cache with the same layout, on a reopened store, finds the blob.
  auto other = MakeCache();
  other->SetStore(Adapt(*DirectoryStore::Open(o), *other));
  const uint32_t s = *other->slots().Alloc();
  ASSERT_TRUE(Restore(*other, s, "dir-seq").ok());
  EXPECT_TRUE(std::equal(cache_->slot_base(slots_[0]),
                         cache_->slot_base(slots_[0]) + cache_->layout().stored_bytes(),
                         other->slot_base(s)));
  EXPECT_EQ(other->slots().Get(s)->written_end, cache_->slots().Get(slots_[0])->written_end);
  std::filesystem::remove_all(dir);
}

TEST_F(SlotStoreTest, KeysArePrefixedWithTheLayoutFingerprint) {
  // A cache with another window never sees this cache's blobs under the same key.
  auto memory = std::make_unique<MemoryStore>(1 << 24);
  MemoryStore* raw = memory.get();
  cache_->SetStore(Adapt(std::move(memory), *cache_));
  ASSERT_TRUE(Save(*cache_, slots_[0], "shared-key").ok());
  char prefix[18];
  snprintf(prefix, sizeof prefix, "%016llx:", static_cast<unsigned long long>(cache_->layout().fingerprint()));
  EXPECT_TRUE(*raw->Exists(std::string(prefix) + "shared-key"));
  EXPECT_FALSE(*raw->Exists("shared-key"));
}

TEST_F(SlotStoreTest, NoStoreIsFailedPrecondition) {
  cache_->SetStore(nullptr);
  EXPECT_TRUE(absl::IsFailedPrecondition(Save(*cache_, slots_[0], "k")));
  EXPECT_TRUE(absl::IsFailedPrecondition(Restore(*cache_, slots_[0], "k")));
}

TEST_F(SlotStoreTest, BadSlotsAndKeys) {
  const uint32_t free_slot = 7;
  ASSERT_FALSE(cache_->slots().Get(free_slot)->allocated);
  EXPECT_TRUE(absl::IsFailedPrecondition(Save(*cache_, free_slot, "k")));
  EXPECT_TRUE(absl::IsOutOfRange(Save(*cache_, 99, "k")));
  EXPECT_TRUE(absl::IsInvalidArgument(Save(*cache_, slots_[0], "")));
  EXPECT_TRUE(absl::IsInvalidArgument(
      Save(*cache_, slots_[0], std::string(kMaxKeyBytes + 1, 'k'))));
  EXPECT_TRUE(Save(*cache_, slots_[0], std::string(kMaxKeyBytes, 'k')).ok());
  ASSERT_TRUE(Save(*cache_, slots_[0], "seq").ok());
  ExpectRestoreFailsUntouched(absl::StatusCode::kOk, "sanity");  // slot 1 <- slot 0 works
  const std::vector<uint8_t> pool = PoolBytes(*cache_);
  EXPECT_TRUE(absl::IsFailedPrecondition(Restore(*cache_, free_slot, "seq")));
  EXPECT_TRUE(absl::IsOutOfRange(Restore(*cache_, 1000, "seq")));
  EXPECT_TRUE(PoolBytes(*cache_) == pool);
}

TEST_F(SlotStoreTest, MissingKeyIsNotFoundAndUntouched) {
  ExpectRestoreFailsUntouched(absl::StatusCode::kNotFound, "missing key");
}

TEST_F(SlotStoreTest, StoreFailuresOfEveryKindPassThrough) {
  ASSERT_TRUE(Save(*cache_, slots_[0], "seq").ok());
  for (int code = 1; code <= 16; ++code) {
    faults_->fail_get = code;
    ExpectRestoreFailsUntouched(static_cast<absl::StatusCode>(code),
                                "get fails with " + std::to_string(code));
    faults_->fail_get = 0;
    faults_->fail_put = code;
    const std::vector<uint8_t> pool = PoolBytes(*cache_);
    absl::Status st = Save(*cache_, slots_[0], "seq");
    EXPECT_EQ(static_cast<int>(st.code()), code);
    EXPECT_NE(st.message().find("injected failure of put"), std::string::npos) << st;
    EXPECT_TRUE(PoolBytes(*cache_) == pool);
    faults_->fail_put = 0;
  }
  // A status outside swa_status_t becomes UNKNOWN (at the C table).
  faults_->fail_get = 77;
  ExpectRestoreFailsUntouched(absl::StatusCode::kUnknown, "bogus status");
  faults_->fail_get = 0;
  // The blob that was saved first is still intact.
  ExpectRestoreFailsUntouched(absl::StatusCode::kOk, "after failures");
}

TEST_F(SlotStoreTest, CorruptionAtEveryHeaderBitIsRejectedUntouched) {
  ASSERT_TRUE(Save(*cache_, slots_[0], "seq").ok());
  for (int64_t bit = 0; bit < int64_t(kBlobHeaderBytes) * 8; ++bit) {
    faults_->flip_bit = bit;
    const std::vector<uint8_t> pool = PoolBytes(*cache_);
    absl::Status st = Restore(*cache_, slots_[1], "seq");
    ASSERT_TRUE(absl::IsDataLoss(st) || absl::IsFailedPrecondition(st)) << "bit " << bit << ": " << st;
    ASSERT_TRUE(PoolBytes(*cache_) == pool) << "bit " << bit;
  }
}

TEST_F(SlotStoreTest, RandomPayloadBitFlipsAreDataLoss) {
  ASSERT_TRUE(Save(*cache_, slots_[0], "seq").ok());
  const int64_t payload_bits = int64_t(cache_->layout().stored_bytes()) * 8;
  for (int i = 0; i < 200; ++i) {
    faults_->flip_bit = int64_t(kBlobHeaderBytes) * 8 + int64_t(rng_() % payload_bits);
    ExpectRestoreFailsUntouched(absl::StatusCode::kDataLoss,
                                "payload bit " + std::to_string(faults_->flip_bit.load()));
  }
}

TEST_F(SlotStoreTest, TruncatedExtendedShortAndEmptyReads) {
  ASSERT_TRUE(Save(*cache_, slots_[0], "seq").ok());
  const int64_t size = int64_t(kBlobHeaderBytes + cache_->layout().stored_bytes());
  for (int64_t t : {int64_t{0}, int64_t{1}, int64_t{63}, int64_t{64}, int64_t{65}, size / 2, size - 1}) {
    faults_->truncate_to = t;
    ExpectRestoreFailsUntouched(absl::StatusCode::kDataLoss, "truncated to " + std::to_string(t));
  }
  faults_->truncate_to = -1;
  // Larger than this layout's blobs: refused unread, as another layout's
  // (docs/store.md, the get contract).
  for (int64_t e : {1, 7, 4096}) {
    faults_->extend_by = e;
    ExpectRestoreFailsUntouched(absl::StatusCode::kFailedPrecondition,
                                "extended by " + std::to_string(e));
  }
  faults_->extend_by = 0;
  faults_->short_read = 10;
  ExpectRestoreFailsUntouched(absl::StatusCode::kDataLoss, "short read");
  faults_->short_read = 0;
  // A store that says OK with the right size but writes nothing must not let
  // the staging buffer's previous (valid) blob through.
  ExpectRestoreFailsUntouched(absl::StatusCode::kOk, "fills staging with a valid blob");
  faults_->ok_without_data = true;
  ExpectRestoreFailsUntouched(absl::StatusCode::kDataLoss, "OK without data");
}

TEST_F(SlotStoreTest, OtherVersionOrLayoutIsFailedPrecondition) {
  ASSERT_TRUE(Save(*cache_, slots_[0], "seq").ok());
  faults_->set_version = 1;  // before the key hash (its bytes are read as reserved)
  ExpectRestoreFailsUntouched(absl::StatusCode::kFailedPrecondition, "version 1");
  faults_->set_version = 6;  // 4 is the compression section's, 5 the chunked tag's (docs/store.md)
  ExpectRestoreFailsUntouched(absl::StatusCode::kFailedPrecondition, "version 6");
  faults_->set_version = 0;
  ExpectRestoreFailsUntouched(absl::StatusCode::kFailedPrecondition, "version 0");
  faults_->set_version = -1;
  faults_->set_fingerprint_xor = 0x100;
  ExpectRestoreFailsUntouched(absl::StatusCode::kFailedPrecondition, "other layout");
  faults_->set_fingerprint_xor = 0;
  // A blob from a cache with a smaller layout stored under this cache's key.
  auto small = MakeCache(swa::testing::SmallSpec(/*window=*/8));
  auto memory = std::make_unique<MemoryStore>(1 << 24);
  MemoryStore* raw = memory.get();
  small->SetStore(Adapt(std::move(memory), *small));
  const uint32_t s = *small->slots().Alloc();
  ASSERT_TRUE(Save(*small, s, "seq").ok());
  const std::string small_key = (*small->store())->FullKey("seq");
  std::vector<uint8_t> blob(kBlobHeaderBytes + small->layout().stored_bytes());
  const ByteSpan whole[1] = {ByteSpan(blob.data(), blob.size())};
  ASSERT_TRUE(raw->Get(small_key, whole).ok());
  const ConstByteSpan put[1] = {ConstByteSpan(blob.data(), blob.size())};
  ASSERT_TRUE((*cache_->store())->Put("seq", put).ok());  // under this cache's prefix
  ExpectRestoreFailsUntouched(absl::StatusCode::kFailedPrecondition, "smaller layout's blob");
}

// Slot A saved under "a", slot B under "b"; then the stored values are
// swapped, as a copy or rename in the store would. Each restore finds a sound
// blob of the right layout that was saved under the other key: DATA_LOSS
// naming the key, and nothing changes. Put back, both restore again.
TEST_F(SlotStoreTest, AnotherKeysBlobUnderThisKeyIsDataLossUntouched) {
  BlobStore& store = **cache_->store();
  ASSERT_TRUE(Save(*cache_, slots_[0], "a").ok());
  ASSERT_TRUE(Save(*cache_, slots_[2], "b").ok());
  const size_t blob_bytes = kBlobHeaderBytes + cache_->layout().stored_bytes();
  std::vector<uint8_t> blob_a(blob_bytes), blob_b(blob_bytes);
  const ByteSpan get_a[1] = {ByteSpan(blob_a.data(), blob_a.size())};
  const ByteSpan get_b[1] = {ByteSpan(blob_b.data(), blob_b.size())};
  ASSERT_EQ(*store.Get("a", get_a), blob_bytes);
  ASSERT_EQ(*store.Get("b", get_b), blob_bytes);
  ASSERT_NE(blob_a, blob_b);
  const ConstByteSpan put_a[1] = {ConstByteSpan(blob_a.data(), blob_a.size())};
  const ConstByteSpan put_b[1] = {ConstByteSpan(blob_b.data(), blob_b.size())};
  ASSERT_TRUE(store.Put("a", put_b).ok());
  ASSERT_TRUE(store.Put("b", put_a).ok());
  ExpectRestoreFailsUntouched(absl::StatusCode::kDataLoss, "b's blob under a", "a");
  ExpectRestoreFailsUntouched(absl::StatusCode::kDataLoss, "a's blob under b", "b");
  const absl::Status st = Restore(*cache_, slots_[1], "a");
  EXPECT_NE(st.message().find("another key"), std::string_view::npos) << st;
  EXPECT_NE(st.message().find(store.FullKey("a")), std::string_view::npos) << st;
  // Each blob back under its own key restores.
  ASSERT_TRUE(store.Put("a", put_a).ok());
  ASSERT_TRUE(store.Put("b", put_b).ok());
  ASSERT_TRUE(Restore(*cache_, slots_[1], "a").ok());
  EXPECT_TRUE(std::equal(cache_->slot_base(slots_[0]),
                         cache_->slot_base(slots_[0]) + cache_->layout().stored_bytes(),
                         cache_->slot_base(slots_[1])));
  ASSERT_TRUE(Restore(*cache_, slots_[3], "b").ok());
  EXPECT_TRUE(std::equal(cache_->slot_base(slots_[2]),
                         cache_->slot_base(slots_[2]) + cache_->layout().stored_bytes(),
                         cache_->slot_base(slots_[3])));
}

TEST_F(SlotStoreTest, SlowStoreStillWorks) {
  faults_->delay_ms = 20;
  CheckRoundTrip(*cache_, slots_[3], slots_[0], "slow");
}

TEST_F(SlotStoreTest, ReplacingTheStoreReleasesTheOldOnceAndKeepsInFlightCalls) {
  struct Counting final : KvStore {
    explicit Counting(std::atomic<int>* r) : released(r) {}
    ~Counting() override { ++*released; }
    absl::Status Put(std::string_view, absl::Span<const ConstByteSpan>) override {
      return absl::OkStatus();
    }
    absl::StatusOr<uint64_t> Get(std::string_view, absl::Span<const ByteSpan>) override {
      return absl::NotFoundError("empty");
    }
    absl::StatusOr<bool> Exists(std::string_view) override { return false; }
    absl::Status Remove(std::string_view) override { return absl::NotFoundError("empty"); }
    std::atomic<int>* released;
  };
  std::atomic<int> released{0};
  cache_->SetStore(Adapt(std::make_unique<Counting>(&released), *cache_));
  std::shared_ptr<BlobStore> in_flight = *cache_->store();  // as a running save would hold it
  cache_->SetStore(nullptr);
  EXPECT_EQ(released, 0);
  EXPECT_TRUE(in_flight->Put("k", {}).ok());
  in_flight.reset();
  EXPECT_EQ(released, 1);
  cache_->SetStore(Adapt(std::make_unique<Counting>(&released), *cache_));
  cache_.reset();  // destroying the cache releases it too
  EXPECT_EQ(released, 2);
}

TEST_F(SlotStoreTest, FourThreadsSaveAndRestoreDifferentSlots) {
  const Layout& lay = cache_->layout();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      const uint32_t slot = slots_[t];
      for (int i = 0; i < 60; ++i) {
        const std::string key = "t" + std::to_string(t) + "-" + std::to_string(i % 5);
        FillRandom(cache_->slot_base(slot), lay.slot_bytes(), rng);
        const SlotState state{true, int32_t(rng() % 100000), int32_t(rng() % 1000),
                              int32_t(rng() % 100000)};
        if (!cache_->slots().Set(slot, state).ok()) ++failures;
        const std::vector<uint8_t> saved(cache_->slot_base(slot),
                                         cache_->slot_base(slot) + lay.stored_bytes());
        if (!Save(*cache_, slot, key).ok()) ++failures;
        FillRandom(cache_->slot_base(slot), lay.stored_bytes(), rng);
        if (!cache_->slots().Set(slot, {true, 3, 1}).ok()) ++failures;
        if (!Restore(*cache_, slot, key).ok()) ++failures;
        if (!std::equal(saved.begin(), saved.end(), cache_->slot_base(slot))) ++failures;
        const SlotState got = *cache_->slots().Get(slot);
        if (got.written_end != state.written_end || got.valid_start != state.valid_start ||
            got.ring_high != state.ring_high)
          ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(faults_->puts.load(), 4 * 60);
}

}  // namespace
}  // namespace swa
