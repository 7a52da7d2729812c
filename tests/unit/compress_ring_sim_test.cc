// The compressor ring's arithmetic (common/compress_math.h, plan/compress_plan.h)
// against a simulated ring that records which position each row holds: random
// step sequences with rewinds over rejected drafts, on small geometries (HCA
// and CSA, rates 1 .. 5, N 0 .. 3). Checked, exhaustively over those runs:
// - every closing window's slots name the right source: a ring slot's row
//   holds exactly that position (as before the step's store), a new slot's
//   batch row is that position's token, missing slots are below max(0, v);
// - the windows that close are exactly those whose last position is new;
// - the rewind rule is safe (when it passes, every row the step reads still
//   holds its position) and exact while no rejected draft lies above
//   written_end; every rewind of up to N + 1 positions passes;
// - the store runs write the last min(q, L) new positions to row p mod L.
#include <algorithm>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "plan/compress_plan.h"

namespace swa {
namespace {

TEST(CompressRingSim, WindowsStoresAndTheRewindRuleMatchASimulatedRing) {
  std::mt19937 rng(3103);
  int checked_windows = 0, refused = 0;
  for (CompressKind kind : {CompressKind::kHca, CompressKind::kCsa}) {
    for (int32_t rate = 1; rate <= 5; ++rate) {
      for (int32_t n = 0; n <= 3; ++n) {
        const CompressGeometry g{kind, rate,
                                 static_cast<int32_t>(CompressRingLen(kind, rate, n))};
        const int32_t L = g.ring_len;
        for (int run = 0; run < 40; ++run) {
          std::vector<int32_t> held(L, -1);  // position each row holds
          int32_t E = 0, high = 0, v = 0;
          if (run % 5 == 0) v = static_cast<int32_t>(rng() % 7);  // a replayed slot
          E = v;
          high = v;
          for (int step = 0; step < 30; ++step) {
            // A step at q_start in [max(v, high - depth), E], depth up to N + 3.
            const int32_t depth = static_cast<int32_t>(rng() % (n + 4));
            const int32_t q = std::max(v, E - std::min(depth, E - v));
            const int32_t len = 1 + static_cast<int32_t>(rng() % (2 * rate + n + 2));
            // Do the rows the step reads still hold their positions?
            const int32_t oldest = CompressOldestNeeded(g, q, v);
            bool held_ok = true;
            for (int32_t p = oldest; p < q; ++p) held_ok &= held[p % L] == p;
            const bool rule = CompressRewindOk(g, q, v, high);
            // Safe always; exact while no rejected draft lies above E (high == E):
            // like the SWA rule, it does not track rows rewritten below high.
            if (rule || high == E)
              ASSERT_EQ(rule, held_ok) << "kind " << int(kind) << " c " << rate << " N " << n
                                       << " q " << q << " E " << E << " high " << high;
            if (high - q <= n + 1) ASSERT_TRUE(rule) << "a rewind of N + 1 or less";
            if (!rule) {
              ++refused;
              continue;  // refused: nothing changes
            }
            PlannedSeq s{0, len, q + len, q, v, 7};  // token_offset 7
            std::vector<CompressWindow> wins;
            plan::PlanCompressWindows(g, absl::MakeConstSpan(&s, 1), &wins);
            // Exactly the windows whose last position is new.
            std::vector<int32_t> want;
            for (int32_t w = 0; (w + 1) * rate <= q + len; ++w)
              if ((w + 1) * rate - 1 >= q) want.push_back(w);
            ASSERT_EQ(wins.size(), want.size());
            for (size_t k = 0; k < wins.size(); ++k) {
              const CompressWindow& w = wins[k];
              ASSERT_EQ(w.entry, want[k]);
              ASSERT_EQ(w.position, w.entry * rate);
              const int32_t slots = CompressWindowSlots(g);
              ASSERT_EQ(w.n_missing + w.n_ring + w.n_new, slots);
              for (int32_t j = 0; j < slots; ++j) {
                const int32_t p = w.first_position + j;
                if (j < w.n_missing) {
                  ASSERT_LT(p, std::max(0, v));
                } else if (j < w.n_missing + w.n_ring) {
                  const int32_t row = (w.ring_row + j - w.n_missing) % L;
                  ASSERT_EQ(held[row], p) << "ring slot " << j;
                } else {
                  ASSERT_EQ(w.new_row + (j - w.n_missing - w.n_ring), 7 + (p - q));
                }
              }
              ++checked_windows;
            }
            std::vector<RowSegment> store;
            plan::PlanCompressStore(g, absl::MakeConstSpan(&s, 1), &store);
            int32_t stored = 0;
            for (const RowSegment& seg : store)
              for (int32_t c = 0; c < seg.count; ++c) {
                const int32_t p = q + (seg.src_row + c - 7);
                ASSERT_EQ(seg.dst_row + c, p % L);
                held[p % L] = p;
                ++stored;
              }
            ASSERT_EQ(stored, std::min(len, L));
            high = std::max(high, q + len);
            // The step's last tokens may be drafts the next step rejects.
            E = q + len;
          }
        }
      }
    }
  }
  EXPECT_GT(checked_windows, 10000);
  EXPECT_GT(refused, 100);
}

}  // namespace
}  // namespace swa
