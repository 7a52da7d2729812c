// The AVX2 encoder's path for groups of 16 blocks (512 values), included by
// mxfp8_encode_avx2.cc only, inside its AVX2 section (compiled with -mavx2
// -mfma -mf16c).
//
// Pass 1 takes every block's largest and smallest magnitude (16-bit lanes
// for BF16, 32-bit for FP32) and reduces the 16 blocks at once with
// transposing max/min steps. The group takes this path only when every
// block's amax is finite, its scale byte s is at least 7 and its smallest
// magnitude is at least 2^(s - 133) (the E4M3 normal range; this also rules
// out zeros and FP32/BF16 subnormals); the caller redoes the other blocks.
//
// Pass 2, per element, in one integer pipeline on the raw bits (sign
// included), for FP32 (BF16: shifts 4 instead of 20, masks 0x8801):
//   u = x + C_s + (sar(x, 20) & 0x88000001),  code = u >> 20
// with C_s = 0x7FFFF - ((s - 7) << 23). Bit 0 of sar(x, 20) is the kept
// mantissa's lowest bit, so 0x7FFFF plus it rounds to nearest even at
// mantissa bit 20 (the carry moves into the exponent); subtracting
// (s - 7) << 23 turns the FP32 exponent into the E4M3 one (1-15 on this
// path, so bits 27-30 of the magnitude part are zero and no borrow occurs);
// bits 27 and 31 of sar(x, 20) are copies of the sign, and adding
// 0x88000000 to a negative x clears bit 31 and sets bit 27, which `>> 20`
// brings to bit 7 of the code. So `code` is sign << 7 | E4M3 exponent << 3 |
// 3 mantissa bits, at most 0xFE: the pack instructions then pass it through
// unchanged. Ceil mode never exceeds 448; floor mode first clamps each
// magnitude to 448 * 2^(s - 127) (which converts exactly to 0x7E).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "codec/avx2_internal.h"

