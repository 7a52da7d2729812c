// AVX2 + F16C MXFP8 encoder, bit-identical to the scalar reference.
//
// Per group of up to 8 blocks: pass 1 takes each block's largest magnitude
// (as integers: FP32 magnitude order == bit order), reduces the 8 blocks into
// one vector and selects the 8 scale bytes at once. Pass 2 scales each block
// by 2^(119 - scale), i.e. onto the E4M3 grid times 2^-8, which is FP16's
// exponent range; rounding to the grid is one add and one subtract of a
// magic constant (1.5 * 2^(e + 20) has an ulp equal to the grid step at
// exponent e, and the FPU rounds to nearest even); the rounded value is then
// an exact FP16, and its bits, shifted, are the E4M3 code.
// Blocks with NaN/Inf or a scale of 246 or more (2^(119 - scale) would be a
// subnormal factor) go to the scalar reference.
#include "codec/avx2_internal.h"
#include "codec/codec.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>

#include <cstring>

namespace swa::codec {
namespace {

struct F32Source {
  const float* p;
  SWA_AVX2_INLINE __m256i Load(uint32_t block, int v) const {
    return _mm256_castps_si256(_mm256_loadu_ps(p + block * 32 + 8 * v));
  }
  SWA_AVX2_INLINE void Bits(uint32_t block, uint32_t* out) const {
    std::memcpy(out, p + block * 32, 32 * sizeof(float));
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
};

// Largest magnitude bits of one block, per lane (8 lanes to reduce later).
template <typename Src>
SWA_AVX2_INLINE __m256i BlockAbsMax(const Src& src, uint32_t block) {
  const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF);
  const __m256i a = _mm256_max_epu32(_mm256_and_si256(src.Load(block, 0), abs),
                                     _mm256_and_si256(src.Load(block, 1), abs));
  const __m256i b = _mm256_max_epu32(_mm256_and_si256(src.Load(block, 2), abs),
                                     _mm256_and_si256(src.Load(block, 3), abs));
  return _mm256_max_epu32(a, b);
}

// Lane j of the result = max over the lanes of m[j].
SWA_AVX2_INLINE __m256i TransposeMax8(const __m256i m[8]) {
  __m256i p[4], q[2];
  for (int i = 0; i < 4; ++i)
    p[i] = _mm256_max_epu32(_mm256_unpacklo_epi32(m[2 * i], m[2 * i + 1]),
                            _mm256_unpackhi_epi32(m[2 * i], m[2 * i + 1]));
  for (int i = 0; i < 2; ++i)
    q[i] = _mm256_max_epu32(_mm256_unpacklo_epi64(p[2 * i], p[2 * i + 1]),
                            _mm256_unpackhi_epi64(p[2 * i], p[2 * i + 1]));
  return _mm256_max_epu32(_mm256_permute2x128_si256(q[0], q[1], 0x20),
                          _mm256_permute2x128_si256(q[0], q[1], 0x31));
}

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
SWA_AVX2_INLINE void EncodeBlockFast(const Src& src, uint32_t block, __m256 factor, uint8_t* codes) {
  __m128i h[4];
  for (int v = 0; v < 4; ++v)
    h[v] = RoundToGrid<kCeil>(_mm256_mul_ps(_mm256_castsi256_ps(src.Load(block, v)), factor));
  const __m256i lo = HalfToCode(_mm256_set_m128i(h[1], h[0]));
  const __m256i hi = HalfToCode(_mm256_set_m128i(h[3], h[2]));
  const __m256i bytes = _mm256_permute4x64_epi64(_mm256_packus_epi16(lo, hi), 0xD8);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes), bytes);
}

template <bool kCeil, typename Src>
SWA_AVX2_INLINE uint32_t EncodeRow(const Src& src, uint32_t dim, uint8_t* dst) {
  const uint32_t blocks = dim / 32;
  uint32_t bad = 0;
  for (uint32_t g = 0; g < blocks; g += 8) {
    const uint32_t count = blocks - g < 8 ? blocks - g : 8;
    __m256i m[8];
    for (uint32_t j = 0; j < 8; ++j)
      m[j] = j < count ? BlockAbsMax(src, g + j) : _mm256_setzero_si256();
    const __m256i scale = ScaleBytes<kCeil>(TransposeMax8(m));
    const int rare = _mm256_movemask_ps(
        _mm256_castsi256_ps(_mm256_cmpgt_epi32(scale, _mm256_set1_epi32(245))));
    const __m256i factors = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(246), scale), 23);
    // Scale bytes: lanes 0-3 and 4-7 packed to bytes 0-3 of each 128-bit half.
    const __m256i packed = _mm256_packus_epi16(_mm256_packus_epi32(scale, scale), scale);
    const uint64_t scale_bytes =
        static_cast<uint32_t>(_mm_cvtsi128_si32(_mm256_castsi256_si128(packed))) |
        static_cast<uint64_t>(static_cast<uint32_t>(_mm_cvtsi128_si32(_mm256_extracti128_si256(packed, 1))))
            << 32;
    std::memcpy(dst + dim + g, &scale_bytes, count);
    __m256i index = _mm256_setzero_si256();
    for (uint32_t j = 0; j < count; ++j, index = _mm256_add_epi32(index, _mm256_set1_epi32(1))) {
      uint8_t* codes = dst + (g + j) * 32;
      if ((rare >> j) & 1) {
        uint32_t bits[32];
        src.Bits(g + j, bits);
        bad += EncodeBlockScalar(bits, kCeil, codes, dst + dim + g + j);
        continue;
      }
      const __m256 factor = _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(factors, index));
      EncodeBlockFast<kCeil>(src, g + j, factor, codes);
    }
  }
  return bad;
}

}  // namespace

uint32_t Avx2Mxfp8EncodeF32(const float* src, uint32_t dim, bool ceil, uint8_t* dst) {
  return ceil ? EncodeRow<true>(F32Source{src}, dim, dst) : EncodeRow<false>(F32Source{src}, dim, dst);
}

uint32_t Avx2Mxfp8EncodeBf16(const uint16_t* src, uint32_t dim, bool ceil, uint8_t* dst) {
  return ceil ? EncodeRow<true>(Bf16Source{src}, dim, dst)
              : EncodeRow<false>(Bf16Source{src}, dim, dst);
}

}  // namespace swa::codec
#endif
