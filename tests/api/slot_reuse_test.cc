// Slot reuse (ABA): a plan built for a slot's earlier owner must not touch the
// slot after it was freed and handed to a new owner, even when the new owner's
// numbers (written_end, valid_start) match what the old plan left. Cancel and
// step refuse with FAILED_PRECONDITION naming the slot, and nothing changes:
// not the slot's metadata, not a byte of its rings, not the caller's output.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "api/test_util.h"
#include "gtest/gtest.h"
#include "test_random.h"

namespace {

using swa_test::LastError;
using swa_test::Model;

class SlotReuseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Model m(1, 0, 4);
    m.config.window = 8;
    m.config.draft_tokens = 1;
    m.layers[0].q_heads = 4;
    m.layers[0].head_dim = 64;
    m.Sync();
    ASSERT_EQ(swa_cache_create(&m.config, &cache_), SWA_OK) << LastError();
    ASSERT_EQ(swa_plan_create(cache_, &stale_), SWA_OK);
    ASSERT_EQ(swa_plan_create(cache_, &fresh_), SWA_OK);
    view_.struct_size = sizeof view_;
    ASSERT_EQ(swa_cache_layer_view(cache_, 0, &view_), SWA_OK);
    layout_.struct_size = sizeof layout_;
    ASSERT_EQ(swa_cache_layout(cache_, &layout_), SWA_OK);
  }
  void TearDown() override {
    swa_plan_destroy(stale_);
    swa_plan_destroy(fresh_);
    swa_cache_destroy(cache_);
  }

  // Runs layer 0 of `plan` for `tokens` new tokens with fresh random inputs.
  swa_status_t Step(swa_plan_t* plan, int tokens, std::vector<float>* out) {
    swa_test::UniformReal<float> u(-1.0f, 1.0f);
    q_.assign(size_t(tokens) * 4 * 64, 0);
    k_.assign(size_t(tokens) * 64, 0);
    for (float& x : q_) x = u(rng_);
    for (float& x : k_) x = u(rng_);
    out->assign(q_.size(), 12345.0f);  // poison
    swa_step_args_t a;
    swa_step_args_init(&a);
    a.q = q_.data();
    a.k_new = k_.data();
    a.out = out->data();
    return swa_step(cache_, plan, &a);
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

  // The old owner plans a prefill of 5 tokens, then the slot is freed and the
  // new owner (same id, LIFO) runs the same prefill: its numbers now equal what
  // the stale plan left.
  uint32_t PlanThenReuse() {
    uint32_t slot = 0;
    EXPECT_EQ(swa_slot_alloc(cache_, &slot), SWA_OK);
    const swa_seq_t seq{slot, 5, 5, 0};
    EXPECT_EQ(swa_plan_build(stale_, &seq, 1), SWA_OK) << LastError();
    EXPECT_EQ(swa_slot_free(cache_, slot), SWA_OK);
    uint32_t again = 99;
    EXPECT_EQ(swa_slot_alloc(cache_, &again), SWA_OK);
    EXPECT_EQ(again, slot);
    EXPECT_EQ(swa_plan_build(fresh_, &seq, 1), SWA_OK) << LastError();
    std::vector<float> out;
    EXPECT_EQ(Step(fresh_, 5, &out), SWA_OK) << LastError();
    return slot;
  }

  swa_cache_t* cache_ = nullptr;
  swa_plan_t* stale_ = nullptr;
  swa_plan_t* fresh_ = nullptr;
  swa_tensor_view_t view_{};
  swa_layout_t layout_{};
  std::mt19937 rng_{11};
  std::vector<float> q_, k_;
};

TEST_F(SlotReuseTest, CancelOfAStalePlanLeavesTheNewOwnerAlone) {
  const uint32_t slot = PlanThenReuse();
  const swa_slot_info_t before = Info(slot);
  ASSERT_EQ(before.written_end, 5);
  EXPECT_EQ(swa_plan_cancel(stale_), SWA_FAILED_PRECONDITION);
  EXPECT_NE(LastError().find("slot " + std::to_string(slot)), std::string::npos) << LastError();
  const swa_slot_info_t after = Info(slot);
  EXPECT_EQ(after.written_end, before.written_end);
  EXPECT_EQ(after.valid_start, before.valid_start);
  // The new owner's own (executed) plan cannot be cancelled either; its next
  // step still plans from written_end = 5.
  const swa_seq_t next{slot, 1, 6, 0};
  EXPECT_EQ(swa_plan_build(fresh_, &next, 1), SWA_OK) << LastError();
}

