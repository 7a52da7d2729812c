// Random and adversarial MXFP8 blocks for the codec tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "unit/mxfp8_oracle.h"
#include "test_random.h"

namespace swa::test {

// Fills 32 floats with one of several adversarial patterns (chosen by `kind`,
// any int; taken modulo the number of patterns).
inline void AdversarialBlock(std::mt19937& rng, int kind, float* x) {
  std::uniform_int_distribution<uint32_t> any_bits(0, 0x7F7FFFFF);
  std::uniform_int_distribution<int> code(0, 0x7E), exp(-149, 127), coin(0, 1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float inf = std::numeric_limits<float>::infinity();
  auto sign = [&](float v) { return coin(rng) ? -v : v; };
  switch (kind % 9) {
    case 0:  // any finite bit pattern (subnormals included)
      for (int i = 0; i < 32; ++i) x[i] = FromBits(any_bits(rng) | (coin(rng) << 31));
      break;
    case 1: {  // gaussian at a log-uniform magnitude
      const float m = std::ldexp(1.0f, std::uniform_int_distribution<int>(-135, 120)(rng));
      for (int i = 0; i < 32; ++i) x[i] = normal(rng) * m;
      break;
    }
    case 2: {  // exact grid values, ties and their neighbours under one scale
      const int k = std::uniform_int_distribution<int>(-126, 120)(rng);
      for (int i = 0; i < 32; ++i) {
        const int c = std::uniform_int_distribution<int>(0, 0x7D)(rng);
        double v = E4m3Value(c);
        const int what = std::uniform_int_distribution<int>(0, 3)(rng);
        if (what >= 1) v = (v + E4m3Value(c + 1)) / 2;  // tie
        float f = static_cast<float>(std::ldexp(v, k));
        if (what == 2) f = std::nextafter(f, 0.0f);
        if (what == 3) f = std::nextafter(f, inf);
        x[i] = sign(f);
      }
      x[std::uniform_int_distribution<int>(0, 31)(rng)] = sign(std::ldexp(448.0f, k));
      break;
    }
    case 3: {  // one large value, the rest spread far below it
      const int top = exp(rng);
      for (int i = 0; i < 32; ++i)
        x[i] = sign(std::ldexp(1.0f + coin(rng) * 0.5f,
                               top - std::uniform_int_distribution<int>(0, 24)(rng)));
      x[0] = sign(std::ldexp(1.9f, top));
      break;
    }
    case 4: {  // amax on a boundary: 448 * 2^k, 1.75 * 2^k, 2^k, and one ulp around
      const int k = std::uniform_int_distribution<int>(-149, 118)(rng);
      const float bases[] = {448.0f, 1.75f, 1.0f, 1.9999999f, 1.5f};
      float a = std::ldexp(bases[std::uniform_int_distribution<int>(0, 4)(rng)], k);
      if (coin(rng)) a = std::nextafter(a, coin(rng) ? inf : 0.0f);
      for (int i = 0; i < 32; ++i)
        x[i] = sign(a * swa_test::UniformReal<float>(0.0f, 1.0f)(rng));
      x[std::uniform_int_distribution<int>(0, 31)(rng)] = sign(a);
      break;
    }
    case 5:  // FP32 subnormals only
      for (int i = 0; i < 32; ++i)
        x[i] = FromBits(std::uniform_int_distribution<uint32_t>(0, 0x7FFFFF)(rng) |
                        (coin(rng) << 31));
      break;
    case 6:  // zeros and negative zeros, sometimes one value
      for (int i = 0; i < 32; ++i) x[i] = coin(rng) ? -0.0f : 0.0f;
      if (coin(rng)) x[3] = sign(std::ldexp(1.0f, exp(rng)));
      break;
    case 7: {  // a NaN or Inf somewhere in an otherwise normal block
      for (int i = 0; i < 32; ++i) x[i] = normal(rng);
      const float bad[] = {inf, -inf, FromBits(0x7FC00000), FromBits(0xFF800001)};
      x[std::uniform_int_distribution<int>(0, 31)(rng)] = bad[rng() % 4];
      break;
    }
    default:  // huge values near FLT_MAX
      for (int i = 0; i < 32; ++i)
        x[i] = sign(std::numeric_limits<float>::max() *
                    swa_test::UniformReal<float>(0.0f, 1.0f)(rng));
      break;
  }
}

// n vectors of dim floats, each block adversarial with a random kind.
inline std::vector<float> RandomVectors(std::mt19937& rng, size_t n, uint32_t dim) {
  std::vector<float> v(n * dim);
  for (size_t b = 0; b < v.size() / 32; ++b) AdversarialBlock(rng, static_cast<int>(rng()), &v[b * 32]);
  return v;
}

// The same values truncated to BF16 bit patterns (an exact BF16 input).
inline std::vector<uint16_t> ToBf16Bits(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<uint16_t>(Bits(v[i]) >> 16);
  return out;
}

}  // namespace swa::test
