// Every rejection of the planner, with the slot table (and the plan) unchanged
// afterwards; cancel and rebuild semantics; valid_start and bounded replay.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "plan/step_plan.h"
#include "plan_test_util.h"

namespace {

using swa::plan::Path;
using swa::SeqDesc;
using swa::plan::StepPlan;

// W 8, N 2, R 11: ring-only steps bring at most 4 tokens per sequence.
class PlanReject : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = plan_test::MakeCache(8, 2, 11, 6);
    ASSERT_NE(cache_, nullptr);
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(cache_->slots().Alloc().ok());  // slot 5 stays free
    plan_test::SetSlot(*cache_, 0, 40, 0);
    plan_test::SetSlot(*cache_, 1, 5, 0);
    plan_test::SetSlot(*cache_, 2, 100, 60);
    plan_test::SetSlot(*cache_, 3, 0, 0);
    plan_test::SetSlot(*cache_, 4, 30, 0, 33);  // rejected drafts reached position 32
    plan_ = std::make_unique<StepPlan>(&cache_->slots(), cache_->layout());
    // A previous good build, which rejections must leave readable.
    ASSERT_TRUE(plan_->Build(std::vector<SeqDesc>{{3, 2, 2, 0}}).ok());
    before_ = plan_test::Snapshot(*cache_);
  }

  // Expects `batch` to be rejected with `code`, a message containing every
  // string in `words`, and no change anywhere.
  void ExpectRejected(const std::vector<SeqDesc>& batch, absl::StatusCode code,
                      const std::vector<std::string>& words) {
    const absl::Status st = plan_->Build(batch);
    EXPECT_EQ(st.code(), code) << st;
    for (const std::string& w : words)
      EXPECT_TRUE(absl::StrContains(st.message(), w)) << "'" << w << "' missing from: " << st;
    EXPECT_TRUE(plan_test::SameStates(before_, plan_test::Snapshot(*cache_))) << st;
    EXPECT_EQ(plan_->path(), Path::kRing);
    EXPECT_EQ(plan_->n_tokens(), 2);
    EXPECT_EQ(plan_->n_seqs(), 1u);
    EXPECT_EQ(plan_->store_rows()[1], 3 * 11 + 1);
  }

  std::unique_ptr<swa::Cache> cache_;
  std::unique_ptr<StepPlan> plan_;
  std::vector<swa::SlotState> before_;
};

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
constexpr auto kPrecondition = absl::StatusCode::kFailedPrecondition;

TEST_F(PlanReject, NegativeValues) {
  ExpectRejected({{0, 1, 41, 0}, {1, -1, 5, 0}}, kInvalid, {"seqs[1]", "seqlen_q = -1"});
  ExpectRejected({{0, 0, -3, 0}}, kInvalid, {"seqs[0]", "seqlen_k = -3"});
  ExpectRejected({{1, 1, 6, -2}}, kInvalid, {"seqs[0]", "valid_start = -2"});
}

TEST_F(PlanReject, SeqlenQAboveSeqlenK) {
  ExpectRejected({{0, 1, 41, 0}, {1, 7, 6, 0}}, kInvalid, {"seqs[1]", "seqlen_q = 7", "seqlen_k = 6"});
}

TEST_F(PlanReject, ValidStartPastQStart) {
  // The sequence's own valid_start past its q_start: malformed.
  ExpectRejected({{0, 1, 41, 41}}, kInvalid, {"seqs[0]", "valid_start = 41", "q_start", "40"});
  // The slot's valid_start (60) past q_start: the state forbids it.
  ExpectRejected({{0, 1, 41, 0}, {2, 1, 56, 0}}, kPrecondition,
                 {"seqs[1]", "slot 2", "q_start = 55", "valid_start = 60"});
}

TEST_F(PlanReject, Gap) {
  ExpectRejected({{0, 1, 41, 0}, {1, 1, 7, 0}}, kPrecondition,
                 {"seqs[1]", "slot 1", "q_start = 6", "written_end = 5", "gap"});
}