namespace swa::codec {
namespace {

// Stages of a transposing reduction of 16 vectors of 16-bit lanes, whose
// result has in lane j the reduction of vector j: Quad16 reduces 4 vectors
// (one quarter), Finish16 the 4 quarters.
template <typename Op>
SWA_AVX2_INLINE __m256i Quad16(const __m256i m[4], Op op) {
  const __m256i w0 = op(_mm256_unpacklo_epi16(m[0], m[1]), _mm256_unpackhi_epi16(m[0], m[1]));
  const __m256i w1 = op(_mm256_unpacklo_epi16(m[2], m[3]), _mm256_unpackhi_epi16(m[2], m[3]));
  return op(_mm256_unpacklo_epi32(w0, w1), _mm256_unpackhi_epi32(w0, w1));
}

template <typename Op>
SWA_AVX2_INLINE __m256i Finish16(const __m256i z[4], Op op) {
  const __m256i y0 = op(_mm256_unpacklo_epi64(z[0], z[1]), _mm256_unpackhi_epi64(z[0], z[1]));
  const __m256i y1 = op(_mm256_unpacklo_epi64(z[2], z[3]), _mm256_unpackhi_epi64(z[2], z[3]));
  return op(_mm256_permute2x128_si256(y0, y1, 0x20), _mm256_permute2x128_si256(y0, y1, 0x31));
}

// The same for 8 vectors of 32-bit lanes: Pair32 reduces 2 vectors,
// Finish32 the 4 pairs.
template <typename Op>
SWA_AVX2_INLINE __m256i Pair32(__m256i a, __m256i b, Op op) {
  return op(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
}

template <typename Op>
SWA_AVX2_INLINE __m256i Finish32(const __m256i p[4], Op op) {
  const __m256i q0 = op(_mm256_unpacklo_epi64(p[0], p[1]), _mm256_unpackhi_epi64(p[0], p[1]));
  const __m256i q1 = op(_mm256_unpacklo_epi64(p[2], p[3]), _mm256_unpackhi_epi64(p[2], p[3]));
  return op(_mm256_permute2x128_si256(q0, q1, 0x20), _mm256_permute2x128_si256(q0, q1, 0x31));
}

struct MaxU16 { SWA_AVX2_INLINE __m256i operator()(__m256i a, __m256i b) const { return _mm256_max_epu16(a, b); } };
struct MinU16 { SWA_AVX2_INLINE __m256i operator()(__m256i a, __m256i b) const { return _mm256_min_epu16(a, b); } };
struct MaxI32 { SWA_AVX2_INLINE __m256i operator()(__m256i a, __m256i b) const { return _mm256_max_epi32(a, b); } };
struct MinI32 { SWA_AVX2_INLINE __m256i operator()(__m256i a, __m256i b) const { return _mm256_min_epi32(a, b); } };

// The per-block constants are then read with vpbroadcastd from memory (a
// load) rather than extracted from the stored vectors with shuffles, which
// the compiler would otherwise do: shuffle ports are this loop's bottleneck.
SWA_AVX2_INLINE void LoadFromMemory(int32_t (&c)[16]) { asm("" : "+m"(c)); }

// The stored scale bytes for every block, declined ones included (their
// encoder reads them): s clamped to [0, 254], 0xFF for a non-finite amax.
SWA_AVX2_INLINE __m256i ClampScales(__m256i s, __m256i nonfinite) {
  s = _mm256_min_epi16(_mm256_max_epi16(s, _mm256_setzero_si256()), _mm256_set1_epi16(254));
  return _mm256_or_si256(s, _mm256_and_si256(nonfinite, _mm256_set1_epi16(0xFF)));
}

// 16 scale bytes (16-bit lanes in block order, values 0-255) to memory.
SWA_AVX2_INLINE void StoreScales16(__m256i s, uint8_t* scales) {
  const __m256i bytes = _mm256_permute4x64_epi64(_mm256_packus_epi16(s, s), 0x08);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(scales), _mm256_castsi256_si128(bytes));
}

// The BF16 group's scale-stage constants, read as memory operands: as
// immediates the compiler builds each with three instructions, every group.
enum Bf16Const { kBump, kInf, kLowestE8, kMinBias, kEight, kRebias, kTopMantissa, kBf16Consts };
struct Bf16Consts {
  __m256i v[kBf16Consts];
};
struct alignas(32) Bf16ConstTable {
  int16_t v[kBf16Consts][16];
};
constexpr Bf16ConstTable MakeBf16Consts() {
  constexpr int16_t kValues[kBf16Consts] = {
      0x1F,              // kBump: ceil mode's carry into the exponent
      0x7F80,            // kInf: amax below it is finite
      14,                // kLowestE8: s > 6
      (14 << 7) + 9,     // kMinBias: ((s - 7) << 7 | 0x78) - 1 = ((s + 8) << 7) - kMinBias
      8,                 // kEight
      0x387 + (8 << 7),  // kRebias: C_s = kRebias - ((s + 8) << 7)
      0x60,              // kTopMantissa: 448 = 1.75 * 2^8
  };
  Bf16ConstTable t{};
  for (int i = 0; i < kBf16Consts; ++i)
    for (int l = 0; l < 16; ++l) t.v[i][l] = kValues[i];
  return t;
}
inline constexpr Bf16ConstTable kBf16ConstTable = MakeBf16Consts();

SWA_AVX2_INLINE const Bf16Consts& Bf16ConstsInMemory() {
  const void* p = &kBf16ConstTable;
  asm("" : "+r"(p));  // keep the loads: no rebuilding the values as immediates
  return *static_cast<const Bf16Consts*>(p);
}

// BF16: 16 elements per vector, two per block.
// Writes every block's scale byte; returns the mask of blocks that do not
// qualify, whose codes are garbage, for the caller to redo.
template <bool kCeil>
SWA_AVX2_INLINE uint32_t EncodeGroup16Bf16(const uint16_t* p, uint8_t* codes, uint8_t* scales) {
  auto load = [p](int i) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * i)); };
  const __m256i abs = _mm256_set1_epi16(0x7FFF);
  __m256i zmax[4], zmin[4];
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    __m256i mx[4], mn[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m256i m0 = _mm256_and_si256(load(8 * q + 2 * j), abs);
      const __m256i m1 = _mm256_and_si256(load(8 * q + 2 * j + 1), abs);
      mx[j] = _mm256_max_epu16(m0, m1);
      mn[j] = _mm256_min_epu16(m0, m1);
    }
    zmax[q] = Quad16(mx, MaxU16());
    zmin[q] = Quad16(mn, MinU16());
  }
  const __m256i amax = Finish16(zmax, MaxU16()), amin = Finish16(zmin, MinU16());
  // e8 = scale byte + 8 before clamping: the exponent of amax, plus one in
  // ceil mode when its mantissa exceeds 0x60 (adding 0x1F carries into the
  // exponent exactly then). The path needs 7 <= s <= 247, where no clamp applies.
  const Bf16Consts& k = Bf16ConstsInMemory();
  const __m256i e8 = _mm256_srli_epi16(kCeil ? _mm256_add_epi16(amax, k.v[kBump]) : amax, 7);
  const __m256i e8_hi = _mm256_slli_epi16(e8, 7);  // (s + 8) << 7
  // Smallest magnitude >= 1.9375 * 2^(s - 134), i.e. bits >= (s - 7) << 7 |
  // 0x78: E4M3's subnormals lie below 2^(s - 133), but the values from 1.9375
  // times half of it up round to 2^(s - 133) itself (code 0x08, a tie rounding
  // up from the odd 0x07), which the integer pipeline gets right as well.
  const __m256i ok = _mm256_and_si256(
      _mm256_and_si256(_mm256_cmpgt_epi16(k.v[kInf], amax), _mm256_cmpgt_epi16(e8, k.v[kLowestE8])),
      _mm256_cmpgt_epi16(amin, _mm256_sub_epi16(e8_hi, k.v[kMinBias])));
  // One bit per block: bytes 0-7 and 16-23 of the packed mask.
  const uint32_t packed = static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_packs_epi16(ok, ok)));
  const uint32_t fails = ~((packed & 0xFFu) | ((packed >> 8) & 0xFF00u)) & 0xFFFFu;
  // Stored scale bytes: s clamped at 0 (no finite amax gives s > 247). A
  // non-finite amax gives 247 or 248 here; its block is declined, and the
  // block encoder sends scale bytes over 245 to the scalar reference, which
  // stores 0xFF.
  StoreScales16(_mm256_subs_epu16(e8, k.v[kEight]), scales);
  // Per-block constants as 32-bit pairs; unpacklo/hi leave blocks 0-3, 8-11
  // and 4-7, 12-15 in their halves: block j is at Slot(j).
  auto slot = [](int j) { return (j & 3) | ((j & 4) << 1) | ((j & 8) >> 1); };
  alignas(32) int32_t c[16], top[16];
  const __m256i c16 = _mm256_sub_epi16(k.v[kRebias], e8_hi);  // 7 - ((s - 7) << 7)
  _mm256_store_si256(reinterpret_cast<__m256i*>(c), _mm256_unpacklo_epi16(c16, c16));
  _mm256_store_si256(reinterpret_cast<__m256i*>(c + 8), _mm256_unpackhi_epi16(c16, c16));
  if (!kCeil) {  // 448 * 2^(s - 127) as BF16 bits
    const __m256i m16 = _mm256_or_si256(e8_hi, k.v[kTopMantissa]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(top), _mm256_unpacklo_epi16(m16, m16));
    _mm256_store_si256(reinterpret_cast<__m256i*>(top + 8), _mm256_unpackhi_epi16(m16, m16));
  }
  LoadFromMemory(c);
  if (!kCeil) LoadFromMemory(top);
  const __m256i sign_odd = _mm256_set1_epi16(static_cast<short>(0x8801));
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) {
    const __m256i cj = _mm256_set1_epi32(c[slot(j)]);
    __m256i v[2];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256i x = load(2 * j + h);
      if (!kCeil) {
        const __m256i m = _mm256_set1_epi32(top[slot(j)]);
        x = _mm256_min_epi16(x, m);  // positive lanes
        x = _mm256_min_epu16(x, _mm256_or_si256(m, _mm256_set1_epi16(static_cast<short>(0x8000))));
      }
      const __m256i t = _mm256_and_si256(_mm256_srai_epi16(x, 4), sign_odd);
      v[h] = _mm256_srli_epi16(_mm256_add_epi16(_mm256_add_epi16(x, cj), t), 4);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + 32 * j),
                        _mm256_permute4x64_epi64(_mm256_packus_epi16(v[0], v[1]), 0xD8));
  }
  return fails;
}

