// The rewind rule (docs/semantics.md "Rewinds") has one home,
// src/common/rewind_rule.h. Its two callers — the host planner's batch
// validation (src/plan/validate.cc) and the graph decode's per-sequence check
// (src/common/graph_math.h, run by the CUDA planner kernel and the CPU twin) —
// must give the same verdict for every slot state, and that verdict must match
// a ring simulated row by row.
#include "common/rewind_rule.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "cache/slot_table.h"
#include "common/graph_math.h"
#include "gtest/gtest.h"
#include "plan/validate.h"

namespace {

using namespace swa;
using namespace swa::plan;

struct Case {
  int32_t window, ring_len;
  int32_t written_end, valid_start, ring_high;  // the slot
  int32_t q_start, tokens;                      // the step
};

std::string Describe(const Case& c) {
  return "W=" + std::to_string(c.window) + " R=" + std::to_string(c.ring_len) +
         " written_end=" + std::to_string(c.written_end) +
         " valid_start=" + std::to_string(c.valid_start) +
         " ring_high=" + std::to_string(c.ring_high) + " q_start=" + std::to_string(c.q_start) +
         " tokens=" + std::to_string(c.tokens);
}

// The host planner's verdict, read back from ValidateBatch's status.
int32_t HostVerdict(const Case& c, std::string* message = nullptr) {
  SlotTable slots(1);
  const uint32_t slot = *slots.Alloc();
  SlotState st;
  st.written_end = c.written_end;
  st.valid_start = c.valid_start;
  st.ring_high = c.ring_high;
  EXPECT_TRUE(slots.Set(slot, st).ok());
  const SeqDesc seq{.slot = slot, .seqlen_q = c.tokens, .seqlen_k = c.q_start + c.tokens,
                    .valid_start = 0};
  uint64_t mark = 0;
  PlannedSeq out;
  PrevSlotState prev;
  BatchSummary summary;
  absl::Status s;
  {
    absl::MutexLock lock(&slots.mu());
    s = ValidateBatch(slots, c.window, c.ring_len, {&seq, 1}, &mark, 1, &out, &prev, &summary);
  }
  if (message != nullptr) *message = std::string(s.message());
  if (s.ok()) return kRewindOk;
  if (s.code() != absl::StatusCode::kFailedPrecondition) return -1;
  const std::string m(s.message());
  if (m.find("is below the slot's valid_start") != std::string::npos) return kRewindBelowValidStart;
  if (m.find("leaves a gap") != std::string::npos) return kRewindGap;
  if (m.find("rewind too deep") != std::string::npos) return kRewindTooDeep;
  return -2;
}

// The graph decode's verdict (CheckGraphSeq), mapped to the same codes.
int32_t GraphVerdict(const Case& c) {
  const GraphSlot gs{c.written_end, c.valid_start, c.ring_high, 1};
  switch (CheckGraphSeq(0, c.q_start + c.tokens, c.tokens, 1, c.window, c.ring_len, &gs)) {
    case kGraphOk: return kRewindOk;
    case kGraphLengthOutOfRange: return kRewindBelowValidStart;
    case kGraphGap: return kRewindGap;
    case kGraphRewindTooDeep: return kRewindTooDeep;
    default: return -3;
  }
}

// Independent reference: replay the writes into a ring of R rows (positions
// 0 ... high - 1 in order, as a slot that reached ring_high and was rewound
// to written_end), then ask whether every earlier key the first new token sees
// is still in its row. Where that token sees no earlier key (it is the oldest
// visible position itself), the rule still asks oldest >= high - R: the
// conservative case docs/semantics.md states.
int32_t ReferenceVerdict(const Case& c) {
  if (c.q_start < c.valid_start) return kRewindBelowValidStart;
  if (c.q_start > std::max(c.written_end, c.valid_start)) return kRewindGap;
  const int32_t high = std::max(c.written_end, c.ring_high);
  std::vector<int32_t> row(c.ring_len, -1);
  for (int32_t x = 0; x < high; ++x) row[x % c.ring_len] = x;
  int32_t oldest = c.q_start;  // the smallest visible position, by enumeration
  for (int32_t x = c.q_start; x >= 0 && x >= c.valid_start && c.q_start - x < c.window; --x)
    oldest = x;
  if (oldest == c.q_start) return oldest >= high - c.ring_len ? kRewindOk : kRewindTooDeep;
  for (int32_t x = oldest; x < c.q_start; ++x)
    if (row[x % c.ring_len] != x) return kRewindTooDeep;
  return kRewindOk;
}

void ExpectAll(const Case& c, int32_t want) {
  EXPECT_EQ(ReferenceVerdict(c), want) << Describe(c);
  EXPECT_EQ(HostVerdict(c), want) << Describe(c);
  EXPECT_EQ(GraphVerdict(c), want) << Describe(c);
  const RewindCheck r = CheckRewind(c.q_start, c.valid_start, c.written_end, c.ring_high,
                                    c.window, c.ring_len);
  EXPECT_EQ(r.verdict, want) << Describe(c);
}

// W = 4, R = 8, written_end = 20: the ring holds positions 12 ... 19, so a
// rewind may go back to q_start = 15 (oldest key 12), not to 14 (oldest 11).
TEST(RewindRule, ExactlyTheOldestKeptPositionAndOnePastIt) {
  ExpectAll({4, 8, 20, 0, 20, 15, 1}, kRewindOk);
  ExpectAll({4, 8, 20, 0, 20, 14, 1}, kRewindTooDeep);
  // R - W + 1 = 5 positions behind written_end is the deepest rewind.
  EXPECT_EQ(20 - 15, 8 - 4 + 1);
  // The same with draft tokens: 3 new tokens from q_start.
  ExpectAll({4, 8, 20, 0, 20, 15, 3}, kRewindOk);
  ExpectAll({4, 8, 20, 0, 20, 14, 3}, kRewindTooDeep);
}

TEST(RewindRule, RejectedDraftsAboveWrittenEndStillOccupyRows) {
  // Drafts reached 23 and were rejected back to 20: the ring holds 15 ... 22.
  ExpectAll({4, 8, 20, 0, 23, 18, 1}, kRewindOk);
  ExpectAll({4, 8, 20, 0, 23, 17, 1}, kRewindTooDeep);
  // A stale ring_high below written_end counts as written_end.
  ExpectAll({4, 8, 20, 0, 3, 15, 2}, kRewindOk);
  std::string message;
  EXPECT_EQ(HostVerdict({4, 8, 20, 0, 23, 17, 1}, &message), kRewindTooDeep);
  EXPECT_NE(message.find("needs position 14"), std::string::npos) << message;
  EXPECT_NE(message.find("rejected positions up to 22"), std::string::npos) << message;
}

TEST(RewindRule, ValidStartAboveZero) {
  // q_start = 14 alone would need position 11 (too deep); valid_start = 12 or
  // 13 hides it, so the oldest key is the oldest kept position or newer.
  ExpectAll({4, 8, 20, 13, 20, 14, 1}, kRewindOk);
  ExpectAll({4, 8, 20, 12, 20, 14, 1}, kRewindOk);
  ExpectAll({4, 8, 20, 11, 20, 14, 1}, kRewindTooDeep);
  // Below valid_start, at it, and a gap above max(written_end, valid_start).
  ExpectAll({4, 8, 20, 16, 20, 15, 1}, kRewindBelowValidStart);
  ExpectAll({4, 8, 20, 16, 20, 16, 1}, kRewindOk);
  ExpectAll({4, 8, 20, 0, 20, 21, 1}, kRewindGap);
  ExpectAll({4, 8, 20, 25, 20, 25, 1}, kRewindOk);  // valid_start past written_end
  ExpectAll({4, 8, 20, 25, 20, 26, 1}, kRewindGap);
}

// Every small slot state and step: the rule, both callers and the simulated
// ring agree.
TEST(RewindRule, BothCallersMatchTheSimulatedRingExhaustively) {
  int checked = 0;
  int too_deep = 0;
  for (int32_t w = 1; w <= 4; ++w)
    for (int32_t r = w; r <= w + 3; ++r)
      for (int32_t e = 0; e <= 2 * r + 1; ++e)
        for (int32_t rh = 0; rh <= e + r - w + 1; ++rh)
          for (int32_t v = 0; v <= e + 1; ++v)
            for (int32_t q = 0; q <= e + 2; ++q)
              for (int32_t t = 1; t <= r - w + 1 && t <= 2; ++t) {
                const Case c{w, r, e, v, rh, q, t};
                const int32_t want = ReferenceVerdict(c);
                ASSERT_EQ(HostVerdict(c), want) << Describe(c);
                ASSERT_EQ(GraphVerdict(c), want) << Describe(c);
                ++checked;
                too_deep += want == kRewindTooDeep;
              }
  EXPECT_GT(checked, 10000);
  EXPECT_GT(too_deep, 1000);
}

}  // namespace
