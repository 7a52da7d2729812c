// The planner against the brute-force reference (plan_reference.h) on
// thousands of random batches: every exported array exact, the slots advanced
// exactly, and illegal batches rejected with nothing changed.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "plan/step_plan.h"
#include "plan_reference.h"
#include "plan_test_util.h"

namespace {

using swa::plan::Path;
using swa::SeqDesc;
using swa::plan::StepPlan;

struct Geometry {
  int32_t w, n, r;
};

class Generator {
 public:
  Generator(Geometry g, uint32_t seed) : g_(g), rng_(seed) {}

  int32_t Rand(int32_t lo, int32_t hi) {  // inclusive
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng_);
  }
  bool Chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  std::mt19937& rng() { return rng_; }

  // A random slot state and a sequence for it; legal unless `allow_illegal`
  // lets an illegal draw through.
  void Draw(uint32_t slot, swa::SlotState* st, SeqDesc* s, bool* legal) {
    const int32_t w = g_.w, r = g_.r, max_ring = r - w + 1;
    for (int attempt = 0;; ++attempt) {
      const int kind = Rand(0, 7);
      int32_t e = 0, v = 0, q0 = 0, sv = 0, q = 0;
      switch (kind) {
        case 0:  // new prompt
          q = Rand(1, 3 * r);
          break;
        case 1:  // short sequence, no wrap yet
          e = Rand(0, w);
          q0 = e;
          q = Rand(0, max_ring);
          break;
        case 2:  // slot with valid_start > 0 (bounded replay)
          v = Rand(0, 4 * r);
          e = v + Rand(0, 2 * r);
          q0 = std::max(v, e - Rand(0, max_ring));
          q = Rand(1, max_ring);
          break;
        case 3:  // the sequence raises valid_start; may start a gap at it
          e = Rand(0, 6 * r);
          sv = Rand(0, e + 2 * w);
          q0 = sv;
          q = Rand(0, 2 * r);
          break;
        case 4:  // single-token decode at any ring offset
          e = Rand(0, 10 * r);
          q0 = e;
          q = 1;
          break;
        case 5:  // speculative verify of N + 1 tokens, maybe after a rewind
          e = Rand(0, 10 * r);
          q0 = std::max(0, e - Rand(0, g_.n + 1));
          q = g_.n + 1;
          break;
        case 6:  // rewind anywhere near the margin (sometimes past it)
          e = Rand(0, 10 * r);
          q0 = std::max(0, e - Rand(0, max_ring + 1));
          q = Rand(0, max_ring);
          break;
        default:  // seqlen_q = 0, or a long chunk (staged)
          e = Rand(0, 6 * r);
          q0 = std::max(0, e - Rand(0, max_ring));
          q = Chance(0.5) ? 0 : Rand(max_ring + 1, 2 * r + 3);
          break;
      }
      st->allocated = true;
      st->written_end = e;
      st->valid_start = v;
      // After a rewind, rejected drafts above written_end still occupy rows.
      st->ring_high = Chance(0.2) ? e + Rand(0, g_.n + 2) : 0;
      *s = SeqDesc{slot, q, q0 + q, sv};
      const int32_t eff = std::max(v, sv);
      *legal = sv <= q0 && plan_ref::LegalAgainstSlot(e, eff, q0, w, r, st->ring_high);
      if (*legal || attempt > 50 || Chance(0.03)) return;
    }
  }

 private:
  Geometry g_;
  std::mt19937 rng_;
};