TEST_F(PlanReject, RewindDeeperThanTheRingKeeps) {
  // E = 40, R = 11, W = 8: q_start 35 needs 28 >= 29? no.
  ExpectRejected({{0, 1, 36, 0}}, kPrecondition,
                 {"seqs[0]", "slot 0", "q_start = 35", "position 28", "29"});
  // 36 needs 29: legal (checked below on a copy of the state).
  // Slot 4: written_end 30 but drafts reached 32: q_start 26 needs 19 < 33 - 11.
  ExpectRejected({{4, 1, 27, 0}}, kPrecondition, {"seqs[0]", "slot 4", "position 19", "32"});
  // Under the written_end formula alone 26 would pass (19 >= 30 - 11): the
  // rejected drafts at 30..32 overwrote positions 19..21.
}

TEST_F(PlanReject, RewindAtTheMarginIsLegal) {
  EXPECT_TRUE(plan_->Build(std::vector<SeqDesc>{{0, 4, 40, 0}}).ok());  // q_start 36 needs 29 = 40 - 11
  EXPECT_TRUE(plan_->Cancel().ok());
  EXPECT_TRUE(plan_->Build(std::vector<SeqDesc>{{4, 1, 30, 0}}).ok());  // needs 22 = 33 - 11
  EXPECT_TRUE(plan_->Cancel().ok());
  EXPECT_TRUE(plan_test::SameStates(before_, plan_test::Snapshot(*cache_)));
}

TEST_F(PlanReject, SlotNotAllocatedOrOutOfRange) {
  ExpectRejected({{0, 1, 41, 0}, {5, 1, 1, 0}}, kPrecondition, {"seqs[1]", "slot 5", "not allocated"});
  ExpectRejected({{0, 1, 41, 0}, {6, 1, 1, 0}}, absl::StatusCode::kOutOfRange, {"seqs[1]", "slot 6"});
}

TEST_F(PlanReject, DuplicateSlot) {
  ExpectRejected({{0, 1, 41, 0}, {1, 1, 6, 0}, {0, 1, 41, 0}}, kInvalid,
                 {"seqs[2]", "slot 0", "seqs[0]"});
}

TEST_F(PlanReject, TooManySequences) {
  std::vector<SeqDesc> batch(7, SeqDesc{3, 0, 0, 0});
  ExpectRejected(batch, kInvalid, {"n_seqs = 7", "max_slots = 6"});
}

TEST_F(PlanReject, TokenCountOverflowsInt32) {
  const int32_t big = 1 << 30;
  ExpectRejected({{3, big, big, 0}, {1, big, big + 5, 0}}, kInvalid, {"seqs[1]", "overflows int32"});
  // Staged: n_seqs * W + T rows past int32.
  const int32_t near_max = std::numeric_limits<int32_t>::max() - 4;
  ExpectRejected({{3, near_max, near_max, 0}}, kInvalid, {"staging", "overflows int32"});
}

TEST(PlanRejectIndex, DecodeIndexSizeOverflowsInt32) {
  // W 65536, R 131072: one sequence may bring 65537 tokens to a ring-only step,
  // and T * W passes int32 at T = 32768.
  auto cache = plan_test::MakeCache(1 << 16, 0, 1 << 17, 1);
  ASSERT_NE(cache, nullptr);
  ASSERT_TRUE(cache->slots().Alloc().ok());
  swa::plan::PlanOptions opts;
  opts.materialize_index = false;  // the accepted case would otherwise hold 7.9 GB
  StepPlan plan(&cache->slots(), cache->layout(), opts);
  const auto before = plan_test::Snapshot(*cache);
  const absl::Status st = plan.Build(std::vector<SeqDesc>{{0, 40000, 40000, 0}});
  EXPECT_EQ(st.code(), kInvalid) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "decode index")) << st;
  EXPECT_TRUE(plan_test::SameStates(before, plan_test::Snapshot(*cache)));
  EXPECT_TRUE(plan.Build(std::vector<SeqDesc>{{0, 30000, 30000, 0}}).ok());  // 1.97e9 entries fit
}

