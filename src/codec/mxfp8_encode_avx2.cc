// AVX2 + F16C MXFP8 encoder, bit-identical to the scalar reference.
//
// Per group of up to 8 blocks, pass 1 takes each block's largest magnitude
// and smallest non-zero magnitude (as integers: FP32 magnitude order == bit
// order), reduces the 8 blocks into one vector each and selects the 8 scale
// bytes at once. Pass 2 encodes each block on one of three paths:
//  - integer (almost every block): when the scale byte is in [7, 245] and no
//    non-zero element falls in E4M3's subnormal range, every element's code
//    is its FP32 (or BF16) pattern rounded to 3 mantissa bits (one add of
//    0x7FFFF plus the kept lowest bit: round to nearest even, the carry moving
//    into the exponent), shifted, minus (scale - 7) on the exponent,
//    saturated to [0, 0x7E]; the sign is copied. All of it in 16-bit lanes,
//    16 elements per instruction.
//  - F16C (blocks with E4M3 subnormals or small scales): each block is scaled
//    by 2^(119 - scale), i.e. onto the E4M3 grid times 2^-8, which is FP16's
//    exponent range; rounding to the grid is one add and one subtract of a
//    magic constant (1.5 * 2^(e + 20) has an ulp equal to the grid step at
//    exponent e, and the FPU rounds to nearest even); the rounded value is
//    then an exact FP16, and its bits, shifted, are the E4M3 code.
//  - the scalar reference for NaN/Inf or a scale of 246 or more (2^(119 -
//    scale) would be a subnormal factor).
// The fp8_ds_mla encoder at the end reuses pass 1 and the F16C path.
#include "codec/avx2_internal.h"
#include "codec/codec.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>

#include <cstring>

#include "codec/mxfp8_group16_avx2.h"

namespace swa::codec {
namespace {

// Lane j of the result = op over the lanes of m[j].
template <typename Op>
SWA_AVX2_INLINE __m256i TransposeReduce8(const __m256i m[8], Op op) {
  __m256i p[4], q[2];
  #pragma GCC unroll 8
  for (int i = 0; i < 4; ++i)
    p[i] = op(_mm256_unpacklo_epi32(m[2 * i], m[2 * i + 1]),
              _mm256_unpackhi_epi32(m[2 * i], m[2 * i + 1]));
  #pragma GCC unroll 8
  for (int i = 0; i < 2; ++i)
    q[i] = op(_mm256_unpacklo_epi64(p[2 * i], p[2 * i + 1]),
              _mm256_unpackhi_epi64(p[2 * i], p[2 * i + 1]));
  return op(_mm256_permute2x128_si256(q[0], q[1], 0x20), _mm256_permute2x128_si256(q[0], q[1], 0x31));
}

// A source gives, per block of 32 elements: Load (FP32 bits, 8 per vector,
// for the F16C path), Bits (for the scalar reference), Stats (the block's
// largest magnitude and smallest magnitude - 1, unsigned, as FP32 bits per
// lane, to be reduced across lanes) and Rounded (the elements' FP32 patterns
// rounded to nearest even at mantissa bit 20 and cut to their top 16 bits,
// two vectors of 16; kOrder puts the bytes packed from them back in element
// order).
struct F32Source {
  const float* p;
  SWA_AVX2_INLINE __m256i Load(uint32_t block, int v) const {
    return _mm256_castps_si256(_mm256_loadu_ps(p + block * 32 + 8 * v));
  }
  SWA_AVX2_INLINE void Bits(uint32_t block, uint32_t* out) const {
    std::memcpy(out, p + block * 32, 32 * sizeof(float));
  }
  SWA_AVX2_INLINE void Stats(uint32_t block, __m256i* amax, __m256i* min_less1) const {
    const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF), one = _mm256_set1_epi32(1);
    __m256i mag[4];
    #pragma GCC unroll 8
    for (int v = 0; v < 4; ++v) mag[v] = _mm256_and_si256(Load(block, v), abs);
    *amax = _mm256_max_epu32(_mm256_max_epu32(mag[0], mag[1]), _mm256_max_epu32(mag[2], mag[3]));
    *min_less1 = _mm256_min_epu32(
        _mm256_min_epu32(_mm256_sub_epi32(mag[0], one), _mm256_sub_epi32(mag[1], one)),
        _mm256_min_epu32(_mm256_sub_epi32(mag[2], one), _mm256_sub_epi32(mag[3], one)));
  }
  SWA_AVX2_INLINE void Rounded(uint32_t block, __m256i h[2]) const {
    __m256i top[4];
    #pragma GCC unroll 8
    for (int v = 0; v < 4; ++v) {
      const __m256i x = Load(block, v);
      const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 20), _mm256_set1_epi32(1));
      top[v] = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7FFFF)), odd), 16);
    }
    h[0] = _mm256_packus_epi32(top[0], top[1]);  // elements 0-3, 8-11 | 4-7, 12-15
    h[1] = _mm256_packus_epi32(top[2], top[3]);  // 16-19, 24-27 | 20-23, 28-31
  }
  static SWA_AVX2_INLINE __m256i Order() { return _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7); }
  // Lane j: block g + j's largest magnitude and smallest magnitude - 1.
  SWA_AVX2_INLINE void GroupStats(uint32_t g, uint32_t count, __m256i* amax, __m256i* min_less1) const {
    __m256i m[8], n[8];
#pragma GCC unroll 8
    for (uint32_t j = 0; j < 8; ++j) {
      if (j < count) {
        Stats(g + j, &m[j], &n[j]);
      } else {
        m[j] = _mm256_setzero_si256();
        n[j] = _mm256_set1_epi32(-1);
      }
    }
    *amax = TransposeReduce8(m, [](__m256i a, __m256i b) { return _mm256_max_epu32(a, b); });
    *min_less1 = TransposeReduce8(n, [](__m256i a, __m256i b) { return _mm256_min_epu32(a, b); });
  }
};

