// swa_step rejects mismatched arguments with a message, and changes nothing.
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "swacache.h"

namespace {

class StepArgsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    swa_layer_desc_t l[2];
    swa_layer_desc_init(&l[0]);  // shared K/V MXFP8, 64 heads, D 512, no sinks
    l[0].q_heads = 8;
    swa_layer_desc_init(&l[1]);  // separate K/V with sinks
    l[1].q_heads = 8;
    l[1].kv_heads = 2;
    l[1].head_dim = 64;
    l[1].shared_kv = 0;
    l[1].has_sinks = 1;
    swa_config_t c;
    swa_config_init(&c);
    c.window = 8;
    c.draft_tokens = 1;
    c.max_slots = 2;
    c.backend = SWA_BACKEND_CPU;
    c.num_layers = 2;
    c.layers = l;
    ASSERT_EQ(swa_cache_create(&c, &cache_), SWA_OK) << swa_last_error();
    ASSERT_EQ(swa_plan_create(cache_, &plan_), SWA_OK);
    ASSERT_EQ(swa_slot_alloc(cache_, &slot_), SWA_OK);
    swa_tensor_view_t v;
    v.struct_size = sizeof v;
    ASSERT_EQ(swa_cache_layer_view(cache_, 0, &v), SWA_OK);
    pool_ = static_cast<uint8_t*>(v.data);
    swa_layout_t lay;
    lay.struct_size = sizeof lay;
    ASSERT_EQ(swa_cache_layout(cache_, &lay), SWA_OK);
    pool_bytes_ = lay.pool_bytes;
    q_.assign(2 * 8 * 512, 0.5f);
    k_.assign(2 * 2 * 512, 0.25f);
    out_.assign(2 * 8 * 512, 0.0f);
    sinks_.assign(8, 0.1f);
  }
  void TearDown() override {
    swa_plan_destroy(plan_);
    swa_cache_destroy(cache_);
  }
  swa_step_args_t Args(uint32_t layer) {
    swa_step_args_t a;
    swa_step_args_init(&a);
    a.layer = layer;
    a.q = q_.data();
    a.k_new = k_.data();
    a.v_new = layer == 1 ? k_.data() : nullptr;
    a.out = out_.data();
    a.sinks = layer == 1 ? sinks_.data() : nullptr;
    return a;
  }
  void Build() {
    swa_seq_t s = {slot_, 2, 2, 0};
    ASSERT_EQ(swa_plan_build(plan_, &s, 1), SWA_OK) << swa_last_error();
  }
  // The call fails with `code` and a message containing `text`; the pool and
  // the output are untouched.
  void ExpectRejected(const swa_step_args_t& a, swa_status_t code, const std::string& text) {
    const std::vector<uint8_t> before(pool_, pool_ + pool_bytes_);
    std::vector<float> out_before = out_;
    EXPECT_EQ(swa_step(cache_, plan_, &a), code) << text;
    EXPECT_NE(std::string(swa_last_error()).find(text), std::string::npos)
        << "message: " << swa_last_error();
    EXPECT_EQ(std::memcmp(before.data(), pool_, pool_bytes_), 0) << "pool changed: " << text;
    EXPECT_EQ(std::memcmp(out_before.data(), out_.data(), out_.size() * 4), 0) << text;
  }
  swa_cache_t* cache_ = nullptr;
  swa_plan_t* plan_ = nullptr;
  uint32_t slot_ = 0;
  uint8_t* pool_ = nullptr;
  size_t pool_bytes_ = 0;
  std::vector<float> q_, k_, out_, sinks_;
};

TEST_F(StepArgsTest, PlanNotBuilt) {
  ExpectRejected(Args(0), SWA_FAILED_PRECONDITION, "not built");
}