TEST_F(PlanReject, CancelRestoresExactlyAndOnlyOnce) {
  const auto start = plan_test::Snapshot(*cache_);
  ASSERT_TRUE(plan_->Build(std::vector<SeqDesc>{{0, 3, 42, 5}, {1, 1, 6, 0}, {4, 2, 31, 0}}).ok());
  EXPECT_EQ(cache_->slots().Get(0)->written_end, 42);
  EXPECT_EQ(cache_->slots().Get(0)->valid_start, 5);  // raised by the sequence
  EXPECT_EQ(cache_->slots().Get(4)->written_end, 31);
  EXPECT_EQ(cache_->slots().Get(4)->ring_high, 33);   // drafts up to 32 still in the ring
  ASSERT_TRUE(plan_->Cancel().ok());
  EXPECT_TRUE(plan_test::SameStates(start, plan_test::Snapshot(*cache_)));
  EXPECT_EQ(plan_->path(), Path::kNone);
  EXPECT_EQ(plan_->Cancel().code(), kPrecondition);  // nothing left to cancel
}

TEST_F(PlanReject, CancelAfterExecutionIsRefused) {
  ASSERT_TRUE(plan_->Build(std::vector<SeqDesc>{{1, 1, 6, 0}}).ok());
  plan_->MarkExecuted();
  const auto after = plan_test::Snapshot(*cache_);
  const absl::Status st = plan_->Cancel();
  EXPECT_EQ(st.code(), kPrecondition) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "executed")) << st;
  EXPECT_TRUE(plan_test::SameStates(after, plan_test::Snapshot(*cache_)));
}

TEST_F(PlanReject, CancelRefusedWhenASlotChangedSinceTheBuild) {
  ASSERT_TRUE(plan_->Build(std::vector<SeqDesc>{{0, 1, 41, 0}, {1, 1, 6, 0}}).ok());
  StepPlan other(&cache_->slots(), cache_->layout());
  ASSERT_TRUE(other.Build(std::vector<SeqDesc>{{1, 1, 7, 0}}).ok());  // advances slot 1 again
  const auto after = plan_test::Snapshot(*cache_);
  const absl::Status st = plan_->Cancel();
  EXPECT_EQ(st.code(), kPrecondition) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "seqs[1]")) << st;
  EXPECT_TRUE(plan_test::SameStates(after, plan_test::Snapshot(*cache_)));  // slot 0 not restored either
  ASSERT_TRUE(other.Cancel().ok());
  ASSERT_TRUE(plan_->Cancel().ok());  // now both slots are as the build left them
  EXPECT_EQ(cache_->slots().Get(0)->written_end, 40);
  EXPECT_EQ(cache_->slots().Get(1)->written_end, 5);
}

// Another plan of the slot that happens to leave the same numbers (it re-plans
// the same step: a rewind of one position) still counts as a change: cancelling
// the first plan would put written_end back to 5 under the second plan, whose
// step then stores position 5 where the slot's ring_high does not count it.
TEST_F(PlanReject, CancelRefusedAfterAnotherPlanLeftTheSameNumbers) {
  ASSERT_TRUE(plan_->Build(std::vector<SeqDesc>{{1, 1, 6, 0}}).ok());
  StepPlan other(&cache_->slots(), cache_->layout());
  ASSERT_TRUE(other.Build(std::vector<SeqDesc>{{1, 1, 6, 0}}).ok());
  const auto after = plan_test::Snapshot(*cache_);
  const absl::Status st = plan_->Cancel();
  EXPECT_EQ(st.code(), kPrecondition) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "slot 1")) << st;
  EXPECT_TRUE(plan_test::SameStates(after, plan_test::Snapshot(*cache_)));
  ASSERT_TRUE(other.Cancel().ok());  // last in, first out
  ASSERT_TRUE(plan_->Cancel().ok());
  EXPECT_EQ(cache_->slots().Get(1)->written_end, 5);
  EXPECT_TRUE(plan_test::SameStates(before_, plan_test::Snapshot(*cache_)));
}