struct Bf16Source {
  const uint16_t* p;
  SWA_AVX2_INLINE __m256i Load(uint32_t block, int v) const {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + block * 32 + 8 * v));
    return _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
  }
  SWA_AVX2_INLINE void Bits(uint32_t block, uint32_t* out) const {
    for (int i = 0; i < 32; ++i) out[i] = static_cast<uint32_t>(p[block * 32 + i]) << 16;
  }
  SWA_AVX2_INLINE __m256i Load16(uint32_t block, int half) const {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + block * 32 + 16 * half));
  }
  // Both reductions are unsigned 16-bit maxima: of the magnitudes, and of
  // their negations mod 2^16 (largest for the smallest non-zero magnitude, 0
  // when all are zero). Per block, 32-bit lane i holds the maximum magnitude
  // of elements 2i, 2i+1, 16+2i, 17+2i in its high half and the maximum
  // negation in its low half, so one transpose reduces both.
  SWA_AVX2_INLINE __m256i Stats(uint32_t block) const {
    const __m256i abs = _mm256_set1_epi16(0x7FFF), zero = _mm256_setzero_si256();
    const __m256i m0 = _mm256_and_si256(Load16(block, 0), abs);
    const __m256i m1 = _mm256_and_si256(Load16(block, 1), abs);
    const __m256i hi = _mm256_max_epu16(m0, m1);
    const __m256i lo = _mm256_max_epu16(_mm256_sub_epi16(zero, m0), _mm256_sub_epi16(zero, m1));
    const __m256i swap = _mm256_setr_epi8(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13,
                                          2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
    return _mm256_max_epu16(_mm256_blend_epi16(lo, hi, 0xAA),
                            _mm256_shuffle_epi8(_mm256_blend_epi16(hi, lo, 0xAA), swap));
  }
  SWA_AVX2_INLINE void GroupStats(uint32_t g, uint32_t count, __m256i* amax, __m256i* min_less1) const {
    __m256i m[8];
#pragma GCC unroll 8
    for (uint32_t j = 0; j < 8; ++j) m[j] = j < count ? Stats(g + j) : _mm256_setzero_si256();
    const __m256i r = TransposeReduce8(m, [](__m256i a, __m256i b) { return _mm256_max_epu16(a, b); });
    *amax = _mm256_and_si256(r, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u)));
    // Smallest magnitude - 1 = 0xFFFF - negation (0xFFFF when all are zero),
    // as FP32 bits: that << 16 | 0xFFFF.
    const __m256i neg = _mm256_and_si256(r, _mm256_set1_epi32(0xFFFF));
    *min_less1 = _mm256_or_si256(_mm256_slli_epi32(_mm256_xor_si256(neg, _mm256_set1_epi32(0xFFFF)), 16),
                                 _mm256_set1_epi32(0xFFFF));
  }
  SWA_AVX2_INLINE void Rounded(uint32_t block, __m256i h[2]) const {
    #pragma GCC unroll 8
    for (int half = 0; half < 2; ++half) {
      const __m256i x = Load16(block, half);
      const __m256i odd = _mm256_and_si256(_mm256_srli_epi16(x, 4), _mm256_set1_epi16(1));
      h[half] = _mm256_add_epi16(_mm256_add_epi16(x, _mm256_set1_epi16(7)), odd);
    }
  }
  static SWA_AVX2_INLINE __m256i Order() { return _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7); }
};

