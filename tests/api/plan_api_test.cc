// The planner through the public C API only: options, info/sizing, every
// exporter (poisoned buffers, values from formulas written here), wrong-path
// and argument errors, cancel, valid_start and bounded replay.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "api/test_util.h"
#include "gtest/gtest.h"

namespace {

using swa_test::LastError;
using swa_test::Model;

constexpr int32_t kW = 128, kR = 134;  // Model: W 128, N 5
constexpr int32_t kPoison = 0x5a5a5a5a;

class PlanApi : public ::testing::Test {
 protected:
  void SetUp() override {
    Model m(1, 0, 8);
    ASSERT_EQ(swa_cache_create(&m.config, &cache_), SWA_OK) << LastError();
    for (uint32_t& s : slots_) ASSERT_EQ(swa_slot_alloc(cache_, &s), SWA_OK);
    ASSERT_EQ(swa_plan_create(cache_, &plan_), SWA_OK) << LastError();
  }
  void TearDown() override {
    swa_plan_destroy(plan_);
    swa_cache_destroy(cache_);
  }
  swa_plan_info_t Info(const swa_plan_t* plan) {
    swa_plan_info_t info;
    std::memset(&info, 0xCD, sizeof info);
    info.struct_size = sizeof info;
    EXPECT_EQ(swa_plan_info(plan, &info), SWA_OK) << LastError();
    return info;
  }
  swa_slot_info_t Slot(uint32_t slot) {
    swa_slot_info_t info;
    info.struct_size = sizeof info;
    EXPECT_EQ(swa_slot_info(cache_, slot, &info), SWA_OK);
    return info;
  }
  // Prefill 200 tokens into each of the three slots (staged: 200 > R - W + 1).
  void Prefill() {
    const swa_seq_t seqs[3] = {{slots_[0], 200, 200, 0}, {slots_[1], 200, 200, 0}, {slots_[2], 200, 200, 0}};
    ASSERT_EQ(swa_plan_build(plan_, seqs, 3), SWA_OK) << LastError();
  }
  int32_t Row(uint32_t slot, int32_t pos) { return static_cast<int32_t>(slot) * kR + pos % kR; }

