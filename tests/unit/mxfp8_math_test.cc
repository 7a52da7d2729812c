// The host+device scalar math of src/common/mxfp8_math.h against the
// independent oracle of mxfp8_oracle.h: exhaustive over E4M3 codes and E8M0
// bytes, plus dense sweeps over FP32 inputs.
#include "common/mxfp8_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "unit/mxfp8_oracle.h"

namespace swa::codec {
namespace {

using test::Bits;
using test::E4m3Value;
using test::FromBits;
using test::NearestE4m3;

TEST(E4m3, EveryCodeDecodesToItsValue) {
  int nan_codes = 0;
  for (int c = 0; c < 256; ++c) {
    const double want = E4m3Value(static_cast<uint8_t>(c));
    const float got = E4m3ToFloat(static_cast<uint8_t>(c));
    if (std::isnan(want)) {
      ++nan_codes;
      EXPECT_EQ(Bits(got), kCanonicalNan) << "code " << c;
      continue;
    }
    EXPECT_EQ(static_cast<double>(got), want) << "code " << c;
    EXPECT_EQ(std::signbit(got), c >= 0x80) << "code " << c;  // -0.0 for 0x80
  }
  EXPECT_EQ(nan_codes, 2);
  EXPECT_EQ(E4m3ToFloat(0x7E), 448.0f);
  EXPECT_EQ(E4m3ToFloat(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(E4m3ToFloat(0x08), std::ldexp(1.0f, -6));
}

TEST(E4m3, EveryFiniteCodeReencodesToItself) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    const float v = static_cast<float>(E4m3Value(static_cast<uint8_t>(c)));
    EXPECT_EQ(E4m3Encode(v), c) << "value " << v;
    // The same value given unscaled by 2^k and scaled back on the exponent.
    for (int k : {-100, -20, 1, 30}) {
      const float x = std::ldexp(v, k);
      EXPECT_EQ(E4m3EncodeScaled(Bits(x), -k), c) << "value " << v << " k " << k;
    }
  }
}

TEST(E4m3, NanInputGivesNanCodeWithSign) {
  EXPECT_EQ(E4m3Encode(FromBits(0x7FC00000)), 0x7F);
  EXPECT_EQ(E4m3Encode(FromBits(0xFF800001)), 0xFF);
}

TEST(E4m3, MidpointsTiesAndNeighboursMatchNearest) {
  // Every midpoint between neighbouring values (a tie), and the floats just
  // around it, for both signs; then past the top (saturation).
  for (int c = 0; c < 0x7E; ++c) {
    const double mid = (E4m3Value(c) + E4m3Value(c + 1)) / 2;
    const float m = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(m), mid);
    for (float x : {m, std::nextafter(m, 0.0f), std::nextafter(m, 1000.0f)}) {
      EXPECT_EQ(E4m3Encode(x), NearestE4m3(x)) << x;
      EXPECT_EQ(E4m3Encode(-x), NearestE4m3(-x)) << -x;
    }
  }
  // Ties go to the even code: 2^-10 -> 0, 3 * 2^-10 -> 2^-8 (code 2), 17 -> 16, 19 -> 20.
  EXPECT_EQ(E4m3Encode(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(E4m3Encode(std::ldexp(-1.0f, -10)), 0x80);
  EXPECT_EQ(E4m3Encode(std::ldexp(3.0f, -10)), 0x02);
  EXPECT_EQ(E4m3Encode(17.0f), E4m3Encode(16.0f));
  EXPECT_EQ(E4m3Encode(19.0f), E4m3Encode(20.0f));
  // Saturation: never the NaN code from a finite input.
  for (float x : {448.0f, 460.0f, 464.0f, 465.0f, 480.0f, 511.9f, 1e6f, 3.4e38f,
                  FromBits(0x7F800000)}) {
    EXPECT_EQ(E4m3Encode(x), 0x7E) << x;
    EXPECT_EQ(E4m3Encode(-x), 0xFE) << x;
  }
  EXPECT_EQ(E4m3Encode(-0.0f), 0x80);
  EXPECT_EQ(E4m3Encode(FromBits(1)), 0x00);  // smallest FP32 subnormal
}

TEST(E4m3, DenseFp32SweepMatchesNearest) {
  // Every 1/64th of the FP32 bit patterns from 2^-14 to 512, plus random
  // scaled inputs, against the table search.
  for (uint32_t u = Bits(std::ldexp(1.0f, -14)); u <= Bits(512.0f); u += 61) {
    const float x = FromBits(u);
    ASSERT_EQ(E4m3Encode(x), NearestE4m3(x)) << x;
    ASSERT_EQ(E4m3Encode(-x), NearestE4m3(-x)) << -x;
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits(0, 0x7F7FFFFF);
  std::uniform_int_distribution<int> shift(-140, 140);
  for (int i = 0; i < 300000; ++i) {
    const float x = FromBits(bits(rng) | (i & 1 ? 0x80000000u : 0));
    const int k = shift(rng);
    const double y = std::ldexp(static_cast<double>(x), k);
    ASSERT_EQ(E4m3EncodeScaled(Bits(x), k), NearestE4m3(y)) << x << " * 2^" << k;
  }
}

TEST(E8m0, EveryByteDecodesExactly) {
  for (int b = 0; b < 255; ++b) {
    const float s = E8m0ToFloat(static_cast<uint8_t>(b));
    EXPECT_EQ(static_cast<double>(s), std::ldexp(1.0, b - 127)) << "byte " << b;
  }
  EXPECT_EQ(Bits(E8m0ToFloat(0)), 0x00400000u);  // 2^-127 is subnormal, not zero
  EXPECT_TRUE(std::isnan(E8m0ToFloat(0xFF)));
}

TEST(E8m0, Pow2CoversSubnormals) {
  for (int k = -149; k <= 127; ++k) EXPECT_EQ(static_cast<double>(Pow2(k)), std::ldexp(1.0, k));
  EXPECT_EQ(Pow2(-150), 0.0f);
  EXPECT_TRUE(std::isinf(Pow2(128)));
}

TEST(E8m0, ScaleSelectionMatchesDefinitions) {
  // Every exponent with the mantissas around the ceil threshold (1.75).
  const uint32_t mants[] = {0, 1, 0x5FFFFF, 0x600000, 0x600001, 0x7FFFFF};
  for (uint32_t e = 0; e < 255; ++e) {
    for (uint32_t m : mants) {
      const float amax = FromBits((e << 23) | m);
      for (bool ceil : {true, false}) {
        float block[32] = {};
        block[5] = -amax;
        EXPECT_EQ(E8m0ForAmax(Bits(amax), ceil), test::ScaleByteOracle(block, 32, ceil))
            << "amax " << amax << " ceil " << ceil;
      }
    }
  }
  EXPECT_EQ(E8m0ForAmax(Bits(448.0f), true), 127);  // 448 needs no scaling
  EXPECT_EQ(E8m0ForAmax(Bits(449.0f), true), 128);
  EXPECT_EQ(E8m0ForAmax(Bits(449.0f), false), 127);
  EXPECT_EQ(E8m0ForAmax(0, true), 0);
  EXPECT_EQ(E8m0ForAmax(0x7F800000, true), 0xFF);
  EXPECT_EQ(E8m0ForAmax(0xFFC00000, false), 0xFF);
  EXPECT_EQ(E8m0ForAmax(Bits(3.4e38f), true), 247);
}

TEST(Decode, EveryCodeTimesEveryScale) {
  for (int s = 0; s < 256; ++s)
    for (int c = 0; c < 256; ++c)
      ASSERT_EQ(Bits(DecodeElement(c, s)), test::DecodeOracleBits(c, s))
          << "code " << c << " scale " << s;
}

TEST(Bf16, RoundsToNearestEven) {
  std::mt19937 rng(11);
  for (int i = 0; i < 200000; ++i) {
    const float f = FromBits(static_cast<uint32_t>(rng()));
    ASSERT_EQ(Bf16FromFloat(f), test::Bf16Oracle(f)) << std::hex << Bits(f);
  }
  EXPECT_EQ(Bf16FromFloat(FromBits(0x3F808000)), 0x3F80);  // tie, even stays
  EXPECT_EQ(Bf16FromFloat(FromBits(0x3F818000)), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(Bf16FromFloat(FromBits(0x7F7FFFFF)), 0x7F80);  // overflows to Inf
  EXPECT_EQ(Bf16FromFloat(FromBits(0x7FFFFFFF)), 0x7FFF);  // NaN stays NaN
  EXPECT_EQ(Bf16FromFloat(FromBits(0xFF800001)), 0xFFC0);  // signalling -> quiet
}

}  // namespace
}  // namespace swa::codec