// Scale bytes (docs/semantics.md, "MXFP8") for 8 amax values; non-finite -> 0xFF.
template <bool kCeil>
SWA_AVX2_INLINE __m256i ScaleBytes(__m256i amax) {
  __m256i byte = _mm256_sub_epi32(_mm256_srli_epi32(amax, 23), _mm256_set1_epi32(8));
  if (kCeil) {
    const __m256i above = _mm256_cmpgt_epi32(_mm256_and_si256(amax, _mm256_set1_epi32(0x7FFFFF)),
                                             _mm256_set1_epi32(0x600000));
    byte = _mm256_sub_epi32(byte, above);  // above is -1 where the mantissa exceeds 1.75
  }
  byte = _mm256_min_epi32(_mm256_max_epi32(byte, _mm256_setzero_si256()), _mm256_set1_epi32(254));
  const __m256i nonfinite = _mm256_cmpgt_epi32(amax, _mm256_set1_epi32(0x7F7FFFFF));
  return _mm256_or_si256(byte, _mm256_and_si256(nonfinite, _mm256_set1_epi32(0xFF)));
}

// ---- F16C path ----

// y = element * 2^(119 - scale). Returns the FP16 patterns of y rounded to
// the scaled E4M3 grid (exact in FP16), sign kept for zeros.
template <bool kCeil>
SWA_AVX2_INLINE __m128i RoundToGrid(__m256 y) {
  if (!kCeil)  // floor mode saturates at 448 * 2^-8; ceil never exceeds it
    y = _mm256_max_ps(_mm256_min_ps(y, _mm256_set1_ps(1.75f)), _mm256_set1_ps(-1.75f));
  const __m256i e = _mm256_max_epi32(
      _mm256_and_si256(_mm256_castps_si256(y), _mm256_set1_epi32(0x7F800000)),
      _mm256_set1_epi32(0x38800000));  // exponent, at least 2^-14 (the subnormal grid)
  const __m256 magic =
      _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_set1_epi32((20 << 23) | 0x400000)));
  __m256 r = _mm256_sub_ps(_mm256_add_ps(y, magic), magic);
  r = _mm256_or_ps(r, _mm256_and_ps(y, _mm256_set1_ps(-0.0f)));
  return _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

// FP16 patterns s.0eeee.mmm0000000 -> E4M3 codes s.eeee.mmm (16 lanes).
SWA_AVX2_INLINE __m256i HalfToCode(__m256i h) {
  return _mm256_srli_epi16(_mm256_add_epi16(h, _mm256_and_si256(h, _mm256_set1_epi16(0x7FFF))), 8);
}

