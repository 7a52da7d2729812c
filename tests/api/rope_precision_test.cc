// RoPE at large positions against an FP64 rotation written here
// (docs/semantics.md, "RoPE inside the step"): the angle is FP32,
// a = fl(fl(p) * f_i) with f_i the layer's FP32 table (swa_rope_table), so
// past 2^24 positions round to FP32 (p = 2^24 + 1 rotates exactly as 2^24);
// cos and sin of that angle, times the attention factor, then the pair
// rotation, within a few FP32 ulps of the FP64 result at every position up to
// 2^31 - 1, forward and inverse (the inverse undoes the forward to rounding).
// Also the YaRN factor's edges: 0, 0.5 and 1 are plain RoPE (the table of
// theta^(-2i/n), factor 1); negative, NaN and infinite factors are refused
// naming rope_yarn_factor.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "swacache.h"

namespace {

constexpr int kD = 64, kFirst = 16, kDims = 32;

swa_layer_desc_t Layer(swa_rope_style_t style, float yarn) {
  swa_layer_desc_t l;
  swa_layer_desc_init(&l);
  l.q_heads = 1, l.kv_heads = 1, l.head_dim = kD;
  l.rope_style = style, l.rope_first_dim = kFirst, l.rope_dims = kDims;
  l.rope_theta = 500000.0f, l.rope_yarn_factor = yarn;
  l.rope_yarn_original_max_positions = 4096;
  return l;
}

swa_status_t Apply(const swa_layer_desc_t& l, float* x, int64_t tokens, const int32_t* pos,
                   uint32_t inverse) {
  swa_rope_args_t a;
  swa_rope_args_init(&a);
  a.layer = &l, a.x = x, a.tokens = tokens, a.heads = 1, a.positions = pos, a.inverse = inverse;
  return swa_rope_apply(&a);
}

const std::vector<int32_t> kPositions = {0,         1,         4095,       (1 << 24) - 1,
                                         1 << 24,   (1 << 24) + 1, (1 << 24) + 2, 1 << 30,
                                         2147483520, 2147483647};

TEST(RopePrecision, LargePositionsMatchTheFp64RotationOfTheFp32Angle) {
  for (swa_rope_style_t style : {SWA_ROPE_GPTJ, SWA_ROPE_NEOX})
    for (float yarn : {0.0f, 8.0f}) {
      const swa_layer_desc_t l = Layer(style, yarn);
      std::vector<float> f(kDims / 2);
      swa_rope_info_t info;
      info.struct_size = sizeof info;
      ASSERT_EQ(swa_rope_table(&l, f.data(), uint32_t(f.size()), &info), SWA_OK);
      const int n = int(kPositions.size());
      std::mt19937_64 rng(9);
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      std::vector<float> x(size_t(n) * kD);
      for (float& v : x) v = u(rng);
      std::vector<float> fwd = x;
      ASSERT_EQ(Apply(l, fwd.data(), n, kPositions.data(), 0), SWA_OK) << swa_last_error();
      std::vector<float> back = fwd;
      ASSERT_EQ(Apply(l, back.data(), n, kPositions.data(), 1), SWA_OK) << swa_last_error();
      for (int t = 0; t < n; ++t) {
        const float* in = &x[size_t(t) * kD];
        const float* got = &fwd[size_t(t) * kD];
        for (int e = 0; e < kD; ++e)
          if (e < kFirst || e >= kFirst + kDims) ASSERT_EQ(got[e], in[e]) << "dim " << e;
        for (int i = 0; i < kDims / 2; ++i) {
          const int a = style == SWA_ROPE_GPTJ ? kFirst + 2 * i : kFirst + i;
          const int b = style == SWA_ROPE_GPTJ ? a + 1 : a + kDims / 2;
          const float angle = static_cast<float>(kPositions[t]) * f[i];  // FP32, as documented
          const double c = info.attention_factor * std::cos(double(angle));
          const double s = info.attention_factor * std::sin(double(angle));
          const double wa = in[a] * c - in[b] * s, wb = in[b] * c + in[a] * s;
          const double tol = 4 * std::ldexp(1.0, -24) * info.attention_factor *
                             (std::fabs(in[a]) + std::fabs(in[b]));
          EXPECT_NEAR(got[a], wa, tol) << "position " << kPositions[t] << " pair " << i;
          EXPECT_NEAR(got[b], wb, tol) << "position " << kPositions[t] << " pair " << i;
          // The inverse (no factor, -a) brings it back to the factor times x.
          const double back_tol = 8 * std::ldexp(1.0, -24) * info.attention_factor *
                                  (std::fabs(in[a]) + std::fabs(in[b]));
          EXPECT_NEAR(back[size_t(t) * kD + a], info.attention_factor * in[a], back_tol);
          EXPECT_NEAR(back[size_t(t) * kD + b], info.attention_factor * in[b], back_tol);
        }
      }
      // 2^24 + 1 is 2^24 in FP32: the same rotation, bit for bit.
      std::vector<float> same(2 * size_t(kD));
      std::memcpy(same.data(), x.data(), kD * sizeof(float));
      std::memcpy(same.data() + kD, x.data(), kD * sizeof(float));
      const int32_t pair[2] = {1 << 24, (1 << 24) + 1};
      ASSERT_EQ(Apply(l, same.data(), 2, pair, 0), SWA_OK);
      EXPECT_EQ(std::memcmp(same.data(), same.data() + kD, kD * sizeof(float)), 0);
    }
}

TEST(RopePrecision, YarnFactorEdges) {
  const swa_layer_desc_t plain = Layer(SWA_ROPE_NEOX, 0.0f);
  std::vector<float> want(kDims / 2), got(kDims / 2);
  swa_rope_info_t info;
  info.struct_size = sizeof info;
  ASSERT_EQ(swa_rope_table(&plain, want.data(), uint32_t(want.size()), &info), SWA_OK);
  for (int i = 0; i < kDims / 2; ++i)
    EXPECT_NEAR(want[i], std::pow(500000.0, -2.0 * i / kDims), 2e-7 * want[i]) << i;
  EXPECT_EQ(info.attention_factor, 1.0f);
  for (float f : {0.5f, 1.0f}) {
    const swa_layer_desc_t l = Layer(SWA_ROPE_NEOX, f);
    ASSERT_EQ(swa_rope_table(&l, got.data(), uint32_t(got.size()), &info), SWA_OK) << f;
    EXPECT_EQ(got, want) << "yarn factor " << f;
    EXPECT_EQ(info.attention_factor, 1.0f) << "yarn factor " << f;
  }
  for (float f : {-1.0f, std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::infinity()}) {
    const swa_layer_desc_t l = Layer(SWA_ROPE_NEOX, f);
    std::fill(got.begin(), got.end(), -3.0f);
    EXPECT_EQ(swa_rope_table(&l, got.data(), uint32_t(got.size()), &info), SWA_INVALID_ARGUMENT)
        << f;
    EXPECT_NE(std::string(swa_last_error()).find("rope_yarn_factor"), std::string::npos)
        << swa_last_error();
    EXPECT_EQ(got[0], -3.0f) << "written on a refusal";
    swa_config_t c;
    swa_config_init(&c);
    c.max_slots = 1, c.backend = SWA_BACKEND_CPU, c.num_layers = 1, c.layers = &l;
    swa_cache_t* cache = nullptr;
    EXPECT_EQ(swa_cache_create(&c, &cache), SWA_INVALID_ARGUMENT) << f;
    EXPECT_EQ(cache, nullptr);
    EXPECT_NE(std::string(swa_last_error()).find("rope_yarn_factor"), std::string::npos)
        << swa_last_error();
  }
}

}  // namespace