TEST_F(SlotReuseTest, StepOfAStalePlanWritesNothing) {
  const uint32_t slot = PlanThenReuse();
  const std::vector<uint8_t> bytes = SlotBytes(slot);
  const swa_slot_info_t before = Info(slot);
  std::vector<float> out;
  EXPECT_EQ(Step(stale_, 5, &out), SWA_FAILED_PRECONDITION);
  EXPECT_NE(LastError().find("slot " + std::to_string(slot)), std::string::npos) << LastError();
  EXPECT_EQ(SlotBytes(slot), bytes);
  for (float x : out) ASSERT_EQ(x, 12345.0f);
  const swa_slot_info_t after = Info(slot);
  EXPECT_EQ(after.written_end, before.written_end);
  swa_cache_stats_t stats;
  stats.struct_size = sizeof stats;
  ASSERT_EQ(swa_cache_stats(cache_, &stats), SWA_OK);
  EXPECT_EQ(stats.steps, 1u);  // only the new owner's step
}

TEST_F(SlotReuseTest, AFreedSlotNotYetReusedIsRefusedToo) {
  uint32_t slot = 0;
  ASSERT_EQ(swa_slot_alloc(cache_, &slot), SWA_OK);
  const swa_seq_t seq{slot, 3, 3, 0};
  ASSERT_EQ(swa_plan_build(stale_, &seq, 1), SWA_OK);
  ASSERT_EQ(swa_slot_free(cache_, slot), SWA_OK);
  std::vector<float> out;
  EXPECT_EQ(Step(stale_, 3, &out), SWA_FAILED_PRECONDITION);
  EXPECT_EQ(swa_plan_cancel(stale_), SWA_FAILED_PRECONDITION);
}

TEST_F(SlotReuseTest, AnUntouchedPlanStillRunsAndCancels) {
  uint32_t a = 0, b = 0;
  ASSERT_EQ(swa_slot_alloc(cache_, &a), SWA_OK);
  ASSERT_EQ(swa_slot_alloc(cache_, &b), SWA_OK);
  const swa_seq_t seq{a, 2, 2, 0};
  ASSERT_EQ(swa_plan_build(stale_, &seq, 1), SWA_OK);
  // Freeing and re-allocating another slot does not concern this plan.
  ASSERT_EQ(swa_slot_free(cache_, b), SWA_OK);
  ASSERT_EQ(swa_slot_alloc(cache_, &b), SWA_OK);
  EXPECT_EQ(swa_plan_cancel(stale_), SWA_OK) << LastError();
  ASSERT_EQ(swa_plan_build(stale_, &seq, 1), SWA_OK);
  std::vector<float> out;
  EXPECT_EQ(Step(stale_, 2, &out), SWA_OK) << LastError();
}

// The same hazard without a free: a reset (recompute), a copy into the slot
// (fork) or a restore into it replaces the sequence the plan was built for.
// A step of the older plan would write the old sequence's rows into the new
// one's ring, at ring rows its rewind bookkeeping (ring_high) does not know
// were written; a cancel would restore the old lengths over the new ones.
// Both are refused, naming the slot, and nothing changes.
TEST_F(SlotReuseTest, StepOfAPlanBuiltBeforeAResetWritesNothing) {
  uint32_t slot = 0;
  ASSERT_EQ(swa_slot_alloc(cache_, &slot), SWA_OK);
  const swa_seq_t seq{slot, 5, 5, 0};
  ASSERT_EQ(swa_plan_build(stale_, &seq, 1), SWA_OK) << LastError();
  ASSERT_EQ(swa_slot_reset(cache_, slot), SWA_OK) << LastError();
  const swa_seq_t again{slot, 3, 3, 0};
  ASSERT_EQ(swa_plan_build(fresh_, &again, 1), SWA_OK) << LastError();
  std::vector<float> out;
  ASSERT_EQ(Step(fresh_, 3, &out), SWA_OK) << LastError();
  const std::vector<uint8_t> bytes = SlotBytes(slot);
  EXPECT_EQ(Step(stale_, 5, &out), SWA_FAILED_PRECONDITION);
  EXPECT_NE(LastError().find("slot " + std::to_string(slot)), std::string::npos) << LastError();
  EXPECT_EQ(SlotBytes(slot), bytes);
  for (float x : out) ASSERT_EQ(x, 12345.0f);
  EXPECT_EQ(Info(slot).written_end, 3);
}