template <bool kCeil, typename Src>
SWA_AVX2_INLINE void EncodeBlockF16c(const Src& src, uint32_t block, __m256 factor, uint8_t* codes) {
  __m128i h[4];
  #pragma GCC unroll 8
  for (int v = 0; v < 4; ++v)
    h[v] = RoundToGrid<kCeil>(_mm256_mul_ps(_mm256_castsi256_ps(src.Load(block, v)), factor));
  const __m256i lo = HalfToCode(_mm256_set_m128i(h[1], h[0]));
  const __m256i hi = HalfToCode(_mm256_set_m128i(h[3], h[2]));
  const __m256i bytes = _mm256_permute4x64_epi64(_mm256_packus_epi16(lo, hi), 0xD8);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes), bytes);
}

// ---- Integer path ----

// Code magnitudes (0-0x7E) of 16 rounded patterns: exponent and 3 mantissa
// bits, minus `bias` = (scale - 7) << 3, saturated at 0 (zeros; nothing else
// on this path goes below the E4M3 normal range) and, in floor mode, at 0x7E.
template <bool kCeil>
SWA_AVX2_INLINE __m256i MagnitudeCodes(__m256i rounded, __m256i bias) {
  const __m256i exp_man = _mm256_and_si256(_mm256_srli_epi16(rounded, 4), _mm256_set1_epi16(0x7FF));
  const __m256i code = _mm256_subs_epu16(exp_man, bias);
  return kCeil ? code : _mm256_min_epu16(code, _mm256_set1_epi16(0x7E));
}

template <bool kCeil, typename Src>
SWA_AVX2_INLINE void EncodeBlockInteger(const Src& src, uint32_t block, __m256i bias, uint8_t* codes) {
  __m256i h[2];
  src.Rounded(block, h);
  const __m256i mag = _mm256_packus_epi16(MagnitudeCodes<kCeil>(h[0], bias),
                                          MagnitudeCodes<kCeil>(h[1], bias));
  // Signed saturation keeps each pattern's sign in bit 7 of its byte.
  const __m256i sign = _mm256_and_si256(_mm256_packs_epi16(h[0], h[1]),
                                        _mm256_set1_epi8(static_cast<char>(0x80)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes),
                      _mm256_permutevar8x32_epi32(_mm256_or_si256(mag, sign), Src::Order()));
}

// Blocks off the integer path, out of line so that the integer loop keeps
// its constants in registers: the scalar reference for NaN/Inf and scale
// bytes of 246 or more, the F16C path for the rest.
template <bool kCeil, typename Src>
__attribute__((noinline)) uint32_t EncodeBlockOther(const Src& src, uint32_t block, uint8_t* codes,
                                                    uint8_t* scale) {
  if (*scale > 245) {
    uint32_t bits[32];
    src.Bits(block, bits);
    return EncodeBlockScalar(bits, kCeil, codes, scale);
  }
  const __m256 factor = _mm256_castsi256_ps(_mm256_set1_epi32((246 - *scale) << 23));
  EncodeBlockF16c<kCeil>(src, block, factor, codes);
  return 0;
}