  swa_cache_t* cache_ = nullptr;
  swa_plan_t* plan_ = nullptr;
  uint32_t slots_[3] = {0, 0, 0};
};

TEST_F(PlanApi, OptionsAndCreate) {
  swa_plan_options_t o;
  std::memset(&o, 0xCD, sizeof o);
  swa_plan_options_init(&o);
  EXPECT_EQ(o.struct_size, sizeof o);
  EXPECT_EQ(o.index_pad, SWA_INDEX_PAD_NEG1);
  EXPECT_EQ(o.materialize_index, 1u);
  swa_plan_options_init(nullptr);
  swa_plan_t* p = nullptr;
  EXPECT_EQ(swa_plan_create(nullptr, &p), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_plan_create(cache_, nullptr), SWA_INVALID_ARGUMENT);
  o.struct_size = 3;
  EXPECT_EQ(swa_plan_create_with_options(cache_, &o, &p), SWA_INVALID_ARGUMENT);
  swa_plan_options_init(&o);
  o.index_pad = static_cast<swa_index_pad_t>(7);
  EXPECT_EQ(swa_plan_create_with_options(cache_, &o, &p), SWA_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("index_pad = 7"), std::string::npos) << LastError();
  swa_plan_options_init(&o);
  o.materialize_index = 2;
  EXPECT_EQ(swa_plan_create_with_options(cache_, &o, &p), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(p, nullptr);
  swa_plan_destroy(nullptr);
}

TEST_F(PlanApi, UnbuiltPlan) {
  const swa_plan_info_t info = Info(plan_);
  EXPECT_EQ(info.path, SWA_PLAN_PATH_NONE);
  EXPECT_EQ(info.n_seqs, 0u);
  EXPECT_EQ(info.window, 128u);
  EXPECT_EQ(info.ring_len, 134u);
  int32_t buf[8];
  size_t count = 99;
  EXPECT_EQ(swa_plan_decode_index(plan_, buf, nullptr), SWA_FAILED_PRECONDITION);
  EXPECT_EQ(swa_plan_pivots(plan_, buf), SWA_FAILED_PRECONDITION);
  EXPECT_EQ(swa_plan_load_segments(plan_, nullptr, 0, &count), SWA_FAILED_PRECONDITION);
  EXPECT_EQ(swa_plan_store_rows(plan_, buf), SWA_FAILED_PRECONDITION);
  EXPECT_EQ(swa_plan_store_segments(plan_, nullptr, 0, &count), SWA_FAILED_PRECONDITION);
  EXPECT_EQ(swa_plan_seq_offsets(plan_, buf, nullptr, nullptr), SWA_FAILED_PRECONDITION);
  EXPECT_EQ(swa_plan_cancel(plan_), SWA_FAILED_PRECONDITION);
  EXPECT_EQ(count, 99u);
  swa_plan_info_t bad;
  bad.struct_size = 1;
  EXPECT_EQ(swa_plan_info(plan_, &bad), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_plan_info(nullptr, &bad), SWA_INVALID_ARGUMENT);
}

TEST_F(PlanApi, StagedPrefillExports) {
  Prefill();
  const swa_plan_info_t info = Info(plan_);
  EXPECT_EQ(info.path, SWA_PLAN_PATH_STAGED);
  EXPECT_EQ(info.n_seqs, 3u);
  EXPECT_EQ(info.n_tokens, 600);
  EXPECT_EQ(info.max_seqlen_q, 200);
  EXPECT_EQ(info.history_rows, 3 * kW);
  EXPECT_EQ(info.staging_rows, 3 * kW + 600);
  EXPECT_EQ(info.pivot_elems, 2400u);
  EXPECT_EQ(info.decode_index_elems, 0u);
  EXPECT_EQ(info.n_load_segments, 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Slot(slots_[i]).written_end, 200);

  // Load plan: fresh prompts load W zero rows each.
  size_t count = 0;
  ASSERT_EQ(swa_plan_load_segments(plan_, nullptr, 0, &count), SWA_OK);
  ASSERT_EQ(count, 3u);
  std::vector<swa_segment_t> segs(4, swa_segment_t{kPoison, kPoison, kPoison});
  size_t small = 77;
  EXPECT_EQ(swa_plan_load_segments(plan_, segs.data(), 2, &small), SWA_OUT_OF_RANGE);
  EXPECT_EQ(small, 77u);
  EXPECT_EQ(segs[0].dst_row, kPoison);
  ASSERT_EQ(swa_plan_load_segments(plan_, segs.data(), segs.size(), &count), SWA_OK);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(segs[i].dst_row, i * kW);
    EXPECT_EQ(segs[i].src_row, -1);
    EXPECT_EQ(segs[i].count, kW);
  }
  EXPECT_EQ(segs[3].dst_row, kPoison);

  // Pivots: token j of sequence i at position j sees max(0, j - W + 1) ... j,
  // all in section 2.
  std::vector<int32_t> piv(4 * 600 + 1, kPoison);
  ASSERT_EQ(swa_plan_pivots(plan_, piv.data()), SWA_OK);
  EXPECT_EQ(piv.back(), kPoison);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 200; ++j) {
      const int t = i * 200 + j, lo = j >= kW ? j - kW + 1 : 0;
      ASSERT_EQ(piv[4 * t + 1], 0) << t;
      ASSERT_EQ(piv[4 * t + 2], 3 * kW + i * 200 + lo) << t;
      ASSERT_EQ(piv[4 * t + 3], j - lo + 1) << t;
    }

  // Store: only the last R = 134 positions (66 ... 199) go to the ring.
  std::vector<int32_t> rows(601, kPoison);
  ASSERT_EQ(swa_plan_store_rows(plan_, rows.data()), SWA_OK);
  EXPECT_EQ(rows[600], kPoison);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 200; ++j) ASSERT_EQ(rows[i * 200 + j], j < 66 ? -1 : Row(slots_[i], j));
  ASSERT_EQ(swa_plan_store_segments(plan_, nullptr, 0, &count), SWA_OK);
  std::vector<swa_segment_t> ss(count);
  ASSERT_EQ(swa_plan_store_segments(plan_, ss.data(), ss.size(), &count), SWA_OK);
  std::vector<int32_t> from(600, -1);
  for (const auto& s : ss)
    for (int k = 0; k < s.count; ++k) from[s.src_row + k] = s.dst_row + k;
  EXPECT_EQ(from, std::vector<int32_t>(rows.begin(), rows.end() - 1));

  int32_t cu[4], q0[3], vs[3];
  ASSERT_EQ(swa_plan_seq_offsets(plan_, cu, q0, vs), SWA_OK);
  EXPECT_EQ(std::vector<int32_t>(cu, cu + 4), (std::vector<int32_t>{0, 200, 400, 600}));
  EXPECT_EQ(std::vector<int32_t>(q0, q0 + 3), (std::vector<int32_t>{0, 0, 0}));
  EXPECT_EQ(std::vector<int32_t>(vs, vs + 3), (std::vector<int32_t>{0, 0, 0}));

  int32_t buf[2];
  EXPECT_EQ(swa_plan_decode_index(plan_, buf, nullptr), SWA_FAILED_PRECONDITION);
  EXPECT_NE(LastError().find("staged"), std::string::npos) << LastError();
}

