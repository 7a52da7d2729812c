// The deepest legal rewind (docs/semantics.md, "Rewinds"), on both paths, against
// a straight run of the same tokens that never wrote the rejected drafts: the
// step at that q_start is accepted, its outputs are bit-identical to the
// straight run's and so are the ring rows of every position the next step can
// read. One position deeper is refused with the slot's metadata and bytes
// unchanged. The rejected drafts are NaN, so that a path which touches a row the
// window does not cover (the staged load reads position q_start - W, whose row
// a rejected draft overwrote) shows it as a NaN in the output.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "api/test_util.h"
#include "gtest/gtest.h"
#include "test_random.h"

namespace {

using swa_test::LastError;
using swa_test::Model;

constexpr int kW = 8, kN = 2, kR = kW + kN + 1;  // R - W + 1 = 4 tokens on the ring-only path
constexpr int kHq = 4, kD = 64;

class RewindEdge : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    Model m(1, 0, 4);
    m.config.window = kW;
    m.config.draft_tokens = kN;
    m.layers[0].q_heads = kHq;
    m.layers[0].head_dim = kD;
    m.Sync();
    ASSERT_EQ(swa_cache_create(&m.config, &cache_), SWA_OK) << LastError();
    ASSERT_EQ(swa_plan_create(cache_, &plan_), SWA_OK);
    view_.struct_size = sizeof view_;
    ASSERT_EQ(swa_cache_layer_view(cache_, 0, &view_), SWA_OK);
    layout_.struct_size = sizeof layout_;
    ASSERT_EQ(swa_cache_layout(cache_, &layout_), SWA_OK);
    ASSERT_EQ(layout_.ring_len, uint32_t(kR));
    swa_test::UniformReal<float> u(-1.0f, 1.0f);
    std::mt19937 rng(7);
    q_.resize(64 * kHq * kD);
    k_.resize(64 * kD);
    for (float& x : q_) x = u(rng);
    for (float& x : k_) x = u(rng);
  }
  void TearDown() override {
    swa_plan_destroy(plan_);
    swa_cache_destroy(cache_);
  }

  // Runs positions [q_start, q_start + n) of `slot` with the inputs of those
  // positions (the same for every slot), or NaN keys when `nan_keys`.
  // `input_at`: which inputs (default: those of q_start).
  swa_status_t Run(uint32_t slot, int q_start, int n, bool nan_keys, std::vector<float>* out,
                   int input_at = -1) {
    const swa_seq_t seq{slot, n, q_start + n, 0};
    swa_status_t st = swa_plan_build(plan_, &seq, 1);
    if (st != SWA_OK) return st;
    if (input_at < 0) input_at = q_start;
    std::vector<float> k(k_.begin() + input_at * kD, k_.begin() + (input_at + n) * kD);
    if (nan_keys) std::fill(k.begin(), k.end(), std::numeric_limits<float>::quiet_NaN());
    out->assign(size_t(n) * kHq * kD, 12345.0f);
    swa_step_args_t a;
    swa_step_args_init(&a);
    a.q = q_.data() + size_t(input_at) * kHq * kD;
    a.k_new = k.data();
    a.out = out->data();
    return swa_step(cache_, plan_, &a);
  }

  const uint8_t* Row(uint32_t slot, int pos) const {
    return static_cast<const uint8_t*>(view_.data) + slot * layout_.slot_bytes +
           (pos % kR) * view_.strides[1];
  }
  std::vector<uint8_t> SlotBytes(uint32_t slot) const {
    const uint8_t* p = static_cast<const uint8_t*>(view_.data) + slot * layout_.slot_bytes;
    return std::vector<uint8_t>(p, p + layout_.slot_bytes);
  }
  swa_slot_info_t Info(uint32_t slot) const {
    swa_slot_info_t info;
    info.struct_size = sizeof info;
    EXPECT_EQ(swa_slot_info(cache_, slot, &info), SWA_OK);
    return info;
  }

  swa_cache_t* cache_ = nullptr;
  swa_plan_t* plan_ = nullptr;
  swa_tensor_view_t view_{};
  swa_layout_t layout_{};
  std::vector<float> q_, k_;
};