// FP32: 8 elements per vector, four per block.
template <bool kCeil>
SWA_AVX2_INLINE uint32_t EncodeGroup16F32(const float* p, uint8_t* codes, uint8_t* scales) {
  auto load = [p](int i) { return _mm256_castps_si256(_mm256_loadu_ps(p + 8 * i)); };
  const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF);
  __m256i amax[2], amin[2];
#pragma GCC unroll 2
  for (int half = 0; half < 2; ++half) {
    __m256i pmax[4], pmin[4];
#pragma GCC unroll 4
    for (int pair = 0; pair < 4; ++pair) {
      __m256i mx[2], mn[2];
#pragma GCC unroll 2
      for (int k = 0; k < 2; ++k) {
        const int b = 8 * half + 2 * pair + k;
        __m256i m[4];
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) m[v] = _mm256_and_si256(load(4 * b + v), abs);
        mx[k] = _mm256_max_epi32(_mm256_max_epi32(m[0], m[1]), _mm256_max_epi32(m[2], m[3]));
        mn[k] = _mm256_min_epi32(_mm256_min_epi32(m[0], m[1]), _mm256_min_epi32(m[2], m[3]));
      }
      pmax[pair] = Pair32(mx[0], mx[1], MaxI32());
      pmin[pair] = Pair32(mn[0], mn[1], MinI32());
    }
    amax[half] = Finish32(pmax, MaxI32());
    amin[half] = Finish32(pmin, MinI32());
  }
  __m256i s[2];
  uint32_t ok = 0;