// Everything the plan exports against the reference, for a legal batch.
void CheckPlan(const StepPlan& plan, const std::vector<plan_ref::Seq>& ref, int32_t w, int32_t r) {
  const int32_t n = static_cast<int32_t>(ref.size());
  const int32_t t_total = plan_ref::TotalTokens(ref);
  ASSERT_EQ(plan.n_tokens(), t_total);
  ASSERT_EQ(plan.path(), plan_ref::RingOnly(ref, w, r) ? Path::kRing : Path::kStaged);

  // Per-sequence offsets and the token -> sequence map.
  ASSERT_EQ(plan.cu_seqlens().size(), static_cast<size_t>(n + 1));
  std::vector<int32_t> tseq;
  int32_t off = 0;
  for (int32_t i = 0; i < n; ++i) {
    ASSERT_EQ(plan.cu_seqlens()[i], off);
    ASSERT_EQ(plan.seqs()[i].q_start, ref[i].seqlen_k - ref[i].seqlen_q);
    ASSERT_EQ(plan.seqs()[i].valid_start, ref[i].valid_start);
    for (int32_t j = 0; j < ref[i].seqlen_q; ++j) tseq.push_back(i);
    off += ref[i].seqlen_q;
  }
  ASSERT_EQ(plan.cu_seqlens()[n], t_total);
  ASSERT_EQ(std::vector<int32_t>(plan.token_seq().begin(), plan.token_seq().end()), tseq);

  // Store plan: rows per token, and the segments expand to the same thing.
  const std::vector<int32_t> store = plan_ref::StoreRows(ref, r);
  ASSERT_EQ(std::vector<int32_t>(plan.store_rows().begin(), plan.store_rows().end()), store);
  std::vector<int32_t> from_segs(t_total, -1);
  for (const auto& sg : plan.store_segments()) {
    ASSERT_GE(sg.count, 1);
    ASSERT_LE(sg.dst_row % r + sg.count, r) << "store segment crosses the ring wrap";
    for (int32_t k = 0; k < sg.count; ++k) from_segs.at(sg.src_row + k) = sg.dst_row + k;
  }
  ASSERT_EQ(from_segs, store);
  ASSERT_LE(plan.store_segments().size(), static_cast<size_t>(2 * n));

  if (plan.path() == Path::kRing) {
    std::vector<int32_t> index, offset_len;
    const bool pad_last = plan.options().index_pad == swa::plan::IndexPad::kLastRow;
    plan_ref::DecodeIndex(ref, w, r, pad_last, &index, &offset_len);
    ASSERT_EQ(std::vector<int32_t>(plan.offset_len().begin(), plan.offset_len().end()), offset_len);
    if (plan.options().materialize_index)
      ASSERT_EQ(std::vector<int32_t>(plan.decode_index().begin(), plan.decode_index().end()), index);
    else
      ASSERT_TRUE(plan.decode_index().empty());
    std::vector<int32_t> got_index(index.size() + 1, 0x7b7b7b7b), got_ol(offset_len.size() + 1, 0x7b7b7b7b);
    plan.WriteDecodeIndex(got_ol.data(), got_index.data());
    ASSERT_EQ(got_index.back(), 0x7b7b7b7b);
    ASSERT_EQ(got_ol.back(), 0x7b7b7b7b);
    got_index.pop_back();
    got_ol.pop_back();
    ASSERT_EQ(got_index, index);
    ASSERT_EQ(got_ol, offset_len);
    ASSERT_TRUE(plan.pivots().empty());
    ASSERT_TRUE(plan.load_segments().empty());
    return;
  }

  // Staged: the load plan expands to the reference's section-1 sources.
  const std::vector<int32_t> hist = plan_ref::HistorySources(ref, w, r);
  std::vector<int32_t> loaded(static_cast<size_t>(n) * w, -2);
  std::vector<int> segs_per_seq(n, 0);
  int64_t rows = 0;
  for (const auto& sg : plan.load_segments()) {
    ASSERT_GE(sg.count, 1);
    const int32_t i = sg.dst_row / w;
    ASSERT_LT(i, n);
    ASSERT_LE(sg.dst_row + sg.count, (i + 1) * w) << "segment spills into the next sequence";
    ++segs_per_seq[i];
    rows += sg.count;
    if (sg.src_row >= 0) {
      ASSERT_EQ(sg.src_row / r, static_cast<int32_t>(ref[i].slot));
      ASSERT_LE(sg.src_row % r + sg.count, r) << "load segment crosses the ring wrap";
    }
    for (int32_t k = 0; k < sg.count; ++k) {
      ASSERT_EQ(loaded[sg.dst_row + k], -2) << "row loaded twice";
      loaded[sg.dst_row + k] = sg.src_row < 0 ? -1 : sg.src_row + k;
    }
  }
  ASSERT_EQ(rows, int64_t{n} * w);
  ASSERT_EQ(loaded, hist);
  for (int c : segs_per_seq) ASSERT_LE(c, 3);

  // Pivots expand to exactly the rows the enumeration names; no zero row inside.
  const auto staged = plan_ref::StagedRows(ref, w);
  ASSERT_EQ(plan.pivots().size(), 4 * static_cast<size_t>(t_total));
  for (int32_t t = 0; t < t_total; ++t) {
    const int32_t* p = &plan.pivots()[4 * t];
    std::vector<int32_t> got;
    for (int32_t k = 0; k < p[1]; ++k) {
      got.push_back(p[0] + k);
      ASSERT_NE(hist[p[0] + k], -1) << "a zero row is inside a pivot range";
    }
    for (int32_t k = 0; k < p[3]; ++k) got.push_back(p[2] + k);
    ASSERT_EQ(got, staged[t]) << "token " << t;
  }
  ASSERT_TRUE(plan.offset_len().empty());
}

class PlanReference : public ::testing::TestWithParam<Geometry> {};

