// RoPE inside the step, checked for exact equality: a cache that rotates q and
// the new keys itself (rope_style set) stores the same ring bytes and returns
// the same outputs, bit for bit, as a cache without RoPE fed with inputs that
// the test rotated (its own FP32 rotation, tests/common dense reference), for
// both pairing styles, partial dims, YaRN, the ring and staged paths and a
// rewind; the output de-rotation equals the test's own. Also: the layer's
// RoPE and soft-cap fields are validated at cache creation, and 0.1-sized
// swa_layer_desc_t / swa_step_args_t are still accepted.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "api/forced_attention_path.h"
#include "api/test_layers.h"
#include "common/dense_reference.h"
#include "gtest/gtest.h"
#include "swacache.h"
#include "test_random.h"

namespace {

using swa_reference::Rope;

struct RopeCase {
  const char* name;
  swa_rope_style_t style;
  int first, dims, head_dim;
  float yarn_factor;
  bool derotate;
  swa_format_t format;
};

class Pair {
 public:
  Pair(const RopeCase& rc, bool rope_on) : rc_(rc) {
    swa_layer_desc_init(&l_);
    l_.q_heads = 4, l_.kv_heads = 2, l_.head_dim = uint32_t(rc.head_dim), l_.shared_kv = 1;
    l_.kv_format = rc.format;
    if (rope_on) {
      l_.rope_style = rc.style, l_.rope_first_dim = uint32_t(rc.first);
      l_.rope_dims = uint32_t(rc.dims), l_.rope_theta = 50000.0f;
      l_.rope_yarn_factor = rc.yarn_factor, l_.rope_yarn_original_max_positions = 64;
      l_.rope_derotate_output = rc.derotate;
    }
    swa_config_t c;
    swa_config_init(&c);
    c.window = 8, c.draft_tokens = 2, c.max_slots = 2, c.backend = SWA_BACKEND_CPU;
    c.num_layers = 1, c.layers = &l_;
    EXPECT_EQ(swa_cache_create(&c, &cache_), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_plan_create(cache_, &plan_), SWA_OK);
    uint32_t slot;
    EXPECT_EQ(swa_slot_alloc(cache_, &slot), SWA_OK);
  }
  ~Pair() {
    swa_plan_destroy(plan_);
    swa_cache_destroy(cache_);
  }
  void Step(int q_start, int n, const std::vector<float>& q, const std::vector<float>& k,
            std::vector<float>* out) {
    const swa_seq_t seq{0, n, q_start + n, 0};
    ASSERT_EQ(swa_plan_build(plan_, &seq, 1), SWA_OK) << swa_last_error();
    out->assign(q.size(), -7.0f);
    swa_step_args_t a;
    swa_step_args_init(&a);
    a.q = q.data(), a.k_new = k.data(), a.out = out->data();
    ASSERT_EQ(swa_step(cache_, plan_, &a), SWA_OK) << swa_last_error();
  }
  std::vector<uint8_t> Ring() const {
    swa_tensor_view_t v;
    v.struct_size = sizeof v;
    EXPECT_EQ(swa_cache_layer_view(cache_, 0, &v), SWA_OK);
    const uint8_t* p = static_cast<const uint8_t*>(v.data);
    return std::vector<uint8_t>(p, p + v.shape[1] * v.strides[1]);
  }

