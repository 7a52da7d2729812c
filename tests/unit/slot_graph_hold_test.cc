// The slot table's decode-graph holds (SlotState::graph_holds) white-box: the
// paths the CPU twin cannot reach through the C API (an import whose copy to
// the graph failed) and the counting rules.
#include "cache/slot_table.h"

#include "gtest/gtest.h"

namespace swa {
namespace {

TEST(SlotGraphHold, UnmarkAfterAFailedCopyDropsTheHoldItTook) {
  SlotTable t(4);
  const uint32_t s = t.Alloc().value();
  const uint8_t take = 1;
  SlotState st;
  ASSERT_TRUE(t.MarkDeviceAdvanced(&s, 1, &take, &st).ok());
  EXPECT_EQ(t.Get(s)->graph_holds, 1);
  EXPECT_TRUE(absl::IsFailedPrecondition(t.Free(s)));
  t.UnmarkDeviceAdvanced(&s, 1, &take);  // the graph never got the slot
  EXPECT_EQ(t.Get(s)->graph_holds, 0);
  EXPECT_FALSE(t.Get(s)->device_advanced);
  EXPECT_TRUE(t.Free(s).ok());
}

TEST(SlotGraphHold, OnlyNewHoldsCountAndDropsStopAtZero) {
  SlotTable t(4);
  const uint32_t s = t.Alloc().value();
  const uint8_t take = 1, keep = 0;
  SlotState st;
  ASSERT_TRUE(t.MarkDeviceAdvanced(&s, 1, &take, &st).ok());
  ASSERT_TRUE(t.SetLengths(&s, &st.written_end, nullptr, 1, 5).ok());
  // A re-import by the graph that already holds the slot.
  ASSERT_TRUE(t.MarkDeviceAdvanced(&s, 1, &keep, &st).ok());
  EXPECT_EQ(t.Get(s)->graph_holds, 1);
  t.UnmarkDeviceAdvanced(&s, 1, &keep);  // that re-import's copy failed: the first hold stays
  EXPECT_EQ(t.Get(s)->graph_holds, 1);
  t.DropGraphHolds(&s, 1);
  t.DropGraphHolds(&s, 1);
  EXPECT_EQ(t.Get(s)->graph_holds, 0);
  EXPECT_TRUE(t.Reset(s).ok());
}

TEST(SlotGraphHold, RefusalNamesTheSlotAndTheWayOut) {
  SlotTable t(4);
  const uint32_t s = t.Alloc().value();
  const uint8_t take = 1;
  SlotState st;
  ASSERT_TRUE(t.MarkDeviceAdvanced(&s, 1, &take, &st).ok());
  const absl::Status r = t.Reset(s);
  ASSERT_TRUE(absl::IsFailedPrecondition(r)) << r;
  EXPECT_NE(r.message().find("slot 0 is imported into 1 decode graph,"), absl::string_view::npos)
      << r;
  EXPECT_NE(r.message().find("swa_decode_graph_release()"), absl::string_view::npos) << r;
  EXPECT_NE(r.message().find("before resetting it"), absl::string_view::npos) << r;
}

}  // namespace
}  // namespace swa