TEST_F(PlanApi, RingDecodeExports) {
  Prefill();
  // Speculative verify: 6 tokens at 200 ... 205 for each sequence.
  const swa_seq_t seqs[3] = {{slots_[2], 6, 206, 0}, {slots_[0], 6, 206, 0}, {slots_[1], 6, 206, 0}};
  ASSERT_EQ(swa_plan_build(plan_, seqs, 3), SWA_OK) << LastError();
  const swa_plan_info_t info = Info(plan_);
  EXPECT_EQ(info.path, SWA_PLAN_PATH_RING);
  EXPECT_EQ(info.decode_index_elems, 18u * kW);
  std::vector<int32_t> ol(2 * 18 + 1, kPoison), index(18 * kW + 1, kPoison);
  ASSERT_EQ(swa_plan_decode_index(plan_, ol.data(), index.data()), SWA_OK);
  EXPECT_EQ(ol.back(), kPoison);
  EXPECT_EQ(index.back(), kPoison);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 6; ++j) {
      const int t = i * 6 + j, p = 200 + j, lo = p - kW + 1;
      ASSERT_EQ(ol[2 * t], Row(seqs[i].slot, lo));
      ASSERT_EQ(ol[2 * t + 1], kW);
      for (int k = 0; k < kW; ++k) ASSERT_EQ(index[t * kW + k], Row(seqs[i].slot, lo + k));
    }
  std::vector<int32_t> rows(18);
  ASSERT_EQ(swa_plan_store_rows(plan_, rows.data()), SWA_OK);
  for (int t = 0; t < 18; ++t) EXPECT_EQ(rows[t], Row(seqs[t / 6].slot, 200 + t % 6));
  int32_t buf[8];
  size_t count;
  EXPECT_EQ(swa_plan_pivots(plan_, buf), SWA_FAILED_PRECONDITION);
  EXPECT_EQ(swa_plan_load_segments(plan_, nullptr, 0, &count), SWA_FAILED_PRECONDITION);
  EXPECT_EQ(swa_plan_decode_index(plan_, nullptr, nullptr), SWA_INVALID_ARGUMENT);
}

TEST_F(PlanApi, PaddingOptionAndOnDemandIndex) {
  swa_plan_options_t o;
  swa_plan_options_init(&o);
  o.index_pad = SWA_INDEX_PAD_LAST_ROW;
  o.materialize_index = 0;
  swa_plan_t* lean = nullptr;
  ASSERT_EQ(swa_plan_create_with_options(cache_, &o, &lean), SWA_OK);
  // A new prompt of 3 tokens: rows hold 1, 2, 3 keys, the rest is padding.
  const swa_seq_t seq = {slots_[1], 3, 3, 0};
  std::vector<int32_t> a(3 * kW, kPoison), b(3 * kW, kPoison);
  ASSERT_EQ(swa_plan_build(plan_, &seq, 1), SWA_OK);
  ASSERT_EQ(swa_plan_decode_index(plan_, nullptr, a.data()), SWA_OK);
  ASSERT_EQ(swa_plan_cancel(plan_), SWA_OK);
  ASSERT_EQ(swa_plan_build(lean, &seq, 1), SWA_OK) << LastError();
  ASSERT_EQ(swa_plan_decode_index(lean, nullptr, b.data()), SWA_OK);
  for (int t = 0; t < 3; ++t)
    for (int k = 0; k < kW; ++k) {
      const int32_t key = k <= t ? Row(slots_[1], k) : -1;
      ASSERT_EQ(a[t * kW + k], key);
      ASSERT_EQ(b[t * kW + k], k <= t ? key : Row(slots_[1], t)) << t << " " << k;
    }
  swa_plan_destroy(lean);
}

