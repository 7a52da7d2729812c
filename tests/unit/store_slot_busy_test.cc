// Save and restore copy payloads without the slot table's lock: the slot is
// marked busy instead (other calls on it fail, other slots are unaffected),
// and a restore whose slot was freed and handed out again while it read the
// store writes nothing (the generation check).
#include <atomic>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "plan/step_plan.h"
#include "store/blob_store.h"
#include "store/memory_store.h"
#include "unit/store_test_util.h"

namespace swa {
namespace {

using swa::testing::FillRandom;
using swa::testing::MakeCache;
using swa::testing::PoolBytes;
using swa::testing::Restore;
using swa::testing::Save;

// A memory store whose put or get, once armed, waits in the call until the
// test lets it go, so that the test can act while a save/restore is inside it.
class GateStore final : public KvStore {
 public:
  struct Gate {
    std::atomic<bool> armed{false};
    absl::Notification entered;
    absl::Notification open;
  };

  GateStore(std::shared_ptr<Gate> put_gate, std::shared_ptr<Gate> get_gate)
      : put_gate_(std::move(put_gate)), get_gate_(std::move(get_gate)) {}

  absl::Status Put(std::string_view key, absl::Span<const ConstByteSpan> pieces) override {
    Wait(*put_gate_);
    return inner_.Put(key, pieces);
  }
  absl::StatusOr<uint64_t> Get(std::string_view key, absl::Span<const ByteSpan> pieces) override {
    Wait(*get_gate_);
    return inner_.Get(key, pieces);
  }
  absl::StatusOr<bool> Exists(std::string_view key) override { return inner_.Exists(key); }
  absl::Status Remove(std::string_view key) override { return inner_.Remove(key); }

 private:
  static void Wait(Gate& gate) {
    if (!gate.armed.exchange(false)) return;
    gate.entered.Notify();
    gate.open.WaitForNotification();
  }

  MemoryStore inner_{64 << 20};
  std::shared_ptr<Gate> put_gate_, get_gate_;
};

class SlotBusyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = MakeCache();
    ASSERT_NE(cache_, nullptr);
    cache_->SetStore(std::make_shared<BlobStore>(std::make_unique<GateStore>(put_gate_, get_gate_),
                                                 cache_->layout().fingerprint()));
    for (int i = 0; i < 4; ++i) slots_.push_back(*cache_->slots().Alloc());
    FillRandom(cache_->pool(), cache_->layout().pool_bytes(), rng_);
    for (uint32_t s : slots_)
      ASSERT_TRUE(cache_->slots().Set(s, {true, int32_t(100 + s), int32_t(90 + s), int32_t(100 + s)}).ok());
  }

  // A one-token decode step on `slot`, built (and cancelled when it succeeds).
  absl::Status BuildPlan(uint32_t slot) {
    plan::StepPlan plan(&cache_->slots(), cache_->layout());
    const SlotState st = *cache_->slots().Get(slot);
    const SeqDesc seq{slot, 1, st.written_end + 1, 0};
    absl::Status built = plan.Build({&seq, 1});
    if (built.ok()) EXPECT_TRUE(plan.Cancel().ok());
    return built;
  }

  static void ExpectBusy(const absl::Status& st, uint32_t slot, const char* call) {
    EXPECT_TRUE(absl::IsFailedPrecondition(st)) << call << ": " << st;
    EXPECT_NE(st.message().find("slot " + std::to_string(slot) + " is being saved/restored"),
              std::string::npos)
        << call << ": " << st;
  }

  std::mt19937_64 rng_{7};
  std::shared_ptr<GateStore::Gate> put_gate_ = std::make_shared<GateStore::Gate>();
  std::shared_ptr<GateStore::Gate> get_gate_ = std::make_shared<GateStore::Gate>();
  std::unique_ptr<Cache> cache_;
  std::vector<uint32_t> slots_;
};

TEST_F(SlotBusyTest, CallsOnASlotBeingSavedFailAndOtherSlotsWork) {
  const uint32_t busy = slots_[0], other = slots_[1];
  put_gate_->armed = true;
  std::future<absl::Status> save =
      std::async(std::launch::async, [&] { return Save(*cache_, busy, "seq"); });
  put_gate_->entered.WaitForNotification();  // the save is inside put, slot lock free

  ExpectBusy(cache_->slots().Free(busy), busy, "free");
  ExpectBusy(cache_->slots().Reset(busy), busy, "reset");
  ExpectBusy(cache_->CopySlot(busy, other), busy, "copy from");
  ExpectBusy(cache_->CopySlot(other, busy), busy, "copy into");
  ExpectBusy(BuildPlan(busy), busy, "plan build");
  ExpectBusy(Restore(*cache_, busy, "seq"), busy, "restore into");
  EXPECT_TRUE(cache_->slots().Get(busy)->allocated);

  // Every other slot is untouched by the busy mark.
  EXPECT_TRUE(BuildPlan(other).ok());
  EXPECT_TRUE(cache_->CopySlot(other, slots_[2]).ok());
  EXPECT_TRUE(cache_->slots().Reset(slots_[3]).ok());
  EXPECT_TRUE(cache_->slots().Free(slots_[3]).ok());

  put_gate_->open.Notify();
  ASSERT_TRUE(save.get().ok());
  // Busy no more.
  EXPECT_TRUE(BuildPlan(busy).ok());
  EXPECT_TRUE(Restore(*cache_, other, "seq").ok());
  EXPECT_TRUE(cache_->slots().Free(busy).ok());
}