TEST_F(PlanReject, RebuildKeepsThePreviousBuildsUpdates) {
  ASSERT_TRUE(plan_->Build(std::vector<SeqDesc>{{1, 1, 6, 0}}).ok());
  ASSERT_TRUE(plan_->Build(std::vector<SeqDesc>{{0, 1, 41, 0}}).ok());
  ASSERT_TRUE(plan_->Cancel().ok());  // undoes only the second build
  EXPECT_EQ(cache_->slots().Get(1)->written_end, 6);
  EXPECT_EQ(cache_->slots().Get(0)->written_end, 40);
}

TEST_F(PlanReject, SetValidStart) {
  auto& slots = cache_->slots();
  EXPECT_EQ(slots.SetValidStart(0, -1).code(), kInvalid);
  EXPECT_EQ(slots.SetValidStart(5, 3).code(), kPrecondition);  // not allocated
  EXPECT_EQ(slots.SetValidStart(9, 3).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(slots.SetValidStart(2, 59).code(), kPrecondition);  // lowering 60
  EXPECT_TRUE(plan_test::SameStates(before_, plan_test::Snapshot(*cache_)));
  ASSERT_TRUE(slots.SetValidStart(0, 37).ok());
  EXPECT_EQ(slots.Get(0)->valid_start, 37);
  EXPECT_EQ(slots.Get(0)->written_end, 40);
  // Raised past written_end: the next step must start exactly there.
  ASSERT_TRUE(slots.SetValidStart(1, 50).ok());
  EXPECT_EQ(plan_->Build(std::vector<SeqDesc>{{1, 1, 50, 0}}).code(), kPrecondition);
  EXPECT_EQ(plan_->Build(std::vector<SeqDesc>{{1, 1, 52, 0}}).code(), kPrecondition);
  EXPECT_TRUE(plan_->Build(std::vector<SeqDesc>{{1, 2, 52, 0}}).ok());
}

TEST_F(PlanReject, BeginReplay) {
  auto& slots = cache_->slots();
  EXPECT_EQ(slots.BeginReplay(3, 8, -1).status().code(), kInvalid);
  EXPECT_EQ(slots.BeginReplay(0, 8, 100).status().code(), kPrecondition);  // holds data
  EXPECT_EQ(slots.BeginReplay(5, 8, 100).status().code(), kPrecondition);  // free
  EXPECT_TRUE(plan_test::SameStates(before_, plan_test::Snapshot(*cache_)));

  ASSERT_TRUE(slots.Reset(0).ok());
  auto r = slots.BeginReplay(0, 8, 100);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->start, 92);
  EXPECT_EQ(r->len, 8);
  EXPECT_EQ(slots.Get(0)->valid_start, 92);
  EXPECT_EQ(slots.Get(0)->written_end, 92);
  // Preparing again (nothing written yet) is allowed; a short prefix too.
  r = slots.BeginReplay(0, 8, 5);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->start, 0);
  EXPECT_EQ(r->len, 5);
  r = slots.BeginReplay(0, 8, 100);
  ASSERT_TRUE(r.ok());
  // The replay prefill of 92 ... 99 is legal; anything starting elsewhere is not.
  EXPECT_EQ(plan_->Build(std::vector<SeqDesc>{{0, 8, 99, 0}}).code(), kPrecondition);
  EXPECT_EQ(plan_->Build(std::vector<SeqDesc>{{0, 8, 101, 0}}).code(), kPrecondition);
  ASSERT_TRUE(plan_->Build(std::vector<SeqDesc>{{0, 8, 100, 0}}).ok());
  EXPECT_EQ(plan_->path(), Path::kStaged);  // 8 > R - W + 1
  EXPECT_EQ(plan_->seqs()[0].valid_start, 92);
  // Then decode at 100 sees 93 ... 100.
  ASSERT_TRUE(plan_->Build(std::vector<SeqDesc>{{0, 1, 101, 0}}).ok());
  EXPECT_EQ(plan_->offset_len()[1], 8);
  EXPECT_EQ(plan_->offset_len()[0], 0 * 11 + 93 % 11);
}

}  // namespace