TEST_F(PlanApi, RejectionCancelAndArguments) {
  Prefill();
  const swa_slot_info_t before = Slot(slots_[1]);
  const swa_seq_t bad[2] = {{slots_[0], 1, 201, 0}, {slots_[1], 1, 203, 0}};  // gap at 200..201
  EXPECT_EQ(swa_plan_build(plan_, bad, 2), SWA_FAILED_PRECONDITION);
  EXPECT_NE(LastError().find("seqs[1]"), std::string::npos) << LastError();
  EXPECT_NE(LastError().find("q_start = 202"), std::string::npos) << LastError();
  EXPECT_EQ(Slot(slots_[0]).written_end, 200);
  EXPECT_EQ(Info(plan_).path, SWA_PLAN_PATH_STAGED);  // the previous build is intact

  const swa_seq_t good = {slots_[1], 1, 201, 0};
  ASSERT_EQ(swa_plan_build(plan_, &good, 1), SWA_OK);
  EXPECT_EQ(Slot(slots_[1]).written_end, 201);
  ASSERT_EQ(swa_plan_cancel(plan_), SWA_OK);
  EXPECT_EQ(Slot(slots_[1]).written_end, before.written_end);
  EXPECT_EQ(Info(plan_).path, SWA_PLAN_PATH_NONE);

  EXPECT_EQ(swa_plan_build(nullptr, &good, 1), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_plan_build(plan_, nullptr, 1), SWA_INVALID_ARGUMENT);
  ASSERT_EQ(swa_plan_build(plan_, nullptr, 0), SWA_OK);  // an empty step
  EXPECT_EQ(Info(plan_).n_tokens, 0);
  EXPECT_EQ(swa_plan_cancel(nullptr), SWA_INVALID_ARGUMENT);
  int32_t cu[1] = {kPoison};
  ASSERT_EQ(swa_plan_seq_offsets(plan_, cu, nullptr, nullptr), SWA_OK);
  EXPECT_EQ(cu[0], 0);
}

TEST_F(PlanApi, ValidStartAndReplay) {
  int32_t start = kPoison, len = kPoison;
  EXPECT_EQ(swa_slot_begin_replay(nullptr, slots_[0], 10, &start, &len), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_slot_begin_replay(cache_, slots_[0], -1, &start, &len), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_slot_begin_replay(cache_, 100, 10, &start, &len), SWA_OUT_OF_RANGE);
  EXPECT_EQ(start, kPoison);
  ASSERT_EQ(swa_slot_begin_replay(cache_, slots_[0], 1000, &start, &len), SWA_OK) << LastError();
  EXPECT_EQ(start, 1000 - kW);
  EXPECT_EQ(len, kW);
  EXPECT_EQ(Slot(slots_[0]).valid_start, 872);
  EXPECT_EQ(Slot(slots_[0]).written_end, 872);
  ASSERT_EQ(swa_slot_begin_replay(cache_, slots_[0], 1000, nullptr, nullptr), SWA_OK);
  const swa_seq_t replay = {slots_[0], kW, 1000, 0};
  ASSERT_EQ(swa_plan_build(plan_, &replay, 1), SWA_OK) << LastError();
  int32_t vs = kPoison;
  ASSERT_EQ(swa_plan_seq_offsets(plan_, nullptr, nullptr, &vs), SWA_OK);
  EXPECT_EQ(vs, 872);
  EXPECT_EQ(swa_slot_begin_replay(cache_, slots_[0], 1000, nullptr, nullptr), SWA_FAILED_PRECONDITION);

  EXPECT_EQ(swa_slot_set_valid_start(nullptr, slots_[0], 3), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_slot_set_valid_start(cache_, slots_[0], -3), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_slot_set_valid_start(cache_, slots_[0], 900), SWA_OK);
  EXPECT_EQ(swa_slot_set_valid_start(cache_, slots_[0], 899), SWA_FAILED_PRECONDITION);
  EXPECT_EQ(Slot(slots_[0]).valid_start, 900);
}

}  // namespace