TEST_F(SlotBusyTest, AFailedSaveClearsTheBusyMark) {
  auto faults = std::make_shared<swa::testing::Faults>();
  cache_->SetStore(std::make_shared<BlobStore>(
      std::make_unique<swa::testing::FaultStore>(std::make_unique<MemoryStore>(1 << 20), faults),
      cache_->layout().fingerprint()));
  faults->fail_put = static_cast<int>(absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::IsUnavailable(Save(*cache_, slots_[0], "seq")));
  EXPECT_EQ(cache_->slots().Get(slots_[0])->busy, 0);
  EXPECT_TRUE(cache_->slots().Free(slots_[0]).ok());
}

TEST(SlotTableBusy, SavesShareAWriteIsAloneAndGenerationsCountFrees) {
  SlotTable t(4);
  const uint32_t s = *t.Alloc();
  const uint32_t g0 = *t.Generation(s);
  ASSERT_TRUE(t.BeginRead(s).ok());
  ASSERT_TRUE(t.BeginRead(s).ok());  // two saves of one slot at once
  EXPECT_TRUE(absl::IsFailedPrecondition(t.BeginWrite(s, g0)));
  t.EndRead(s);
  EXPECT_TRUE(absl::IsFailedPrecondition(t.Free(s)));  // one save still reads
  t.EndRead(s);
  ASSERT_TRUE(t.BeginWrite(s, g0).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(t.BeginRead(s).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(t.BeginWrite(s, g0)));
  const SlotState restored{true, 50, 40, 52};
  t.EndWrite(s, &restored);
  EXPECT_EQ(t.Get(s)->written_end, 50);
  EXPECT_EQ(t.Get(s)->ring_high, 52);
  EXPECT_EQ(t.Get(s)->busy, 0);

  ASSERT_TRUE(t.Free(s).ok());
  EXPECT_EQ(t.Get(s)->generation, g0 + 1);
  EXPECT_EQ(*t.Alloc(), s);  // LIFO: the same slot again, generation kept
  EXPECT_EQ(*t.Generation(s), g0 + 1);
  ASSERT_TRUE(t.Reset(s).ok());
  EXPECT_EQ(*t.Generation(s), g0 + 1);  // only a free changes it
  EXPECT_TRUE(absl::IsFailedPrecondition(t.BeginWrite(s, g0)));
  EXPECT_TRUE(absl::IsOutOfRange(t.BeginWrite(9, 0)));
  EXPECT_TRUE(absl::IsOutOfRange(t.BeginRead(9).status()));
}

// The ABA case: a restore waits in the store's get; meanwhile its slot is
// freed, allocated again to a new sequence, written and planned. The restore
// must then fail and leave the new owner's bytes and metadata alone.
TEST_F(SlotBusyTest, RestoreIntoASlotFreedAndReallocatedDuringGetWritesNothing) {
  const uint32_t slot = slots_[1];
  ASSERT_TRUE(Save(*cache_, slots_[0], "seq").ok());
  get_gate_->armed = true;
  std::future<absl::Status> restore =
      std::async(std::launch::async, [&] { return Restore(*cache_, slot, "seq"); });
  get_gate_->entered.WaitForNotification();

  ASSERT_TRUE(cache_->slots().Free(slot).ok());
  ASSERT_EQ(*cache_->slots().Alloc(), slot);  // the free list is LIFO
  FillRandom(cache_->slot_base(slot), cache_->layout().slot_bytes(), rng_);
  ASSERT_TRUE(cache_->slots().Set(slot, {true, 7, 0, 7}).ok());
  plan::StepPlan plan(&cache_->slots(), cache_->layout());  // the new owner plans its next step
  const SeqDesc seq{slot, 2, 9, 0};
  ASSERT_TRUE(plan.Build({&seq, 1}).ok());
  const std::vector<uint8_t> pool = PoolBytes(*cache_);
  const SlotState owner = *cache_->slots().Get(slot);
  ASSERT_EQ(owner.written_end, 9);

  get_gate_->open.Notify();
  const absl::Status st = restore.get();
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_NE(st.message().find("slot " + std::to_string(slot) + " was freed and allocated again"),
            std::string::npos)
      << st;
  EXPECT_TRUE(PoolBytes(*cache_) == pool) << "the restore wrote into the new owner's slot";
  const SlotState now = *cache_->slots().Get(slot);
  EXPECT_EQ(now.written_end, owner.written_end);
  EXPECT_EQ(now.valid_start, owner.valid_start);
  EXPECT_EQ(now.ring_high, owner.ring_high);
  EXPECT_EQ(now.generation, owner.generation);
  EXPECT_EQ(now.busy, 0);
  EXPECT_TRUE(plan.Cancel().ok());  // the new owner's build is still exactly as it left it
}

TEST_F(SlotBusyTest, RestoreIntoASlotFreedDuringGetWritesNothing) {
  const uint32_t slot = slots_[2];
  ASSERT_TRUE(Save(*cache_, slots_[0], "seq").ok());
  get_gate_->armed = true;
  std::future<absl::Status> restore =
      std::async(std::launch::async, [&] { return Restore(*cache_, slot, "seq"); });
  get_gate_->entered.WaitForNotification();
  ASSERT_TRUE(cache_->slots().Free(slot).ok());
  const std::vector<uint8_t> pool = PoolBytes(*cache_);
  get_gate_->open.Notify();
  const absl::Status st = restore.get();
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_NE(st.message().find("was freed while the restore read the store"), std::string::npos)
      << st;
  EXPECT_TRUE(PoolBytes(*cache_) == pool);
  EXPECT_FALSE(cache_->slots().Get(slot)->allocated);
}

}  // namespace
}  // namespace swa