TEST_P(PlanReference, RandomBatchesMatchBruteForce) {
  const Geometry g = GetParam();
  const uint32_t max_slots = 12;
  auto cache = plan_test::MakeCache(g.w, g.n, g.r, max_slots);
  ASSERT_NE(cache, nullptr);
  plan_test::AllocAll(*cache);
  Generator gen(g, 1234u + 97u * g.w + 13u * g.r + g.n);
  swa::plan::PlanOptions opts[2];
  opts[1].index_pad = swa::plan::IndexPad::kLastRow;
  opts[1].materialize_index = false;
  StepPlan plans[2] = {StepPlan(&cache->slots(), cache->layout(), opts[0]), StepPlan(&cache->slots(), cache->layout(), opts[1])};

  int legal_batches = 0, staged = 0, ring = 0, rejected = 0;
  for (int trial = 0; trial < 700; ++trial) {
    StepPlan& plan = plans[trial % 2];
    std::vector<uint32_t> slots(max_slots);
    std::iota(slots.begin(), slots.end(), 0u);
    std::shuffle(slots.begin(), slots.end(), gen.rng());
    const int n = gen.Rand(0, 6);
    std::vector<SeqDesc> batch(n);
    std::vector<int32_t> highs(n);
    std::vector<plan_ref::Seq> ref;
    bool all_legal = true;
    for (int i = 0; i < n; ++i) {
      swa::SlotState st;
      bool legal = false;
      gen.Draw(slots[i], &st, &batch[i], &legal);
      plan_test::SetSlot(*cache, slots[i], st.written_end, st.valid_start, st.ring_high);
      highs[i] = std::max(st.written_end, st.ring_high);
      all_legal = all_legal && legal;
      ref.push_back({batch[i].slot, batch[i].seqlen_q, batch[i].seqlen_k,
                     std::max(st.valid_start, batch[i].valid_start)});
    }
    if (n >= 2 && gen.Chance(0.02)) {  // a duplicate slot
      batch[1].slot = batch[0].slot;
      all_legal = false;
    }
    const auto before = plan_test::Snapshot(*cache);
    const Path path_before = plan.path();
    const int32_t tokens_before = plan.n_tokens();
    const absl::Status st = plan.Build(batch);
    if (!all_legal) {
      ++rejected;
      ASSERT_FALSE(st.ok()) << "trial " << trial << ": an illegal batch was accepted";
      ASSERT_TRUE(absl::IsInvalidArgument(st) || absl::IsFailedPrecondition(st)) << st;
      ASSERT_TRUE(plan_test::SameStates(before, plan_test::Snapshot(*cache))) << st;
      ASSERT_EQ(plan.path(), path_before);
      ASSERT_EQ(plan.n_tokens(), tokens_before);
      continue;
    }
    ASSERT_TRUE(st.ok()) << "trial " << trial << ": " << st;
    ++legal_batches;
    (plan.path() == Path::kRing ? ring : staged)++;
    for (int i = 0; i < n; ++i) {
      const plan_ref::Seq& s = ref[i];
      const swa::SlotState now = *cache->slots().Get(s.slot);
      ASSERT_EQ(now.written_end, s.seqlen_k);
      ASSERT_EQ(now.valid_start, s.valid_start);
      // The newest position stored so far (or written_end, if higher): this
      // step's last one, unless an earlier (rejected) write reached higher.
      const int32_t want_high = std::max(highs[i], s.seqlen_k);
      ASSERT_EQ(std::max(now.written_end, now.ring_high), want_high);
    }
    CheckPlan(plan, ref, g.w, g.r);
    if (HasFatalFailure()) {
      ADD_FAILURE() << "trial " << trial;
      return;
    }
  }
  EXPECT_GT(ring, 50);
  EXPECT_GT(staged, 50);
  EXPECT_GT(rejected, 5);
  EXPECT_GT(legal_batches, 400);
}

INSTANTIATE_TEST_SUITE_P(Geometries, PlanReference,
                         ::testing::Values(Geometry{1, 0, 1}, Geometry{1, 2, 4}, Geometry{2, 0, 3},
                                           Geometry{3, 1, 4}, Geometry{4, 0, 4}, Geometry{5, 3, 9},
                                           Geometry{8, 5, 14}, Geometry{8, 0, 20},
                                           Geometry{16, 2, 19}, Geometry{33, 4, 38},
                                           Geometry{64, 5, 70}),
                         [](const auto& info) {
                           return "W" + std::to_string(info.param.w) + "_N" +
                                  std::to_string(info.param.n) + "_R" +
                                  std::to_string(info.param.r);
                         });

}  // namespace
