// Multi-step scenarios with a model of the ring contents: prompts prefilled in
// chunks, speculative decode with drafts partly rejected, deep rewinds inside
// the margin, bounded replay, cancelled plans. Every token written gets a
// unique id; after each step, the keys each query gathers through the plan
// (ring-only index, or load plan + pivots) must be exactly the ids of its
// visible positions, oldest first.
#include <algorithm>
#include <cstdint>
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

constexpr int32_t kZero = -7;      // a zero-filled staging row
constexpr int32_t kNever = -9;     // a ring row never written

struct EngineSeq {
  uint32_t slot = 0;
  int32_t len = 0;          // accepted tokens = next q_start
  int32_t prompt = 0;       // prefill until len reaches it
  int32_t valid_start = 0;  // the engine's own record (replay)
  std::vector<int64_t> truth;  // id of the current content of each position
  int32_t undo_len = -1;       // len before a rewind the planner must refuse
  int32_t fixed_q = -1;        // this step's seqlen_q once chosen
};

class Scenario {
 public:
  Scenario(int32_t w, int32_t n, int32_t r, uint32_t seed)
      : w_(w), n_(n), r_(r), rng_(seed), cache_(plan_test::MakeCache(w, n, r, 4)),
        plan_(&cache_->slots(), cache_->layout()), ring_(static_cast<size_t>(4) * r, kNever) {
    for (uint32_t s = 0; s < 4; ++s) {
      EXPECT_TRUE(cache_->slots().Alloc().ok());
      seqs_.push_back(EngineSeq{.slot = s});
      NewRequest(seqs_.back(), false);
    }
  }
  int32_t Rand(int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng_); }
  bool Chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  void NewRequest(EngineSeq& s, bool reset) {
    if (reset) ASSERT_TRUE(cache_->slots().Reset(s.slot).ok());
    s.truth.clear();
    s.len = 0;
    s.valid_start = 0;
    if (Chance(0.3)) {  // bounded replay after a prefix hit of h tokens
      const int32_t h = Rand(0, 4 * r_);
      auto range = cache_->slots().BeginReplay(s.slot, w_, h);
      ASSERT_TRUE(range.ok()) << range.status();
      ASSERT_EQ(range->start, std::max(0, h - w_));
      ASSERT_EQ(range->len, h - range->start);
      s.valid_start = range->start;
      s.len = range->start;
    }
    s.prompt = s.len + Rand(1, 3 * r_);
  }

  std::vector<SeqDesc> Compose() {
    std::vector<SeqDesc> batch;
    for (EngineSeq& s : seqs_) {
      int32_t q;
      if (s.fixed_q >= 0) {
        q = s.fixed_q;
      } else if (Chance(0.05)) {
        q = 0;
      } else if (s.len < s.prompt) {
        const int32_t max_ring = r_ - w_ + 1;
        q = Chance(0.5) ? Rand(1, max_ring) : Rand(1, 3 * r_);
        q = std::min(q, s.prompt - s.len);
      } else {
        q = Chance(0.2) ? 1 : n_ + 1;
      }
      s.fixed_q = q;  // the same choice if the batch is composed again
      batch.push_back(SeqDesc{s.slot, q, s.len + q, s.valid_start});
    }
    return batch;
  }

  // One engine step for every sequence; returns the number of checked queries.
  int Step() {
    std::vector<SeqDesc> batch = Compose();
    // A rewind the basic written_end rule allows but rejected drafts have
    // made unsafe must be refused, with nothing changed; the engine then
    // resumes from where it was.
    bool built = false;
    if (std::any_of(seqs_.begin(), seqs_.end(), [](const EngineSeq& s) { return s.undo_len >= 0; })) {
      const auto before = plan_test::Snapshot(*cache_);
      const absl::Status st = plan_.Build(batch);
      built = st.ok();  // accepted: the gather check below judges it
      if (!st.ok()) {
        EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
        EXPECT_TRUE(plan_test::SameStates(before, plan_test::Snapshot(*cache_)));
        ++unsafe_rewinds_refused_;
        for (EngineSeq& s : seqs_)
          if (s.undo_len >= 0) s.len = s.undo_len;
        batch = Compose();
      }
      for (EngineSeq& s : seqs_) s.undo_len = -1;
    }
    if (!built) {
      const auto before = plan_test::Snapshot(*cache_);
      if (Chance(0.05)) {  // plan, then abandon the step
        EXPECT_TRUE(plan_.Build(batch).ok());
        EXPECT_TRUE(plan_.Cancel().ok());
        EXPECT_TRUE(plan_test::SameStates(before, plan_test::Snapshot(*cache_)));
      }
      const absl::Status st = plan_.Build(batch);
      EXPECT_TRUE(st.ok()) << st;
      if (!st.ok()) return 0;
    }
    const int checked = Execute(batch);
    for (EngineSeq& s : seqs_) s.fixed_q = -1;
    plan_.MarkExecuted();
    EXPECT_FALSE(plan_.Cancel().ok());

    for (size_t i = 0; i < seqs_.size(); ++i) {
      EngineSeq& s = seqs_[i];
      const int32_t q = batch[i].seqlen_q;
      if (s.len < s.prompt) {
        s.len += q;  // prefill chunk accepted in full
      } else if (q > 0) {
        s.len += Rand(1, q);  // verified token + some drafts; the rest rejected
      }
      if (Chance(0.05)) {  // deep rewind inside the basic rule's margin
        const swa::SlotState slot = *cache_->slots().Get(s.slot);
        const int32_t target = std::max(s.valid_start, s.len - Rand(0, r_ - w_ + 1));
        if (plan_ref::LegalAgainstSlot(slot.written_end, s.valid_start, target, w_, r_)) {
          const int32_t high = std::max(slot.written_end, slot.ring_high);
          if (!plan_ref::LegalAgainstSlot(slot.written_end, s.valid_start, target, w_, r_, high))
            s.undo_len = s.len;  // the planner must refuse this one
          s.len = target;
        }
      }
      if (s.len >= s.prompt && Chance(0.02)) NewRequest(s, true);
    }
    return checked;
  }

 private:
  // Runs the step on the model: writes, loads, gathers, stores.
  int Execute(const std::vector<SeqDesc>& batch) {
    std::vector<int64_t> new_ids;
    for (size_t i = 0; i < batch.size(); ++i) {
      EngineSeq& s = seqs_[i];
      const int32_t q0 = batch[i].seqlen_k - batch[i].seqlen_q;
      if (s.truth.size() < static_cast<size_t>(batch[i].seqlen_k)) s.truth.resize(batch[i].seqlen_k, -1);
      for (int32_t p = q0; p < batch[i].seqlen_k; ++p) {
        s.truth[p] = next_id_++;
        new_ids.push_back(s.truth[p]);
      }
    }
    const auto& store = plan_.store_rows();
    std::vector<std::vector<int64_t>> gathered(new_ids.size());
    if (plan_.path() == Path::kRing) {
      for (size_t t = 0; t < new_ids.size(); ++t) {  // every new vector first
        EXPECT_NE(store[t], -1);
        ring_[store[t]] = new_ids[t];
      }
      const auto& ol = plan_.offset_len();
      const auto& index = plan_.decode_index();
      for (size_t t = 0; t < new_ids.size(); ++t)
        for (int32_t j = 0; j < ol[2 * t + 1]; ++j) gathered[t].push_back(ring_[index[t * w_ + j]]);
    } else {
      const int32_t hist = plan_.history_rows();
      std::vector<int64_t> staging(hist + new_ids.size(), -11);
      for (const auto& sg : plan_.load_segments())
        for (int32_t k = 0; k < sg.count; ++k)
          staging[sg.dst_row + k] = sg.src_row < 0 ? kZero : ring_[sg.src_row + k];
      for (size_t t = 0; t < new_ids.size(); ++t) staging[hist + t] = new_ids[t];
      const auto& piv = plan_.pivots();
      for (size_t t = 0; t < new_ids.size(); ++t) {
        for (int32_t k = 0; k < piv[4 * t + 1]; ++k) gathered[t].push_back(staging[piv[4 * t] + k]);
        for (int32_t k = 0; k < piv[4 * t + 3]; ++k) gathered[t].push_back(staging[piv[4 * t + 2] + k]);
      }
      for (size_t t = 0; t < new_ids.size(); ++t)  // store after attention
        if (store[t] >= 0) ring_[store[t]] = new_ids[t];
    }
    // Each query must have gathered exactly its visible positions' current ids.
    size_t t = 0;
    int checked = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      const EngineSeq& s = seqs_[i];
      const int32_t q0 = batch[i].seqlen_k - batch[i].seqlen_q;
      for (int32_t p = q0; p < batch[i].seqlen_k; ++p, ++t) {
        std::vector<int64_t> want;
        for (int32_t x : plan_ref::Visible(p, s.valid_start, w_)) want.push_back(s.truth[x]);
        EXPECT_EQ(gathered[t], want) << "seq " << i << " position " << p << " step " << steps_;
        if (gathered[t] != want) return checked;
        ++checked;
      }
    }
    ++steps_;
    return checked;
  }

  int32_t w_, n_, r_;
  std::mt19937 rng_;
  std::unique_ptr<swa::Cache> cache_;
  StepPlan plan_;
  std::vector<int64_t> ring_;  // flat ring rows of all slots: id of what they hold
  std::vector<EngineSeq> seqs_;
  int64_t next_id_ = 1;
  int steps_ = 0;

 public:
  int unsafe_rewinds_refused_ = 0;
};

