// RoPE as a service (swa_rope_table, swa_rope_apply) on host memory:
//  - the rotation is bit for bit the step's own: the FP32 (and BF16) ring rows
//    a step stores for its new keys at given positions equal swa_rope_apply's
//    forward rotation of the same keys, and a de-rotating layer's output of
//    one-key sequences (out = the stored key rotated back) equals its inverse
//    rotation, for both pairing styles, full, leading, middle and trailing
//    slices, plain RoPE and YaRN (truncated or not, custom betas, a forced
//    attention factor), positions up to 2^31 - 1;
//  - the table equals the FP32 frequencies of the independent reference
//    (examples/common/dense_reference.h, Rope::InvFreq) and its factor;
//  - bad arguments are INVALID_ARGUMENT naming the value, and change nothing.
// The GPU half is tests/gpu/cuda_rope_apply_test.cc; the comparison with
// transformers' apply_rotary_pos_emb is bindings/python/tests/test_rope.py.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/dense_reference.h"
#include "gtest/gtest.h"
#include "swacache.h"
#include "test_random.h"

namespace {

struct RopeCase {
  const char* name;
  swa_rope_style_t style;
  int first, dims, head_dim;
  float yarn_factor, beta_fast, beta_slow;
  bool truncate;
  float attention_factor;
};

swa_layer_desc_t Layer(const RopeCase& rc, swa_format_t format, bool shared, bool derotate) {
  swa_layer_desc_t l;
  swa_layer_desc_init(&l);
  l.q_heads = 2, l.kv_heads = 2, l.head_dim = uint32_t(rc.head_dim), l.shared_kv = shared;
  l.kv_format = format;
  l.rope_style = rc.style, l.rope_first_dim = uint32_t(rc.first), l.rope_dims = uint32_t(rc.dims);
  l.rope_theta = 150000.0f;
  l.rope_yarn_factor = rc.yarn_factor, l.rope_yarn_original_max_positions = 4096;
  l.rope_yarn_beta_fast = rc.beta_fast, l.rope_yarn_beta_slow = rc.beta_slow;
  l.rope_yarn_truncate = rc.truncate, l.rope_attention_factor = rc.attention_factor;
  l.rope_derotate_output = derotate;
  return l;
}

const std::vector<int32_t> kPositions = {0, 1, 7, 4095, 65537, 131071, 1 << 24, (1 << 24) + 3,
                                         2147483647};

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  swa_test::UniformReal<float> u(-3, 3);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// One cache of `l`, one single-token sequence per position (each in its own
// slot, so every output sees exactly its own key); returns the step's output
// and the ring rows of every slot's token ([n, 2 heads (K, V unless shared), D]
// in the ring format's bytes).
void StepOnce(const swa_layer_desc_t& l, const void* k, const void* v, swa_dtype_t kv_dtype,
              std::vector<float>* out, std::vector<uint8_t>* rows) {
  const int n = int(kPositions.size()), d = int(l.head_dim);
  swa_config_t c;
  swa_config_init(&c);
  c.window = 4, c.max_slots = uint32_t(n), c.backend = SWA_BACKEND_CPU;
  c.num_layers = 1, c.layers = &l;
  swa_cache_t* cache = nullptr;
  ASSERT_EQ(swa_cache_create(&c, &cache), SWA_OK) << swa_last_error();
  swa_plan_t* plan = nullptr;
  ASSERT_EQ(swa_plan_create(cache, &plan), SWA_OK);
  std::vector<swa_seq_t> seqs;
  for (int i = 0; i < n; ++i) {
    uint32_t s;
    ASSERT_EQ(swa_slot_alloc(cache, &s), SWA_OK);
    seqs.push_back({s, 1, 1, 0});
  }
  ASSERT_EQ(swa_plan_build(plan, seqs.data(), uint32_t(n)), SWA_OK) << swa_last_error();
  const std::vector<float> q = Random(size_t(n) * 2 * d, 5);
  out->assign(q.size(), std::nanf(""));
  swa_step_args_t a;
  swa_step_args_init(&a);
  a.q = q.data(), a.k_new = k, a.v_new = l.shared_kv ? nullptr : v, a.kv_dtype = kv_dtype;
  a.out = out->data(), a.positions = kPositions.data();
  ASSERT_EQ(swa_step(cache, plan, &a), SWA_OK) << swa_last_error();
  swa_tensor_view_t view;
  view.struct_size = sizeof view;
  ASSERT_EQ(swa_cache_layer_view(cache, 0, &view), SWA_OK);
  // Ring [slots, R, heads, vec]: row 0 of each slot holds its one token.
  const size_t row_bytes = size_t(view.strides[1]);
  rows->clear();
  for (int i = 0; i < n; ++i) {
    const uint8_t* p = static_cast<const uint8_t*>(view.data) + seqs[i].slot * view.strides[0];
    rows->insert(rows->end(), p, p + row_bytes);
  }
  swa_plan_destroy(plan);
  swa_cache_destroy(cache);
}

swa_status_t Apply(const swa_layer_desc_t& l, void* x, swa_dtype_t dtype, int64_t tokens,
                   uint32_t heads, const int32_t* pos, uint32_t inverse) {
  swa_rope_args_t a;
  swa_rope_args_init(&a);
  a.layer = &l, a.x = x, a.dtype = dtype, a.tokens = tokens, a.heads = heads;
  a.positions = pos, a.inverse = inverse;
  return swa_rope_apply(&a);
}

class RopeApply : public ::testing::TestWithParam<RopeCase> {};

// FP32: the K rows the step stored equal swa_rope_apply's forward rotation.
TEST_P(RopeApply, ForwardEqualsTheStepsKeysFp32) {
  const RopeCase rc = GetParam();
  const swa_layer_desc_t l = Layer(rc, SWA_FORMAT_FP32, false, false);
  const int n = int(kPositions.size()), d = rc.head_dim;
  const std::vector<float> k = Random(size_t(n) * 2 * d, 1), v = Random(k.size(), 2);
  std::vector<float> out;
  std::vector<uint8_t> rows;
  StepOnce(l, k.data(), v.data(), SWA_DTYPE_FP32, &out, &rows);
  std::vector<float> mine = k;
  ASSERT_EQ(Apply(l, mine.data(), SWA_DTYPE_FP32, n, 2, kPositions.data(), 0), SWA_OK)
      << swa_last_error();
  ASSERT_NE(mine, k);
  const size_t row = rows.size() / size_t(n);  // K (2 heads) then V (2 heads)
  for (int t = 0; t < n; ++t)
    ASSERT_EQ(0, std::memcmp(rows.data() + t * row, mine.data() + size_t(t) * 2 * d, 2 * d * 4))
        << rc.name << ": position " << kPositions[t];
}

// BF16 keys on a BF16 ring: widened, rotated in FP32, rounded to nearest even.
TEST_P(RopeApply, ForwardEqualsTheStepsKeysBf16) {
  const RopeCase rc = GetParam();
  const swa_layer_desc_t l = Layer(rc, SWA_FORMAT_BF16, false, false);
  const int n = int(kPositions.size()), d = rc.head_dim;
  const std::vector<float> kf = Random(size_t(n) * 2 * d, 3);
  std::vector<uint16_t> k(kf.size()), v(kf.size(), 0x3F80);
  for (size_t i = 0; i < kf.size(); ++i) {
    uint32_t b;
    std::memcpy(&b, &kf[i], 4);
    k[i] = uint16_t(b >> 16);
  }
  std::vector<float> out;
  std::vector<uint8_t> rows;
  StepOnce(l, k.data(), v.data(), SWA_DTYPE_BF16, &out, &rows);
  std::vector<uint16_t> mine = k;
  ASSERT_EQ(Apply(l, mine.data(), SWA_DTYPE_BF16, n, 2, kPositions.data(), 0), SWA_OK)
      << swa_last_error();
  const size_t row = rows.size() / size_t(n);
  for (int t = 0; t < n; ++t)
    ASSERT_EQ(0, std::memcmp(rows.data() + t * row, mine.data() + size_t(t) * 2 * d, 2 * d * 2))
        << rc.name << ": position " << kPositions[t];
}

// A de-rotating shared-K/V layer with one key per sequence outputs that key
// (FP32 ring) rotated back: swa_rope_apply's inverse of its forward rotation.
TEST_P(RopeApply, InverseEqualsTheStepsDerotation) {
  const RopeCase rc = GetParam();
  const swa_layer_desc_t l = Layer(rc, SWA_FORMAT_FP32, true, true);
  const int n = int(kPositions.size()), d = rc.head_dim;
  const std::vector<float> k = Random(size_t(n) * 2 * d, 4);
  std::vector<float> out;
  std::vector<uint8_t> rows;
  StepOnce(l, k.data(), nullptr, SWA_DTYPE_FP32, &out, &rows);
  std::vector<float> mine = k;
  ASSERT_EQ(Apply(l, mine.data(), SWA_DTYPE_FP32, n, 2, kPositions.data(), 0), SWA_OK);
  ASSERT_EQ(Apply(l, mine.data(), SWA_DTYPE_FP32, n, 2, kPositions.data(), 1), SWA_OK);
  // q_heads = kv_heads = 2: output head h attends over key head h.
  ASSERT_EQ(mine.size(), out.size());
  for (size_t i = 0; i < out.size(); ++i)
    ASSERT_EQ(out[i], mine[i]) << rc.name << ": position " << kPositions[i / (2 * d)]
                               << " element " << i % (2 * d);
}

// The table is the reference's FP32 frequencies and factor.
TEST_P(RopeApply, TableMatchesTheReference) {
  const RopeCase rc = GetParam();
  const swa_layer_desc_t l = Layer(rc, SWA_FORMAT_FP32, false, false);
  swa_reference::Rope ref;
  ref.style = rc.style, ref.first = rc.first, ref.dims = rc.dims, ref.theta = 150000.0f;
  ref.yarn_factor = rc.yarn_factor, ref.beta_fast = rc.beta_fast, ref.beta_slow = rc.beta_slow;
  ref.original_max = 4096, ref.truncate = rc.truncate, ref.attention_factor = rc.attention_factor;
  std::vector<float> f(size_t(rc.dims / 2) + 1, -1.0f);
  swa_rope_info_t info;
  info.struct_size = sizeof info;
  ASSERT_EQ(swa_rope_table(&l, f.data(), uint32_t(f.size()), &info), SWA_OK) << swa_last_error();
  EXPECT_EQ(info.style, rc.style);
  EXPECT_EQ(info.first_dim, uint32_t(rc.first));
  EXPECT_EQ(info.dims, uint32_t(rc.dims));
  EXPECT_EQ(info.derotate_output, 0u);
  EXPECT_FLOAT_EQ(info.attention_factor, ref.Factor());
  const std::vector<float> want = ref.InvFreq();
  for (int i = 0; i < rc.dims / 2; ++i)
    EXPECT_NEAR(f[i], want[i], 2e-7 * want[i]) << rc.name << " frequency " << i;
  EXPECT_EQ(f.back(), -1.0f) << "written past dims / 2";
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RopeApply,
    ::testing::Values(RopeCase{"neox_full", SWA_ROPE_NEOX, 0, 64, 64, 0, 32, 1, true, 0},
                      RopeCase{"gptj_full", SWA_ROPE_GPTJ, 0, 64, 64, 0, 32, 1, true, 0},
                      RopeCase{"neox_leading", SWA_ROPE_NEOX, 0, 32, 96, 0, 32, 1, true, 0},
                      RopeCase{"gptj_middle", SWA_ROPE_GPTJ, 16, 32, 96, 0, 32, 1, true, 0},
                      RopeCase{"neox_trailing_yarn_truncated", SWA_ROPE_NEOX, 64, 64, 128, 16, 32,
                               1, true, 0},
                      RopeCase{"gptj_trailing_yarn_forced_factor", SWA_ROPE_GPTJ, 64, 64, 128, 16,
                               32, 1, true, 1.25f},
                      RopeCase{"neox_yarn_untruncated_betas", SWA_ROPE_NEOX, 0, 64, 64, 32, 24, 2,
                               false, 0}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(RopeTable, LayerWithoutRope) {
  swa_layer_desc_t l;
  swa_layer_desc_init(&l);
  swa_rope_info_t info;
  std::memset(&info, 0x5A, sizeof info);
  info.struct_size = sizeof info;
  float f = -1.0f;
  ASSERT_EQ(swa_rope_table(&l, &f, 1, &info), SWA_OK) << swa_last_error();
  EXPECT_EQ(info.style, SWA_ROPE_NONE);
  EXPECT_EQ(info.dims, 0u);
  EXPECT_EQ(info.attention_factor, 1.0f);
  EXPECT_EQ(f, -1.0f);
  // Rotating with it leaves x as it is.
  std::vector<float> x = Random(64, 9), before = x;
  const int32_t pos[1] = {5};
  l.head_dim = 64;
  ASSERT_EQ(Apply(l, x.data(), SWA_DTYPE_FP32, 1, 1, pos, 0), SWA_OK) << swa_last_error();
  EXPECT_EQ(x, before);
}

TEST(RopeTable, RefusalsNameTheValue) {
  swa_layer_desc_t l;
  swa_layer_desc_init(&l);
  l.rope_style = SWA_ROPE_NEOX, l.rope_dims = 64;
  std::vector<float> f(32, -1.0f);
  EXPECT_EQ(swa_rope_table(&l, f.data(), 31, nullptr), SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(swa_last_error()).find("capacity = 31"), std::string::npos)
      << swa_last_error();
  EXPECT_EQ(swa_rope_table(&l, nullptr, 32, nullptr), SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(swa_last_error()).find("inv_freq is NULL"), std::string::npos);
  EXPECT_EQ(swa_rope_table(nullptr, f.data(), 32, nullptr), SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(swa_last_error()).find("layer"), std::string::npos);
  l.rope_dims = 7;
  EXPECT_EQ(swa_rope_table(&l, f.data(), 32, nullptr), SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(swa_last_error()).find("rope_dims = 7"), std::string::npos)
      << swa_last_error();
  for (float x : f) EXPECT_EQ(x, -1.0f);
  l.rope_dims = 64;
  EXPECT_EQ(swa_rope_table(&l, nullptr, 0, nullptr), SWA_OK) << "capacity 0 reads nothing";
}

TEST(RopeApplyArgs, RefusalsNameTheValueAndChangeNothing) {
  swa_layer_desc_t l;
  swa_layer_desc_init(&l);
  l.head_dim = 64, l.rope_style = SWA_ROPE_GPTJ, l.rope_dims = 64;
  std::vector<float> x = Random(3 * 64, 11);
  const std::vector<float> before = x;
  const int32_t pos[3] = {1, -2, 3}, good[3] = {1, 2, 3};
  struct Bad {
    const char* what;
    void (*edit)(swa_rope_args_t*);
  };
  const Bad bads[] = {
      {"positions[1] = -2", [](swa_rope_args_t*) {}},
      {"tokens = -1", [](swa_rope_args_t* a) { a->tokens = -1; }},
      {"heads = 0", [](swa_rope_args_t* a) { a->heads = 0; }},
      {"inverse = 2", [](swa_rope_args_t* a) { a->inverse = 2; }},
      {"device = -2", [](swa_rope_args_t* a) { a->device = -2; }},
      {"dtype", [](swa_rope_args_t* a) { a->dtype = static_cast<swa_dtype_t>(7); }},
      {"x is NULL", [](swa_rope_args_t* a) { a->x = nullptr; }},
      {"positions is NULL", [](swa_rope_args_t* a) { a->positions = nullptr; }},
      {"layer", [](swa_rope_args_t* a) { a->layer = nullptr; }},
      {"heads", [](swa_rope_args_t* a) { a->heads = 1u << 31, a->tokens = int64_t(1) << 40; }},
  };
  for (const Bad& b : bads) {
    swa_rope_args_t a;
    swa_rope_args_init(&a);
    a.layer = &l, a.x = x.data(), a.tokens = 3, a.heads = 1, a.positions = pos;
    if (std::string(b.what) != "positions[1] = -2") a.positions = good;
    b.edit(&a);
    EXPECT_EQ(swa_rope_apply(&a), SWA_INVALID_ARGUMENT) << b.what;
    EXPECT_NE(std::string(swa_last_error()).find(b.what), std::string::npos)
        << b.what << ": " << swa_last_error();
    EXPECT_EQ(x, before) << b.what;
  }
}

}  // namespace