#pragma GCC unroll 2
  for (int half = 0; half < 2; ++half) {
    s[half] = _mm256_sub_epi32(_mm256_srli_epi32(amax[half], 23), _mm256_set1_epi32(8));
    if (kCeil)
      s[half] = _mm256_sub_epi32(
          s[half], _mm256_cmpgt_epi32(_mm256_and_si256(amax[half], _mm256_set1_epi32(0x7FFFFF)),
                                      _mm256_set1_epi32(0x600000)));
    const __m256i lowest_less1 = _mm256_sub_epi32(
        _mm256_slli_epi32(_mm256_sub_epi32(s[half], _mm256_set1_epi32(6)), 23), _mm256_set1_epi32(1));
    const __m256i fits = _mm256_and_si256(
        _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(0x7F800000), amax[half]),
                         _mm256_cmpgt_epi32(s[half], _mm256_set1_epi32(6))),
        _mm256_cmpgt_epi32(amin[half], lowest_less1));
    ok |= static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(fits))) << (8 * half);
  }
  const __m256i nonfinite = _mm256_packs_epi32(_mm256_cmpgt_epi32(amax[0], _mm256_set1_epi32(0x7F7FFFFF)),
                                               _mm256_cmpgt_epi32(amax[1], _mm256_set1_epi32(0x7F7FFFFF)));
  StoreScales16(ClampScales(_mm256_permute4x64_epi64(_mm256_packs_epi32(s[0], s[1]), 0xD8),
                            _mm256_permute4x64_epi64(nonfinite, 0xD8)),
                scales);
  alignas(32) int32_t c[16], top[16];
#pragma GCC unroll 2
  for (int half = 0; half < 2; ++half) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(c + 8 * half),
                       _mm256_sub_epi32(_mm256_set1_epi32(0x7FFFF + (7 << 23)),
                                        _mm256_slli_epi32(s[half], 23)));
    if (!kCeil)  // 448 * 2^(s - 127) as FP32 bits
      _mm256_store_si256(reinterpret_cast<__m256i*>(top + 8 * half),
                         _mm256_or_si256(_mm256_slli_epi32(_mm256_add_epi32(s[half], _mm256_set1_epi32(8)), 23),
                                         _mm256_set1_epi32(0x600000)));
  }
  LoadFromMemory(c);
  if (!kCeil) LoadFromMemory(top);
  const __m256i sign_odd = _mm256_set1_epi32(static_cast<int>(0x88000001u));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);  // the packs' dword order
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) {
    const __m256i cj = _mm256_set1_epi32(c[j]);
    __m256i w[4];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      __m256i x = load(4 * j + v);
      if (!kCeil) {
        const __m256i m = _mm256_set1_epi32(top[j]);
        x = _mm256_min_epi32(x, m);  // positive lanes
        x = _mm256_min_epu32(x, _mm256_or_si256(m, _mm256_set1_epi32(static_cast<int>(0x80000000u))));
      }
      const __m256i t = _mm256_and_si256(_mm256_srai_epi32(x, 20), sign_odd);
      w[v] = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, cj), t), 20);
    }
    const __m256i bytes = _mm256_packus_epi16(_mm256_packus_epi32(w[0], w[1]),
                                              _mm256_packus_epi32(w[2], w[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + 32 * j),
                        _mm256_permutevar8x32_epi32(bytes, order));
  }
  return ~ok & 0xFFFFu;
}

}  // namespace
}  // namespace swa::codec
