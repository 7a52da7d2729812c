// Independent MXFP8 oracle for the tests: values come from double arithmetic
// and table searches, scale bytes from the definitions in docs/semantics.md, "MXFP8", never
// from the code under test.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace swa::test {

inline uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// E4M3 (fn) value of a code, from the format definition. NaN for S.1111.111.
inline double E4m3Value(uint8_t code) {
  const int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return NAN;
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -mag : mag;
}

// Nearest E4M3 code to v (finite double), ties to the even code, saturating to
// +-448, sign kept for zero. Searches the table of the 127 non-negative values.
inline uint8_t NearestE4m3(double v) {
  static const std::vector<double> table = [] {
    std::vector<double> t;
    for (int c = 0; c <= 0x7E; ++c) t.push_back(E4m3Value(static_cast<uint8_t>(c)));
    return t;
  }();
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  const double a = std::fabs(v);
  if (a >= 448.0) return sign | 0x7E;
  const size_t hi = std::lower_bound(table.begin(), table.end(), a) - table.begin();
  if (table[hi] == a) return sign | static_cast<uint8_t>(hi);
  const size_t lo = hi - 1;  // table[lo] < a < table[hi]
  const double dlo = a - table[lo], dhi = table[hi] - a;
  size_t pick = dlo < dhi ? lo : dhi < dlo ? hi : ((lo % 2 == 0) ? lo : hi);
  return sign | static_cast<uint8_t>(pick);
}

// Scale byte by those definitions, computed in double:
// ceil = smallest power of two with amax / 2^k <= 448; floor = floor(log2 amax) - 8.
inline uint8_t ScaleByteOracle(const float* x, int n, bool ceil) {
  double amax = 0;
  for (int i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return 0xFF;
    amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
  }
  int k;
  if (amax == 0) {
    k = -127;
  } else if (ceil) {
    k = std::ilogb(amax) - 9;
    while (amax / std::ldexp(1.0, k) > 448.0) ++k;
  } else {
    k = std::ilogb(amax) - 8;
  }
  return static_cast<uint8_t>(std::clamp(k + 127, 0, 254));
}

// One 32-element block: codes then the scale byte; non-finite -> 0x7F codes.
inline void EncodeBlockOracle(const float* x, bool ceil, uint8_t* codes, uint8_t* scale) {
  *scale = ScaleByteOracle(x, 32, ceil);
  for (int i = 0; i < 32; ++i)
    codes[i] = *scale == 0xFF ? 0x7F
                              : NearestE4m3(std::ldexp(static_cast<double>(x[i]), 127 - *scale));
}

// Whole vector in the stored layout: dim codes then dim/32 scales.
inline std::vector<uint8_t> EncodeVectorOracle(const float* x, int dim, bool ceil) {
  std::vector<uint8_t> out(dim + dim / 32);
  for (int b = 0; b < dim / 32; ++b)
    EncodeBlockOracle(x + 32 * b, ceil, out.data() + 32 * b, out.data() + dim + b);
  return out;
}

// Decoded FP32 bits: value * 2^(scale-127) in double, then one rounding to
// float (exact unless it overflows to Inf); NaN -> 0x7FC00000.
inline uint32_t DecodeOracleBits(uint8_t code, uint8_t scale) {
  const double v = E4m3Value(code);
  if (scale == 0xFF || std::isnan(v)) return 0x7FC00000u;
  const double d = std::ldexp(v, scale - 127);
  // At most 4 significant bits: anything past FLT_MAX is at least 2^128.
  if (std::fabs(d) >= std::ldexp(1.0, 128)) return d < 0 ? 0xFF800000u : 0x7F800000u;
  return Bits(static_cast<float>(d));
}

// FP32 -> BF16 nearest, ties to even (chosen by comparing the two neighbours
// in double), NaN quietened.
inline uint16_t Bf16Oracle(float f) {
  const uint32_t u = Bits(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  const uint16_t lo = static_cast<uint16_t>(u >> 16);
  if ((u & 0xFFFF) == 0) return lo;
  const uint16_t hi = static_cast<uint16_t>(lo + 1);
  const double vl = FromBits(uint32_t{lo} << 16), vh = FromBits(uint32_t{hi} << 16);
  if (std::isinf(vh)) {  // rounding past FLT_MAX: overflow when at least half an ulp over
    const double ulp = std::ldexp(1.0, 128 - 8);
    return std::fabs(static_cast<double>(f)) - std::fabs(vl) >= ulp / 2 ? hi : lo;
  }
  const double dl = std::fabs(f - vl), dh = std::fabs(vh - f);
  return dl < dh ? lo : dh < dl ? hi : ((lo & 1) == 0 ? lo : hi);
}

}  // namespace swa::test
