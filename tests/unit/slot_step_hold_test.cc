// The slot table's step holds (SlotState::step_holds) white-box: while a
// swa_step runs on a slot, every call that reads or writes the slot's bytes
// from elsewhere or hands it to another owner fails with FAILED_PRECONDITION
// naming the slot, and changes nothing (issue 29, item 6). The race itself is
// driven through the C API in tests/api/slot_step_busy_test.cc.
#include "cache/slot_table.h"

#include <string>

#include "gtest/gtest.h"

namespace swa {
namespace {

void SetStepHolds(SlotTable& t, uint32_t slot, int32_t n) {
  absl::MutexLock lock(&t.mu());
  t.StateLocked(slot).step_holds = n;
}

void ExpectStepRefusal(const absl::Status& s, uint32_t slot, const std::string& action) {
  ASSERT_TRUE(absl::IsFailedPrecondition(s)) << s;
  const std::string m(s.message());
  EXPECT_NE(m.find("slot " + std::to_string(slot) + " is in use by"), std::string::npos) << m;
  EXPECT_NE(m.find("running swa_step"), std::string::npos) << m;
  EXPECT_NE(m.find("before " + action), std::string::npos) << m;
}

TEST(SlotStepHold, FreeResetSaveAndRestoreRefuseAHeldSlotAndChangeNothing) {
  SlotTable t(4);
  const uint32_t other = t.Alloc().value();
  const uint32_t s = t.Alloc().value();
  ASSERT_TRUE(t.Set(s, SlotState{.written_end = 9, .valid_start = 2, .ring_high = 11}).ok());
  SetStepHolds(t, s, 1);
  const SlotState before = t.Get(s).value();

  ExpectStepRefusal(t.Free(s), s, "freeing it");
  ExpectStepRefusal(t.Reset(s), s, "resetting it");
  ExpectStepRefusal(t.BeginRead(s).status(), s, "saving it");
  ExpectStepRefusal(t.Generation(s).status(), s, "restoring into it");
  ExpectStepRefusal(t.BeginWrite(s, before.generation), s, "restoring into it");

  const SlotState after = t.Get(s).value();
  EXPECT_TRUE(after.allocated);
  EXPECT_EQ(after.written_end, 9);
  EXPECT_EQ(after.valid_start, 2);
  EXPECT_EQ(after.ring_high, 11);
  EXPECT_EQ(after.generation, before.generation);
  EXPECT_EQ(after.busy, 0);
  EXPECT_EQ(t.num_allocated(), 2u);

  // Another slot is not affected.
  EXPECT_TRUE(t.Reset(other).ok());
  // Once the step returned, all of them work again.
  SetStepHolds(t, s, 0);
  ASSERT_TRUE(t.BeginRead(s).ok());
  t.EndRead(s);
  EXPECT_TRUE(t.Reset(s).ok());
  EXPECT_TRUE(t.Free(s).ok());
}

TEST(SlotStepHold, TheMessageCountsSeveralSteps) {
  SlotTable t(2);
  const uint32_t s = t.Alloc().value();
  SetStepHolds(t, s, 3);
  const absl::Status r = t.Free(s);
  ASSERT_TRUE(absl::IsFailedPrecondition(r)) << r;
  EXPECT_NE(r.message().find("in use by 3 running swa_step calls"), absl::string_view::npos) << r;
}

}  // namespace
}  // namespace swa