// One group of `count` (1-8) blocks starting at block g, any data: scale
// bytes, then each block on the integer path, the F16C path or the scalar
// reference. Out of line: it runs for groups the 16-block path declines and
// for a row's last blocks.
template <bool kCeil, typename Src>
__attribute__((noinline)) uint32_t EncodeGroup8(const Src& src, uint32_t dim, uint32_t g,
                                                uint32_t count, uint8_t* dst) {
  uint32_t bad = 0;
  alignas(32) uint32_t bias[8];
  __m256i amax, min_less1;
  src.GroupStats(g, count, &amax, &min_less1);
  const __m256i scale = ScaleBytes<kCeil>(amax);
  // Integer path: scale in [7, 245] and no magnitude in (0, 2^(scale - 133)),
  // i.e. min(magnitude - 1) >= ((scale - 6) << 23) - 1, unsigned.
  const __m256i lowest = _mm256_sub_epi32(
      _mm256_slli_epi32(_mm256_sub_epi32(scale, _mm256_set1_epi32(6)), 23), _mm256_set1_epi32(1));
  const __m256i fits = _mm256_and_si256(
      _mm256_and_si256(_mm256_cmpgt_epi32(scale, _mm256_set1_epi32(6)),
                       _mm256_cmpgt_epi32(_mm256_set1_epi32(246), scale)),
      _mm256_cmpeq_epi32(_mm256_max_epu32(min_less1, lowest), min_less1));
  const int integer = _mm256_movemask_ps(_mm256_castsi256_ps(fits));
  const __m256i b = _mm256_slli_epi32(_mm256_sub_epi32(scale, _mm256_set1_epi32(7)), 3);
  _mm256_store_si256(reinterpret_cast<__m256i*>(bias), _mm256_or_si256(b, _mm256_slli_epi32(b, 16)));
  // Scale bytes: lanes 0-3 and 4-7 packed to bytes 0-3 of each 128-bit half.
  const __m256i packed = _mm256_packus_epi16(_mm256_packus_epi32(scale, scale), scale);
  const uint64_t scale_bytes =
      static_cast<uint32_t>(_mm_cvtsi128_si32(_mm256_castsi256_si128(packed))) |
      static_cast<uint64_t>(static_cast<uint32_t>(_mm_cvtsi128_si32(_mm256_extracti128_si256(packed, 1))))
          << 32;
  std::memcpy(dst + dim + g, &scale_bytes, count);
  if (integer == 0xFF && count == 8) {  // every block on the integer path, unrolled
#pragma GCC unroll 8
    for (uint32_t j = 0; j < 8; ++j)
      EncodeBlockInteger<kCeil>(src, g + j, _mm256_set1_epi32(static_cast<int>(bias[j])),
                                dst + (g + j) * 32);
    return 0;
  }
  const unsigned in_group = (1u << count) - 1;
  for (unsigned todo = integer & in_group; todo != 0; todo &= todo - 1) {
    const uint32_t j = static_cast<uint32_t>(__builtin_ctz(todo));
    EncodeBlockInteger<kCeil>(src, g + j, _mm256_set1_epi32(static_cast<int>(bias[j])),
                              dst + (g + j) * 32);
  }
  for (unsigned todo = ~integer & in_group; todo != 0; todo &= todo - 1) {
    const uint32_t j = static_cast<uint32_t>(__builtin_ctz(todo));
    bad += EncodeBlockOther<kCeil>(src, g + j, dst + (g + j) * 32, dst + dim + g + j);
  }
  return bad;
}

// Groups of 16 blocks go through EncodeGroup16 (mxfp8_group16_avx2.h),
// which writes all 16 scale bytes; the blocks it declines (a zero or a
// magnitude below the E4M3 normal range, NaN/Inf, a scale byte under 7) are
// redone by EncodeBlockOther. The row's last blocks (dims not a multiple of
// 512) go through EncodeGroup8.
template <bool kCeil>
SWA_AVX2_INLINE uint32_t EncodeGroup16(const F32Source& src, uint32_t g, uint8_t* codes, uint8_t* scales) {
  return EncodeGroup16F32<kCeil>(src.p + g * 32, codes, scales);
}

template <bool kCeil>
SWA_AVX2_INLINE uint32_t EncodeGroup16(const Bf16Source& src, uint32_t g, uint8_t* codes, uint8_t* scales) {
  return EncodeGroup16Bf16<kCeil>(src.p + g * 32, codes, scales);
}

template <bool kCeil, typename Src>
SWA_AVX2_INLINE uint32_t EncodeRow(const Src& src, uint32_t dim, uint8_t* dst) {
  const uint32_t blocks = dim / 32;
  uint32_t bad = 0, g = 0;
  for (; g + 16 <= blocks; g += 16) {
    uint32_t fails = EncodeGroup16<kCeil>(src, g, dst + g * 32, dst + dim + g);
    for (; __builtin_expect(fails != 0, 0); fails &= fails - 1) {
      const uint32_t b = g + static_cast<uint32_t>(__builtin_ctz(fails));
      bad += EncodeBlockOther<kCeil>(src, b, dst + b * 32, dst + dim + b);
    }
  }
  for (; g < blocks; g += 8) bad += EncodeGroup8<kCeil>(src, dim, g, blocks - g < 8 ? blocks - g : 8, dst);
  return bad;
}