TEST_F(StepArgsTest, EveryMismatchIsNamed) {
  Build();
  swa_step_args_t a = Args(0);
  a.layer = 2;
  ExpectRejected(a, SWA_OUT_OF_RANGE, "layer = 2");
  a = Args(0);
  a.q = nullptr;
  ExpectRejected(a, SWA_INVALID_ARGUMENT, "q is NULL");
  a = Args(0);
  a.out = nullptr;
  ExpectRejected(a, SWA_INVALID_ARGUMENT, "out is NULL");
  a = Args(0);
  a.k_new = nullptr;
  ExpectRejected(a, SWA_INVALID_ARGUMENT, "k_new is NULL");
  a = Args(0);
  a.v_new = k_.data();
  ExpectRejected(a, SWA_INVALID_ARGUMENT, "shares one vector");
  a = Args(1);
  a.v_new = nullptr;
  ExpectRejected(a, SWA_INVALID_ARGUMENT, "separate K and V");
  a = Args(1);
  a.sinks = nullptr;
  ExpectRejected(a, SWA_INVALID_ARGUMENT, "has attention sinks");
  a = Args(0);
  a.sinks = sinks_.data();
  ExpectRejected(a, SWA_INVALID_ARGUMENT, "no attention sinks");
  a = Args(0);
  a.softmax_scale = -1.0f;
  ExpectRejected(a, SWA_INVALID_ARGUMENT, "softmax_scale = -1");
  a = Args(0);
  a.q_dtype = static_cast<swa_dtype_t>(4);
  ExpectRejected(a, SWA_INVALID_ARGUMENT, "q_dtype = 4");
  a = Args(0);
  a.out_dtype = static_cast<swa_dtype_t>(-1);
  ExpectRejected(a, SWA_INVALID_ARGUMENT, "out_dtype = -1");
  a = Args(0);
  a.struct_size = 8;
  ExpectRejected(a, SWA_INVALID_ARGUMENT, "struct_size = 8");
  EXPECT_EQ(swa_step(nullptr, plan_, &a), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_step(cache_, nullptr, &a), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_step(cache_, plan_, nullptr), SWA_INVALID_ARGUMENT);
  // Still cancellable: nothing ran.
  EXPECT_EQ(swa_plan_cancel(plan_), SWA_OK) << swa_last_error();
}

TEST_F(StepArgsTest, FreedSlotAndCancelledPlan) {
  Build();
  ASSERT_EQ(swa_plan_cancel(plan_), SWA_OK);
  ExpectRejected(Args(0), SWA_FAILED_PRECONDITION, "not built");
  Build();
  ASSERT_EQ(swa_slot_free(cache_, slot_), SWA_OK);
  ExpectRejected(Args(0), SWA_FAILED_PRECONDITION, "was freed");
}

TEST_F(StepArgsTest, RunMakesPlanFinal) {
  Build();
  const swa_step_args_t a = Args(0);
  ASSERT_EQ(swa_step(cache_, plan_, &a), SWA_OK) << swa_last_error();
  EXPECT_EQ(swa_plan_cancel(plan_), SWA_FAILED_PRECONDITION);
  swa_cache_stats_t st;
  st.struct_size = sizeof st;
  ASSERT_EQ(swa_cache_stats(cache_, &st), SWA_OK);
  EXPECT_EQ(st.steps, 1u);
  EXPECT_EQ(st.tokens, 2u);
  EXPECT_EQ(st.slots_in_use, 1u);
}

}  // namespace

namespace {

// A NaN/Inf in new keys never crashes: the block is stored with scale 0xFF,
// counted in the statistics, and the step succeeds.
TEST_F(StepArgsTest, NonFiniteInputsAreCounted) {
  Build();
  k_[3] = std::numeric_limits<float>::quiet_NaN();  // token 0, block 0
  k_[512 + 40] = std::numeric_limits<float>::infinity();  // token 1, block 1
  const swa_step_args_t a = Args(0);
  ASSERT_EQ(swa_step(cache_, plan_, &a), SWA_OK) << swa_last_error();
  swa_cache_stats_t st;
  st.struct_size = sizeof st;
  ASSERT_EQ(swa_cache_stats(cache_, &st), SWA_OK);
  EXPECT_EQ(st.nonfinite_blocks, 2u);
  // The stored bytes carry the NaN scale for exactly those blocks.
  swa_tensor_view_t v;
  v.struct_size = sizeof v;
  ASSERT_EQ(swa_cache_layer_view(cache_, 0, &v), SWA_OK);
  const uint8_t* row0 = static_cast<const uint8_t*>(v.data) + slot_ * v.strides[0];
  const uint8_t* row1 = row0 + v.strides[1];
  EXPECT_EQ(row0[512 + 0], 0xFF);
  EXPECT_NE(row0[512 + 1], 0xFF);
  EXPECT_EQ(row1[512 + 1], 0xFF);
  EXPECT_NE(row1[512 + 0], 0xFF);
}

}  // namespace