struct Geo {
  int32_t w, n, r;
};

class PlanScenario : public ::testing::TestWithParam<Geo> {};

TEST_P(PlanScenario, GatheredKeysAreExactlyTheVisiblePositions) {
  const Geo g = GetParam();
  int refused = 0;
  for (uint32_t seed = 0; seed < 4; ++seed) {
    Scenario sc(g.w, g.n, g.r, 77 + seed);
    int checked = 0;
    for (int step = 0; step < 400 && !HasFailure(); ++step) checked += sc.Step();
    EXPECT_GT(checked, 1000);
    refused += sc.unsafe_rewinds_refused_;
  }
  if (g.n >= 1) EXPECT_GT(refused, 0) << "no chained rewind was exercised";
}

INSTANTIATE_TEST_SUITE_P(Geometries, PlanScenario,
                         ::testing::Values(Geo{1, 0, 1}, Geo{2, 1, 4}, Geo{4, 3, 8},
                                           Geo{8, 5, 14}, Geo{8, 2, 10}, Geo{16, 0, 17},
                                           Geo{32, 5, 40}),
                         [](const auto& info) {
                           return "W" + std::to_string(info.param.w) + "_N" +
                                  std::to_string(info.param.n) + "_R" +
                                  std::to_string(info.param.r);
                         });

}  // namespace