// ---- fp8_ds_mla (docs/codec.md, "fp8_ds_mla") -------------------------------
//
// A NoPE group's scale comes from its two blocks' largest magnitudes (pass 1
// above, GroupStats) by the format's rule: the ceil scale byte of the amax,
// floored at 114 (2^-13), 0xFF for NaN/Inf. Each block is then put on the
// E4M3 grid under its group's scale by the F16C path (valid for any finite
// block whose scale byte is at most 245 and at least its own ceil byte,
// which the group's is). A record with a scale byte above 245 (NaN/Inf, or
// an amax near the FP32 maximum) is redone by the scalar reference. The RoPE
// dims become BF16 (round to nearest even, NaN quietened) or are copied.

// The scale byte of common/ds_mla_math.h's DsMlaScaleForAmax (restated: this
// file includes no header with inline code).
SWA_AVX2_INLINE uint32_t DsMlaScaleByte(uint32_t amax) {
  if (amax >= 0x7F800000u) return 0xFF;
  int32_t b = static_cast<int32_t>(amax >> 23) - 8 + ((amax & 0x7FFFFFu) > 0x600000u ? 1 : 0);
  b = b < 0 ? 0 : b > 254 ? 254 : b;
  return b < 114 ? 114u : static_cast<uint32_t>(b);
}

// FP32 bits -> BF16 bits, round to nearest even, NaN quietened (Bf16FromFloat).
SWA_AVX2_INLINE __m256i DsMlaToBf16(__m256i bits) {
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rne = _mm256_srli_epi32(
      _mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), odd)), 16);
  const __m256i mag = _mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF));
  const __m256i is_nan = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7F800000));
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
  return _mm256_blendv_epi8(rne, quiet, is_nan);
}

// `rope(dst)` writes the 64 RoPE dims as BF16 at dst and returns the count
// of non-finite 32-dim halves; `scalar()` is the reference for the record.
template <typename Src, typename Rope, typename Scalar>
SWA_AVX2_INLINE uint32_t DsMlaEncodeRow(const Src& src, uint8_t* dst, Rope rope, Scalar scalar) {
  alignas(32) uint32_t amax[16];
  __m256i a, unused;
  src.GroupStats(0, 8, &a, &unused);
  _mm256_store_si256(reinterpret_cast<__m256i*>(amax), a);
  src.GroupStats(8, 6, &a, &unused);
  _mm256_store_si256(reinterpret_cast<__m256i*>(amax + 8), a);
  uint8_t scale[kDsMlaGroups];
  for (uint32_t g = 0; g < kDsMlaGroups; ++g) {
    const uint32_t m = amax[2 * g] > amax[2 * g + 1] ? amax[2 * g] : amax[2 * g + 1];
    const uint32_t s = DsMlaScaleByte(m);
    if (s > 245) return scalar();
    scale[g] = static_cast<uint8_t>(s);
  }
  for (uint32_t b = 0; b < 2 * kDsMlaGroups; ++b) {
    const __m256 factor = _mm256_castsi256_ps(_mm256_set1_epi32((246 - scale[b / 2]) << 23));
    EncodeBlockF16c<true>(src, b, factor, dst + b * 32);
  }
  std::memcpy(dst + kDsMlaScaleOffset, scale, kDsMlaGroups);
  dst[kDsMlaBytes - 1] = 0;
  return rope(dst + kDsMlaRopeOffset);
}

}  // namespace