TEST_P(RewindEdge, DeepestRewindMatchesAStraightRun) {
  const int n_after = GetParam();  // tokens of the step after the rewind
  uint32_t a = 0, b = 0;
  ASSERT_EQ(swa_slot_alloc(cache_, &a), SWA_OK);
  ASSERT_EQ(swa_slot_alloc(cache_, &b), SWA_OK);
  std::vector<float> out_a, out_b;
  // a: prefill 20, then a verify step of 1 + N tokens (20 ... 22) whose drafts
  // are all rejected, NaN keys. E = ring_high = 23.
  ASSERT_EQ(Run(a, 0, 20, false, &out_a), SWA_OK) << LastError();
  ASSERT_EQ(Run(a, 20, kN + 1, true, &out_a), SWA_OK) << LastError();
  // Deepest legal rewind: q - W + 1 >= 23 - R, q = 23 - R + W - 1 = 19.
  const int q = 23 - kR + kW - 1;
  ASSERT_EQ(q, 19);
  // One deeper is refused and changes nothing.
  const std::vector<uint8_t> bytes = SlotBytes(a);
  const swa_slot_info_t before = Info(a);
  const swa_seq_t too_deep{a, n_after, q - 1 + n_after, 0};
  EXPECT_EQ(swa_plan_build(plan_, &too_deep, 1), SWA_FAILED_PRECONDITION);
  EXPECT_NE(LastError().find("rewind too deep"), std::string::npos) << LastError();
  EXPECT_EQ(SlotBytes(a), bytes);
  EXPECT_EQ(Info(a).written_end, before.written_end);
  EXPECT_EQ(Info(a).valid_start, before.valid_start);
  // The deepest one runs like a sequence that never wrote the drafts.
  ASSERT_EQ(Run(a, q, n_after, false, &out_a), SWA_OK) << LastError();
  ASSERT_EQ(Run(b, 0, q, false, &out_b), SWA_OK) << LastError();
  ASSERT_EQ(Run(b, q, n_after, false, &out_b), SWA_OK) << LastError();
  for (size_t i = 0; i < out_a.size(); ++i) {
    ASSERT_TRUE(std::isfinite(out_a[i])) << "out[" << i << "] = " << out_a[i];
    ASSERT_EQ(out_a[i], out_b[i]) << "out[" << i << "]";
  }
  // Every position the next step (q_start = E) can read: E - W + 1 ... E - 1.
  const int e = q + n_after;
  for (int p = e - kW + 1; p < e; ++p)
    ASSERT_EQ(std::memcmp(Row(a, p), Row(b, p), view_.strides[1]), 0) << "position " << p;
  // And the next step agrees too.
  ASSERT_EQ(Run(a, e, 1, false, &out_a), SWA_OK) << LastError();
  ASSERT_EQ(Run(b, e, 1, false, &out_b), SWA_OK) << LastError();
  EXPECT_EQ(out_a, out_b);
}

// 3 tokens: ring-only path (<= R - W + 1 = 4); 6 and 12: staged (12 > R).
INSTANTIATE_TEST_SUITE_P(Paths, RewindEdge, ::testing::Values(3, 4, 6, 12));

// Positions at the top of int32 (a bounded replay of a prefix of INT32_MAX - 1
// tokens, then speculative steps with rewinds up to seqlen_k = INT32_MAX, ring-only
// and staged): without RoPE the outputs depend on relative positions only, so
// they must equal bit for bit those of the same tokens replayed at a small H.
class FarPositions : public RewindEdge {};

