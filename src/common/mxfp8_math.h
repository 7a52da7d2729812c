// Exact scalar MXFP8 math (docs/semantics.md, "MXFP8"), usable on host and device.
//
// Everything here is integer bit arithmetic except DecodeElement's single
// multiply, whose exact result is always representable (or overflows to Inf
// for scale bytes the encoder never produces), so the results do not depend
// on the rounding mode. The FP environment is assumed to be the default one
// (no FTZ/DAZ): subnormal FP32 outputs of decoding are produced exactly.
#pragma once

#include <cstdint>
#if !defined(__CUDA_ARCH__)
#include <cstring>
#endif

#include "common/host_device.h"

namespace swa::codec {

inline constexpr int kBlock = 32;           // elements per E8M0 scale
inline constexpr uint8_t kE4m3MaxCode = 0x7E;  // 448
inline constexpr uint8_t kE4m3NanCode = 0x7F;  // S.1111.111
inline constexpr uint8_t kE8m0Nan = 0xFF;
inline constexpr uint32_t kCanonicalNan = 0x7FC00000u;  // every decoded NaN
inline constexpr uint16_t kCanonicalNanBf16 = 0x7FC0u;

SWA_HOST_DEVICE uint32_t FloatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

SWA_HOST_DEVICE float BitsFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

SWA_HOST_DEVICE int CountLeadingZeros(uint32_t v) {  // v != 0
#if defined(__CUDA_ARCH__)
  return __clz(static_cast<int>(v));
#else
  return __builtin_clz(v);
#endif
}

// 2^k as an FP32, exact for every k in [-149, 127] (subnormals included: the
// bit is placed in the mantissa, not shifted into the exponent field).
// Outside that range: 0 below, +Inf above.
SWA_HOST_DEVICE float Pow2(int k) {
  if (k > 127) return BitsFloat(0x7F800000u);
  if (k >= -126) return BitsFloat(static_cast<uint32_t>(k + 127) << 23);
  if (k >= -149) return BitsFloat(1u << (k + 149));
  return 0.0f;
}

// E8M0 byte -> 2^(byte - 127); 0xFF -> NaN. Byte 0 is the subnormal 2^-127.
SWA_HOST_DEVICE float E8m0ToFloat(uint8_t byte) {
  if (byte == kE8m0Nan) return BitsFloat(kCanonicalNan);
  return Pow2(static_cast<int>(byte) - 127);
}

// True when the FP32 bit pattern is NaN or +-Inf.
SWA_HOST_DEVICE bool IsNonFiniteBits(uint32_t bits) {
  return (bits & 0x7F800000u) == 0x7F800000u;
}

// Scale byte for a block whose largest magnitude has FP32 bits `amax_bits`
// (sign ignored). `ceil`: no element clips; otherwise the OCP floor rule.
SWA_HOST_DEVICE uint8_t E8m0ForAmax(uint32_t amax_bits, bool ceil) {
  amax_bits &= 0x7FFFFFFFu;
  if (amax_bits >= 0x7F800000u) return kE8m0Nan;
  const int e = static_cast<int>(amax_bits >> 23);
  const uint32_t m = amax_bits & 0x7FFFFFu;
  int byte = e - 8 + ((ceil && m > 0x600000u) ? 1 : 0);
  if (byte < 0) byte = 0;
  if (byte > 254) byte = 254;
  return static_cast<uint8_t>(byte);
}

// Value of an E4M3 (fn) code: bias 7, subnormal quantum 2^-9, NaN = S.1111.111.
SWA_HOST_DEVICE float E4m3ToFloat(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80) << 24;
  const uint32_t exp = (code >> 3) & 0xF;
  const uint32_t man = code & 0x7;
  if (exp == 0xF && man == 0x7) return BitsFloat(kCanonicalNan);
  if (exp == 0) {  // man * 2^-9, built exactly from bits: man <= 7
    const float v = static_cast<float>(man) * Pow2(-9);
    return BitsFloat(FloatBits(v) | sign);
  }
  return BitsFloat(sign | ((exp - 7 + 127) << 23) | (man << 20));
}

// Rounds v / 2^s to the nearest integer, ties to even (s >= 0).
SWA_HOST_DEVICE uint32_t ShiftRightRne(uint32_t v, int s) {
  if (s == 0) return v;
  if (s > 32) return 0;
  const uint64_t wide = v;
  const uint64_t q = wide >> s;
  const uint64_t rem = wide & ((uint64_t{1} << s) - 1);
  const uint64_t half = uint64_t{1} << (s - 1);
  return static_cast<uint32_t>(q + ((rem > half || (rem == half && (q & 1))) ? 1 : 0));
}

// E4M3 code of (x * 2^k), where x is given by its FP32 bits: round to nearest,
// ties to even, saturate to +-448, sign kept (also for zero results). The
// scaling is done on the exponent, so nothing is rounded before the final step.
// NaN -> 0x7F|sign; Inf saturates (the block encoder never passes either).
SWA_HOST_DEVICE uint8_t E4m3EncodeScaled(uint32_t x_bits, int k) {
  const uint8_t sign = static_cast<uint8_t>((x_bits >> 24) & 0x80);
  const uint32_t mag = x_bits & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return sign | kE4m3NanCode;
  if (mag == 0x7F800000u) return sign | kE4m3MaxCode;
  const uint32_t biased = mag >> 23;
  uint32_t sig = mag & 0x7FFFFFu;
  int e = -126;  // value = sig * 2^(e - 23)
  if (biased != 0) {
    sig |= 0x800000u;
    e = static_cast<int>(biased) - 127;
  }
  if (sig == 0) return sign;
  e += k;
  const int log2v = e - (CountLeadingZeros(sig) - 8);  // floor(log2(value))
  if (log2v > 8) return sign | kE4m3MaxCode;           // >= 512
  const int qe = log2v < -6 ? -6 : log2v;              // E4M3 exponent of the grid
  // n = value / 2^(qe - 3), rounded: in [0, 16] (8 = 2^qe, 16 = next binade).
  const int s = qe + 20 - e;
  const uint32_t n = s >= 0 ? ShiftRightRne(sig, s) : (sig << -s);
  uint32_t code = static_cast<uint32_t>((qe + 7) << 3) + n - 8;
  if (code > kE4m3MaxCode) code = kE4m3MaxCode;
  return static_cast<uint8_t>(sign | code);
}

// E4M3 code of y (no scaling).
SWA_HOST_DEVICE uint8_t E4m3Encode(float y) { return E4m3EncodeScaled(FloatBits(y), 0); }

// One decoded element: e4m3(code) * 2^(scale - 127), canonical NaN when
// either part is NaN.
SWA_HOST_DEVICE float DecodeElement(uint8_t code, uint8_t scale) {
  if (scale == kE8m0Nan || (code & 0x7F) == kE4m3NanCode) return BitsFloat(kCanonicalNan);
  return E4m3ToFloat(code) * E8m0ToFloat(scale);
}

// BF16 helpers. To BF16: round to nearest even; NaN stays NaN (quietened).
SWA_HOST_DEVICE float Bf16ToFloat(uint16_t h) { return BitsFloat(static_cast<uint32_t>(h) << 16); }

SWA_HOST_DEVICE uint16_t Bf16FromFloat(float f) {
  const uint32_t bits = FloatBits(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1)) >> 16);
}

}  // namespace swa::codec