uint32_t Avx2DsMlaEncodeF32(const float* src, uint8_t* dst) {
  return DsMlaEncodeRow(
      F32Source{src}, dst,
      [src](uint8_t* out) {
        uint32_t bad = 0;
        for (uint32_t h = 0; h < 2; ++h) {
          __m256i x[4], any = _mm256_setzero_si256();
          const __m256i e = _mm256_set1_epi32(0x7F800000);
          for (int v = 0; v < 4; ++v) {
            x[v] = _mm256_loadu_si256(
                reinterpret_cast<const __m256i*>(src + kDsMlaNopeDims + 32 * h + 8 * v));
            any = _mm256_or_si256(any, _mm256_cmpeq_epi32(_mm256_and_si256(x[v], e), e));
            x[v] = DsMlaToBf16(x[v]);
          }
          bad += _mm256_testz_si256(any, any) ? 0 : 1;
          const __m256i lo = _mm256_permute4x64_epi64(_mm256_packus_epi32(x[0], x[1]), 0xD8);
          const __m256i hi = _mm256_permute4x64_epi64(_mm256_packus_epi32(x[2], x[3]), 0xD8);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64 * h), lo);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64 * h + 32), hi);
        }
        return bad;
      },
      [src, dst] { return DsMlaEncodeF32(src, dst); });
}

uint32_t Avx2DsMlaEncodeBf16(const uint16_t* src, uint8_t* dst) {
  return DsMlaEncodeRow(
      Bf16Source{src}, dst,
      [src](uint8_t* out) {
        uint32_t bad = 0;
        const __m256i e = _mm256_set1_epi16(0x7F80);
        for (uint32_t h = 0; h < 2; ++h) {
          const uint16_t* in = src + kDsMlaNopeDims + 32 * h;
          const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in));
          const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 16));
          const __m256i any = _mm256_or_si256(_mm256_cmpeq_epi16(_mm256_and_si256(a, e), e),
                                              _mm256_cmpeq_epi16(_mm256_and_si256(c, e), e));
          bad += _mm256_testz_si256(any, any) ? 0 : 1;
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64 * h), a);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64 * h + 32), c);
        }
        return bad;
      },
      [src, dst] { return DsMlaEncodeBf16(src, dst); });
}

uint32_t Avx2Mxfp8EncodeF32(const float* src, uint32_t dim, bool ceil, uint8_t* dst) {
  return ceil ? EncodeRow<true>(F32Source{src}, dim, dst) : EncodeRow<false>(F32Source{src}, dim, dst);
}

uint32_t Avx2Mxfp8EncodeBf16(const uint16_t* src, uint32_t dim, bool ceil, uint8_t* dst) {
  return ceil ? EncodeRow<true>(Bf16Source{src}, dim, dst)
              : EncodeRow<false>(Bf16Source{src}, dim, dst);
}

// n rows in one call: the row loop inlined, its setup done once.
template <bool kCeil, typename T, typename Src>
SWA_AVX2_INLINE uint64_t EncodeRows(const T* src, size_t src_stride, uint32_t dim, size_t n,
                                    uint8_t* dst, size_t dst_stride) {
  uint64_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += EncodeRow<kCeil>(Src{src + i * src_stride}, dim, dst + i * dst_stride);
  return bad;
}

uint64_t Avx2Mxfp8EncodeF32Rows(const float* src, size_t src_stride, uint32_t dim, size_t n, bool ceil,
                                uint8_t* dst, size_t dst_stride) {
  return ceil ? EncodeRows<true, float, F32Source>(src, src_stride, dim, n, dst, dst_stride)
              : EncodeRows<false, float, F32Source>(src, src_stride, dim, n, dst, dst_stride);
}

uint64_t Avx2Mxfp8EncodeBf16Rows(const uint16_t* src, size_t src_stride, uint32_t dim, size_t n,
                                 bool ceil, uint8_t* dst, size_t dst_stride) {
  return ceil ? EncodeRows<true, uint16_t, Bf16Source>(src, src_stride, dim, n, dst, dst_stride)
              : EncodeRows<false, uint16_t, Bf16Source>(src, src_stride, dim, n, dst, dst_stride);
}

}  // namespace swa::codec
#endif
