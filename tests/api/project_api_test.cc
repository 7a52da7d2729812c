// swa_project through the public API on the CPU backend: arguments and a
// small exact case (values chosen so that every product and sum is exact).
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "swacache.h"

namespace {

uint16_t Bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);  // exact for the small integers used here
}

class ProjectApi : public ::testing::Test {
 protected:
  void SetUp() override {
    swa_layer_desc_t d;
    swa_layer_desc_init(&d);
    d.q_heads = 2;
    d.kv_heads = 1;
    d.head_dim = 32;
    swa_config_t c;
    swa_config_init(&c);
    c.backend = SWA_BACKEND_CPU;
    c.max_slots = 2;
    c.num_layers = 1;
    c.layers = &d;
    ASSERT_EQ(swa_cache_create(&c, &cache_), SWA_OK) << swa_last_error();
  }
  void TearDown() override { swa_cache_destroy(cache_); }
  swa_cache_t* cache_ = nullptr;
};

TEST_F(ProjectApi, ExactSmallIntegerProduct) {
  const uint32_t t = 3, k = 5, q = 2, kv = 4, n = q + kv;
  std::vector<uint16_t> h(t * k), w_out_in(n * k), w_in_out(k * n);
  for (uint32_t i = 0; i < t; ++i)
    for (uint32_t j = 0; j < k; ++j) h[i * k + j] = Bf16(float(int(i * 7 + j * 3) % 11 - 5));
  for (uint32_t c = 0; c < n; ++c)
    for (uint32_t j = 0; j < k; ++j) {
      const float v = float(int(c * 5 + j * 2) % 9 - 4);
      w_out_in[c * k + j] = Bf16(v);
      w_in_out[j * n + c] = Bf16(v);
    }
  for (swa_weight_layout_t layout : {SWA_WEIGHT_OUT_IN, SWA_WEIGHT_IN_OUT}) {
    std::vector<float> out(t * n, -12345.0f);
    swa_project_args_t a;
    swa_project_args_init(&a);
    a.hidden = h.data();
    a.weight = layout == SWA_WEIGHT_OUT_IN ? w_out_in.data() : w_in_out.data();
    a.weight_layout = layout;
    a.out = out.data();
    a.n_tokens = t;
    a.hidden_dim = k;
    a.q_dim = q;
    a.kv_dim = kv;
    ASSERT_EQ(swa_project(cache_, &a), SWA_OK) << swa_last_error();
    for (uint32_t i = 0; i < t; ++i)
      for (uint32_t c = 0; c < n; ++c) {
        int ref = 0;
        for (uint32_t j = 0; j < k; ++j)
          ref += (int(i * 7 + j * 3) % 11 - 5) * (int(c * 5 + j * 2) % 9 - 4);
        EXPECT_EQ(out[i * n + c], float(ref)) << "layout " << layout << " (" << i << ", " << c << ")";
      }
  }
}

TEST_F(ProjectApi, RejectsBadArgumentsAndWritesNothing) {
  std::vector<uint16_t> h(4 * 8, Bf16(1)), w(8 * 8, Bf16(1));
  std::vector<float> out(4 * 8, 7.0f);
  auto base = [&] {
    swa_project_args_t a;
    swa_project_args_init(&a);
    a.hidden = h.data();
    a.weight = w.data();
    a.out = out.data();
    a.n_tokens = 4;
    a.hidden_dim = 8;
    a.q_dim = 4;
    a.kv_dim = 4;
    return a;
  };
  struct Bad {
    const char* what;
    void (*edit)(swa_project_args_t*);
  } bads[] = {
      {"hidden", [](swa_project_args_t* a) { a->hidden = nullptr; }},
      {"weight", [](swa_project_args_t* a) { a->weight = nullptr; }},
      {"out", [](swa_project_args_t* a) { a->out = nullptr; }},
      {"hidden_dim", [](swa_project_args_t* a) { a->hidden_dim = 0; }},
      {"q_dim + kv_dim", [](swa_project_args_t* a) { a->q_dim = a->kv_dim = 0; }},
      {"out_dtype", [](swa_project_args_t* a) { a->out_dtype = static_cast<swa_dtype_t>(7); }},
      {"weight_layout",
       [](swa_project_args_t* a) { a->weight_layout = static_cast<swa_weight_layout_t>(2); }},
      {"is negative", [](swa_project_args_t* a) { a->n_tokens = -1; }},
      {"overflow", [](swa_project_args_t* a) {
         a->n_tokens = 0x7FFFFFFF;
         a->hidden_dim = 0xFFFFFFFFu;
         a->q_dim = 0xFFFFFFFFu;
       }},
  };
  for (const Bad& b : bads) {
    swa_project_args_t a = base();
    b.edit(&a);
    EXPECT_EQ(swa_project(cache_, &a), SWA_INVALID_ARGUMENT) << b.what;
    EXPECT_NE(std::strstr(swa_last_error(), b.what), nullptr)
        << b.what << ": " << swa_last_error();
  }
  for (float v : out) ASSERT_EQ(v, 7.0f);
  swa_project_args_t a = base();
  a.struct_size = 3;
  EXPECT_EQ(swa_project(cache_, &a), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_project(nullptr, &a), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_project(cache_, nullptr), SWA_INVALID_ARGUMENT);
  a = base();
  a.n_tokens = 0;  // no-op, pointers may be anything
  a.hidden = nullptr;
  EXPECT_EQ(swa_project(cache_, &a), SWA_OK);
}

}  // namespace
