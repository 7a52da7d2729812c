// The SIMD encoders' paths for whole groups of blocks (AVX2: 16 blocks of a
// 512-value stretch, whose declined blocks are redone one at a time on
// another path) against the scalar reference, byte for byte. Groups are built so that most blocks qualify,
// then one or more blocks are pushed across each limit of the path: the
// smallest magnitude 2^(s - 133) (exactly on it, half of it, one ulp below,
// 1.9375 times half of it and one BF16 ulp less (the BF16 path's own limit),
// zeros of both signs, subnormals), scale bytes below 7, NaN/Inf among
// huge values (where the magnitude limit alone would not decline them), the
// ceil rule's 1.75 boundary and floor mode's saturation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "unit/codec_inputs.h"
#include "unit/codec_simd_sets.h"
#include "unit/mxfp8_oracle.h"
#include "test_random.h"

namespace swa::codec {
namespace {

class GroupPath : public test::SimdSetTest {
 protected:
  // Encodes x (FP32 and its BF16 truncation) with both kernels, both modes.
  void Check(const std::vector<float>& x, uint32_t dim, const std::string& what) {
    const size_t n = x.size() / dim, vb = dim + dim / 32;
    const std::vector<uint16_t> h = test::ToBf16Bits(x);
    std::vector<uint8_t> a(n * vb), b(n * vb);
    for (bool ceil : {true, false}) {
      for (bool bf16 : {false, true}) {
        std::memset(a.data(), 0xA5, a.size());
        std::memset(b.data(), 0x5A, b.size());
        for (size_t v = 0; v < n; ++v) {
          const auto [bad_a, bad_b] = EncodeBoth(x.data(), h.data(), v, dim, ceil, bf16,
                                                 a.data(), b.data());
          ASSERT_EQ(bad_a, bad_b) << what << " vector " << v << " ceil " << ceil << " bf16 " << bf16;
        }
        for (size_t i = 0; i < a.size(); ++i)
          ASSERT_EQ(a[i], b[i]) << what << " byte " << i % vb << " of vector " << i / vb
                                << " ceil " << ceil << " bf16 " << bf16;
      }
    }
  }
};

INSTANTIATE_TEST_SUITE_P(Sets, GroupPath, test::AllSimdSets(), test::SimdSetName);

// Block of 32 values whose scale byte is s in floor mode (and s or s + 1 in
// ceil mode, by `base`): amax = base * 2^(s - 119) at a random place, the
// rest random in (-amax, amax) but not below 2^(s - 132), a few exact E4M3
// ties under scale s.
void FillBlock(std::mt19937& rng, int s, float base, float* v) {
  swa_test::UniformReal<float> r(-1.0f, 1.0f);
  const float amax = std::ldexp(base, s - 119), floor_mag = std::ldexp(1.0f, s - 132);
  for (int i = 0; i < 32; ++i) {
    const float y = amax * r(rng);
    v[i] = std::copysign(std::max(std::fabs(y), floor_mag), y);
  }
  for (int t = 0; t < 4; ++t) {
    const int c = std::uniform_int_distribution<int>(16, 0x7D)(rng);
    const float tie = static_cast<float>(
        std::ldexp((test::E4m3Value(c) + test::E4m3Value(c + 1)) / 2, s - 127));
    if (tie < amax) v[rng() % 32] = (rng() % 2) ? tie : -tie;
  }
  v[rng() % 32] = (rng() % 2) ? amax : -amax;
}

TEST_P(GroupPath, EveryLimitOfTheGroupPath) {
  std::mt19937 rng(12);
  const uint32_t dim = 512;
  const float bases[] = {1.5f, 1.75f, 1.9f, 1.0f, 1.9999999f};
  const float inf = std::numeric_limits<float>::infinity();
  constexpr int kVariants = 16;
  std::vector<float> x(dim * kVariants);
  for (int s = 0; s <= 246; ++s) {
    for (int var = 0; var < kVariants; ++var) {
      float* g = &x[var * dim];
      for (int blk = 0; blk < 16; ++blk) FillBlock(rng, s, bases[(blk + s) % 5], g + blk * 32);
      const int one = (s + var) % 16;  // the block that is pushed across a limit
      float* v = g + one * 32;
      // Its own limit in each mode, from the oracle's scale byte.
      const float lim_ceil = std::ldexp(1.0f, test::ScaleByteOracle(v, 32, true) - 133);
      const float lim_floor = std::ldexp(1.0f, test::ScaleByteOracle(v, 32, false) - 133);
      switch (var) {
        case 0: break;  // every block qualifies (from scale 7 up)
        case 1:         // every block holds its limit in both modes, exactly
          for (int blk = 0; blk < 16; ++blk) {
            float* w = g + blk * 32;
            w[3] = std::ldexp(1.0f, test::ScaleByteOracle(w, 32, true) - 133);
            w[5] = -std::ldexp(1.0f, test::ScaleByteOracle(w, 32, false) - 133);
          }
          break;
        case 2: v[7] = lim_ceil / 2; v[8] = -lim_floor / 2; break;  // a binade below
        case 3: v[7] = std::nextafter(lim_ceil, 0.0f); v[8] = -std::nextafter(lim_floor, 0.0f); break;
        case 4: v[9] = 0.0f; break;
        case 5: v[9] = -0.0f; break;
        case 6: v[9] = test::FromBits(1); break;  // the smallest subnormal
        case 7:                                   // four blocks with a zero
          for (int k = 0; k < 4; ++k) g[((one + 5 * k) % 16) * 32 + k] = k % 2 ? -0.0f : 0.0f;
          break;
        case 8:  // a block of scale byte 3
          for (int i = 0; i < 32; ++i) v[i] = std::ldexp(i % 2 ? -1.5f : 1.25f, 3 - 119);
          break;
        case 14:  // 1.9375 times half the limit: rounds up onto it, stays on the BF16 path
          v[10] = 0.96875f * lim_ceil;
          v[11] = -0.96875f * lim_floor;
          break;
        case 15:  // one BF16 ulp less: rounds to a subnormal, declined
          v[10] = (0.96875f - 0.00390625f) * lim_ceil;
          v[11] = -(0.96875f - 0.00390625f) * lim_floor;
          break;
        default: {  // huge values with Inf / NaN / nothing odd (scale bytes 246-247)
          for (int i = 0; i < 32; ++i)
            v[i] = std::numeric_limits<float>::max() * (i % 2 ? -0.75f : 1.0f) *
                   swa_test::UniformReal<float>(0.5f, 1.0f)(rng);
          const float odd[] = {inf, -inf, test::FromBits(0x7FC00000), test::FromBits(0xFF800001), 1.0f};
          const float o = odd[var - 9];
          if (o != 1.0f) v[rng() % 32] = o;
          break;
        }
      }
    }
    Check(x, dim, "scale " + std::to_string(s));
    if (HasFatalFailure()) return;
  }
}

// Many groups on the path: gaussian blocks at random magnitudes (scale bytes
// 20-240), a few values rounded onto ties, occasional zeros; and dims that
// hold several groups plus partial ones.
TEST_P(GroupPath, GaussianRowsAreBitIdentical) {
  std::mt19937 rng(13);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (uint32_t dim : {512u, 1024u, 1568u}) {
    const size_t n = 4096 * 512 / dim;
    std::vector<float> x(n * dim);
    for (size_t b = 0; b < x.size() / 32; ++b) {
      const int k = std::uniform_int_distribution<int>(-100, 100)(rng);
      for (int i = 0; i < 32; ++i) {
        float y = std::ldexp(normal(rng), k);
        if (rng() % 64 == 0) y = std::ldexp(std::nearbyint(std::ldexp(y, 4 - k)) + 0.5f, k - 4);
        if (rng() % 4096 == 0) y = 0.0f;
        x[b * 32 + i] = y;
      }
    }
    Check(x, dim, "dim " + std::to_string(dim));
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace swa::codec