TEST_P(FarPositions, StepsUpToInt32MaxMatchTheSameStepsAtSmallPositions) {
  const int32_t top = std::numeric_limits<int32_t>::max();
  const int32_t far_hit = top - GetParam();
  const int32_t near_hit = 100;
  uint32_t far = 0, near = 0;
  ASSERT_EQ(swa_slot_alloc(cache_, &far), SWA_OK);
  ASSERT_EQ(swa_slot_alloc(cache_, &near), SWA_OK);
  int32_t fs = -1, fl = -1, ns = -1, nl = -1;
  ASSERT_EQ(swa_slot_begin_replay(cache_, far, far_hit, &fs, &fl), SWA_OK) << LastError();
  ASSERT_EQ(swa_slot_begin_replay(cache_, near, near_hit, &ns, &nl), SWA_OK) << LastError();
  ASSERT_EQ(fs, far_hit - kW);
  ASSERT_EQ(fl, kW);
  ASSERT_EQ(nl, kW);
  // (relative position, tokens): replay, 3-token verify steps with rewinds, a
  // staged chunk of 6 (> R - W + 1), the last token ending at INT32_MAX.
  struct S { int rel, n; };
  const int end = kW + GetParam();  // relative seqlen_k of the last step
  std::vector<S> steps = {{0, kW}, {kW, 3}, {kW + 1, 3}, {kW + 2, 6}};
  int pos = kW + 8;
  for (; pos + 3 < end; pos += 2) steps.push_back({pos, 3});  // accept 2 of 3
  steps.push_back({pos, end - pos});
  steps.push_back({end - 4, 4});  // rewind by R - W + 1 = 4, staged-free
  steps.push_back({end - 1, 1});
  std::vector<float> out_f, out_n;
  for (const S& st : steps) {
    ASSERT_EQ(Run(far, fs + st.rel, st.n, false, &out_f, st.rel), SWA_OK)
        << "far step at " << st.rel << ": " << LastError();
    ASSERT_EQ(Run(near, ns + st.rel, st.n, false, &out_n, st.rel), SWA_OK)
        << "near step at " << st.rel << ": " << LastError();
    ASSERT_EQ(out_f, out_n) << "step at relative position " << st.rel;
  }
  EXPECT_EQ(Info(far).written_end, top);
  // Nothing goes past INT32_MAX: a step there cannot be described (seqlen_k is
  // int32), and one naming seqlen_q > seqlen_k is refused.
  const swa_seq_t bad{far, 2, 1, 0};
  EXPECT_EQ(swa_plan_build(plan_, &bad, 1), SWA_INVALID_ARGUMENT);
}

INSTANTIATE_TEST_SUITE_P(Tops, FarPositions, ::testing::Values(12, 20));

// swa_step runs each layer once per build ("Run every layer of the cache once
// per built plan"). A second run of a layer is refused, naming it, with nothing
// written: on the staged path the first run's store has overwritten history
// rows the load plan reads (here positions 12 ... 16 of a chunk at 20 ... 27,
// R = 11), so the second run returned OK with different outputs. A refused
// call (bad arguments) does not count as the run; a rebuild starts afresh.
class LayerOnce : public RewindEdge {};

TEST_P(LayerOnce, ASecondRunOfALayerForOneBuildIsRefused) {
  const int n = GetParam();
  uint32_t slot = 0;
  ASSERT_EQ(swa_slot_alloc(cache_, &slot), SWA_OK);
  std::vector<float> out;
  ASSERT_EQ(Run(slot, 0, 20, false, &out), SWA_OK) << LastError();
  const swa_seq_t seq{slot, n, 20 + n, 0};
  ASSERT_EQ(swa_plan_build(plan_, &seq, 1), SWA_OK) << LastError();
  std::vector<float> first(size_t(n) * kHq * kD, 12345.0f), second(first);
  swa_step_args_t a;
  swa_step_args_init(&a);
  a.q = q_.data() + size_t(20) * kHq * kD;
  a.k_new = k_.data() + 20 * kD;
  a.out = nullptr;
  EXPECT_EQ(swa_step(cache_, plan_, &a), SWA_INVALID_ARGUMENT);  // not a run
  a.out = first.data();
  ASSERT_EQ(swa_step(cache_, plan_, &a), SWA_OK) << LastError();
  const std::vector<uint8_t> bytes = SlotBytes(slot);
  a.out = second.data();
  EXPECT_EQ(swa_step(cache_, plan_, &a), SWA_FAILED_PRECONDITION);
  EXPECT_NE(LastError().find("layer 0"), std::string::npos) << LastError();
  for (float x : second) ASSERT_EQ(x, 12345.0f);
  EXPECT_EQ(SlotBytes(slot), bytes);
  // The next build runs the layer again.
  const swa_seq_t next{slot, 1, 21 + n, 0};
  ASSERT_EQ(swa_plan_build(plan_, &next, 1), SWA_OK) << LastError();
  a.q = q_.data() + size_t(20 + n) * kHq * kD;
  a.k_new = k_.data() + (20 + n) * kD;
  EXPECT_EQ(swa_step(cache_, plan_, &a), SWA_OK) << LastError();
}

// 3: ring-only; 8: staged, its store overwrites history rows.
INSTANTIATE_TEST_SUITE_P(Paths, LayerOnce, ::testing::Values(3, 8));

}  // namespace