TEST_F(SlotReuseTest, CancelOfAPlanBuiltBeforeAResetChangesNothing) {
  uint32_t slot = 0;
  ASSERT_EQ(swa_slot_alloc(cache_, &slot), SWA_OK);
  const swa_seq_t first{slot, 4, 4, 0};
  ASSERT_EQ(swa_plan_build(fresh_, &first, 1), SWA_OK) << LastError();
  std::vector<float> out;
  ASSERT_EQ(Step(fresh_, 4, &out), SWA_OK) << LastError();
  // Planned 4 -> 5, then reset; the fresh sequence happens to plan 4 -> 5 as well
  // (written_end 0 -> 4 by a prefill is what the old plan's cancel would "restore").
  const swa_seq_t next{slot, 1, 5, 0};
  ASSERT_EQ(swa_plan_build(stale_, &next, 1), SWA_OK) << LastError();
  ASSERT_EQ(swa_slot_reset(cache_, slot), SWA_OK) << LastError();
  const swa_seq_t prefill{slot, 5, 5, 0};
  ASSERT_EQ(swa_plan_build(fresh_, &prefill, 1), SWA_OK) << LastError();
  ASSERT_EQ(Step(fresh_, 5, &out), SWA_OK) << LastError();
  EXPECT_EQ(swa_plan_cancel(stale_), SWA_FAILED_PRECONDITION);
  EXPECT_NE(LastError().find("slot " + std::to_string(slot)), std::string::npos) << LastError();
  EXPECT_EQ(Info(slot).written_end, 5);
}

TEST_F(SlotReuseTest, StepOfAPlanBuiltBeforeACopyIntoTheSlotWritesNothing) {
  uint32_t src = 0, dst = 0;
  ASSERT_EQ(swa_slot_alloc(cache_, &src), SWA_OK);
  ASSERT_EQ(swa_slot_alloc(cache_, &dst), SWA_OK);
  const swa_seq_t a{src, 6, 6, 0};
  ASSERT_EQ(swa_plan_build(fresh_, &a, 1), SWA_OK) << LastError();
  std::vector<float> out;
  ASSERT_EQ(Step(fresh_, 6, &out), SWA_OK) << LastError();
  const swa_seq_t b{dst, 4, 4, 0};
  ASSERT_EQ(swa_plan_build(stale_, &b, 1), SWA_OK) << LastError();
  ASSERT_EQ(swa_slot_copy(cache_, src, dst), SWA_OK) << LastError();
  const std::vector<uint8_t> bytes = SlotBytes(dst);
  ASSERT_EQ(bytes, SlotBytes(src));
  EXPECT_EQ(Step(stale_, 4, &out), SWA_FAILED_PRECONDITION);
  EXPECT_NE(LastError().find("slot " + std::to_string(dst)), std::string::npos) << LastError();
  EXPECT_EQ(SlotBytes(dst), bytes);
  for (float x : out) ASSERT_EQ(x, 12345.0f);
  EXPECT_EQ(Info(dst).written_end, 6);
  EXPECT_EQ(swa_plan_cancel(stale_), SWA_FAILED_PRECONDITION);
  EXPECT_EQ(Info(dst).written_end, 6);
}

TEST_F(SlotReuseTest, StepOfAPlanBuiltBeforeARestoreIntoTheSlotWritesNothing) {
  swa_store_memory_config_t mc;
  swa_store_memory_config_init(&mc);
  swa_kv_store_t table;
  swa_kv_store_init(&table);
  ASSERT_EQ(swa_store_memory_create(&mc, &table), SWA_OK) << LastError();
  ASSERT_EQ(swa_cache_set_store(cache_, &table), SWA_OK) << LastError();
  uint32_t src = 0, dst = 0;
  ASSERT_EQ(swa_slot_alloc(cache_, &src), SWA_OK);
  ASSERT_EQ(swa_slot_alloc(cache_, &dst), SWA_OK);
  const swa_seq_t a{src, 6, 6, 0};
  ASSERT_EQ(swa_plan_build(fresh_, &a, 1), SWA_OK) << LastError();
  std::vector<float> out;
  ASSERT_EQ(Step(fresh_, 6, &out), SWA_OK) << LastError();
  const uint8_t key[] = {'k', '1'};
  ASSERT_EQ(swa_slot_save(cache_, src, key, sizeof key), SWA_OK) << LastError();
  const swa_seq_t b{dst, 4, 4, 0};
  ASSERT_EQ(swa_plan_build(stale_, &b, 1), SWA_OK) << LastError();
  ASSERT_EQ(swa_slot_restore(cache_, dst, key, sizeof key), SWA_OK) << LastError();
  const std::vector<uint8_t> bytes = SlotBytes(dst);
  EXPECT_EQ(Step(stale_, 4, &out), SWA_FAILED_PRECONDITION);
  EXPECT_NE(LastError().find("slot " + std::to_string(dst)), std::string::npos) << LastError();
  EXPECT_EQ(SlotBytes(dst), bytes);
  for (float x : out) ASSERT_EQ(x, 12345.0f);
  EXPECT_EQ(Info(dst).written_end, 6);
}

}  // namespace