 private:
  RopeCase rc_;
  swa_layer_desc_t l_;
  swa_cache_t* cache_ = nullptr;
  swa_plan_t* plan_ = nullptr;
};

class StepRopeExact : public ::testing::TestWithParam<RopeCase> {};

TEST_P(StepRopeExact, EqualsRotatingFirst) {
  const RopeCase rc = GetParam();
  Pair on(rc, true), off(rc, false);
  Rope rope;
  rope.style = rc.style, rope.first = rc.first, rope.dims = rc.dims, rope.theta = 50000.0f;
  rope.yarn_factor = rc.yarn_factor, rope.original_max = 64, rope.derotate = rc.derotate;
  std::mt19937 rng(3);
  swa_test::UniformReal<float> u(-2, 2);
  const int d = rc.head_dim;
  // (q_start, tokens): staged prefill of 11, ring-only decode of 3 (two of them
  // rejected), the rewind that rewrites them, a staged chunk, more decode.
  const int steps[][2] = {{0, 11}, {11, 3}, {12, 3}, {15, 9}, {24, 3}, {25, 1}};
  for (const auto& st : steps) {
    const int q_start = st[0], n = st[1];
    std::vector<float> q(size_t(n) * 4 * d), k(size_t(n) * 2 * d);
    for (float& x : q) x = u(rng);
    for (float& x : k) x = u(rng);
    std::vector<float> qr = q, kr = k;
    for (int t = 0; t < n; ++t) {
      rope.Rotate(&qr[size_t(t) * 4 * d], 4, d, q_start + t);
      rope.Rotate(&kr[size_t(t) * 2 * d], 2, d, q_start + t);
    }
    std::vector<float> out_on, out_off;
    on.Step(q_start, n, q, k, &out_on);
    off.Step(q_start, n, qr, kr, &out_off);
    ASSERT_EQ(on.Ring(), off.Ring()) << rc.name << " step at " << q_start;
    for (size_t i = 0; i < out_on.size(); ++i) {
      if (!rc.derotate) {
        ASSERT_EQ(out_on[i], out_off[i]) << rc.name << " at " << q_start << " element " << i;
        continue;
      }
      // De-rotation: the test rotates its output back in FP64.
      const size_t row = i / size_t(4 * d);
      if (i % size_t(4 * d) != 0) continue;
      std::vector<double> back(out_off.begin() + row * 4 * d, out_off.begin() + (row + 1) * 4 * d);
      rope.Derotate(back.data(), 4, d, q_start + int(row));
      for (int j = 0; j < 4 * d; ++j)
        ASSERT_NEAR(out_on[row * 4 * d + j], back[j], 2e-6) << rc.name << " row " << row;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Styles, StepRopeExact,
    ::testing::Values(RopeCase{"neox_full", SWA_ROPE_NEOX, 0, 64, 64, 0, false, SWA_FORMAT_MXFP8},
                      RopeCase{"gptj_last", SWA_ROPE_GPTJ, 32, 32, 64, 0, false, SWA_FORMAT_MXFP8},
                      RopeCase{"neox_mid_yarn", SWA_ROPE_NEOX, 16, 32, 96, 8, false,
                               SWA_FORMAT_BF16},
                      RopeCase{"gptj_derotate", SWA_ROPE_GPTJ, 32, 32, 64, 4, true,
                               SWA_FORMAT_FP32}),
    [](const auto& info) { return std::string(info.param.name); });

swa_status_t Create(const swa_layer_desc_t& l) {
  swa_config_t c;
  swa_config_init(&c);
  c.backend = SWA_BACKEND_CPU, c.max_slots = 1, c.num_layers = 1, c.layers = &l;
  swa_cache_t* cache = nullptr;
  const swa_status_t st = swa_cache_create(&c, &cache);
  swa_cache_destroy(cache);
  return st;
}

TEST(StepRopeConfig, RejectsBadFieldsNamingThem) {
  struct Bad {
    const char* what;
    void (*edit)(swa_layer_desc_t*);
  };
  const Bad bads[] = {
      {"rope_style", [](swa_layer_desc_t* l) { l->rope_style = static_cast<swa_rope_style_t>(9); }},
      {"rope_dims", [](swa_layer_desc_t* l) { l->rope_style = SWA_ROPE_NEOX, l->rope_dims = 0; }},
      {"rope_dims", [](swa_layer_desc_t* l) { l->rope_style = SWA_ROPE_NEOX, l->rope_dims = 7; }},
      {"exceeds head_dim",
       [](swa_layer_desc_t* l) {
         l->rope_style = SWA_ROPE_GPTJ, l->rope_dims = 64, l->rope_first_dim = 480;
       }},
      {"rope_theta",
       [](swa_layer_desc_t* l) { l->rope_style = SWA_ROPE_NEOX, l->rope_dims = 64, l->rope_theta = 0; }},
      {"rope_yarn_original_max_positions",
       [](swa_layer_desc_t* l) {
         l->rope_style = SWA_ROPE_NEOX, l->rope_dims = 64, l->rope_yarn_factor = 4;
         l->rope_yarn_original_max_positions = 0;
       }},
      {"beta_slow",
       [](swa_layer_desc_t* l) {
         l->rope_style = SWA_ROPE_NEOX, l->rope_dims = 64, l->rope_yarn_factor = 4;
         l->rope_yarn_beta_slow = 64;
       }},
      {"rope_derotate_output", [](swa_layer_desc_t* l) { l->rope_derotate_output = 2; }},
      {"logit_softcap", [](swa_layer_desc_t* l) { l->logit_softcap = -1; }},
      {"logit_softcap", [](swa_layer_desc_t* l) { l->logit_softcap = NAN; }},
  };
  for (const Bad& b : bads) {
    swa_layer_desc_t l;
    swa_layer_desc_init(&l);
    b.edit(&l);
    EXPECT_EQ(Create(l), SWA_INVALID_ARGUMENT) << b.what;
    EXPECT_NE(std::string(swa_last_error()).find(b.what), std::string::npos)
        << b.what << ": " << swa_last_error();
  }
  swa_layer_desc_t ok;
  swa_layer_desc_init(&ok);
  ok.rope_style = SWA_ROPE_GPTJ, ok.rope_first_dim = 448, ok.rope_dims = 64;
  ok.logit_softcap = 50;
  EXPECT_EQ(Create(ok), SWA_OK) << swa_last_error();
}

// A caller compiled against 0.1 passes the shorter structs: accepted, with
// the new fields at their defaults (no RoPE, no soft-cap, no lse).
TEST(StepRopeConfig, OlderStructSizesAreAccepted) {
  // sizeof in 0.1: up to the first appended field, padded to the alignment
  // (56 and 96 on x86-64; tests/api/struct_versions_test.cc has every size).
  const auto v1 = [](size_t end, size_t align) { return (end + align - 1) / align * align; };
  const size_t desc_v1 = v1(offsetof(swa_layer_desc_t, rope_style), alignof(swa_layer_desc_t));
  const size_t args_v1 = v1(offsetof(swa_step_args_t, lse), alignof(swa_step_args_t));
  std::vector<unsigned char> raw(2 * desc_v1, 0xAB);  // two layers, 0xAB after each
  for (int i = 0; i < 2; ++i) {
    swa_layer_desc_t l;
    swa_layer_desc_init(&l);
    l.q_heads = 2, l.head_dim = 32, l.kv_format = SWA_FORMAT_FP32;
    l.struct_size = desc_v1;
    std::memcpy(&raw[i * desc_v1], &l, desc_v1);
  }
  swa_config_t c;
  swa_config_init(&c);
  c.backend = SWA_BACKEND_CPU, c.max_slots = 1, c.num_layers = 2;
  c.layers = reinterpret_cast<const swa_layer_desc_t*>(raw.data());
  swa_cache_t* cache = nullptr;
  ASSERT_EQ(swa_cache_create(&c, &cache), SWA_OK) << swa_last_error();
  uint32_t slot;
  ASSERT_EQ(swa_slot_alloc(cache, &slot), SWA_OK);
  swa_plan_t* plan = nullptr;
  ASSERT_EQ(swa_plan_create(cache, &plan), SWA_OK);
  const swa_seq_t seq{slot, 2, 2, 0};
  ASSERT_EQ(swa_plan_build(plan, &seq, 1), SWA_OK);
  std::vector<float> q(2 * 2 * 32, 0.5f), k(2 * 32, 0.25f), out(q.size());
  std::vector<unsigned char> args(sizeof(swa_step_args_t), 0xCD);  // lse bytes are garbage
  swa_step_args_t a;
  swa_step_args_init(&a);
  a.struct_size = args_v1, a.q = q.data(), a.k_new = k.data(), a.out = out.data();
  std::memcpy(args.data(), &a, args_v1);
  EXPECT_EQ(swa_step(cache, plan, reinterpret_cast<const swa_step_args_t*>(args.data())), SWA_OK)
      << swa_last_error();
  EXPECT_FLOAT_EQ(out[0], 0.25f);
  swa_plan_destroy(plan);
  swa_cache_destroy(cache);
}

}  // namespace
