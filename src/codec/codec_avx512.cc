// AVX-512 (F, BW, VL, VBMI) MXFP8 kernels: encode from FP32/BF16 and decode
// to BF16, bit-identical to the scalar reference (codec_kernels_test checks
// that byte for byte). Decode to FP32, fp8_ds_mla encode and decode and the
// plain formats reuse the AVX2 kernels (decode at memory speed). Compiled with
// -mavx512f -mavx512bw -mavx512vl -mavx512vbmi; chosen at run time
// (__builtin_cpu_supports).
//
// Like codec_avx2.cc, this file must not instantiate inline functions that
// other files also use, so it includes only codec.h and keeps its helpers in
// an anonymous namespace.
//
// Encode, per element x of a block with scale byte s and k = 127 - s
// (y = x * 2^k is the value put on the E4M3 grid):
//  - y >= 2^-6 (E4M3 normal): rounding to 3 mantissa bits does not depend on
//    the exponent, so it is done on the FP32 bits of x (round to nearest even
//    by adding 0x7FFFF plus the kept lsb; a carry moves into the exponent as it
//    should), and the exponent is rebiased by an integer add: code =
//    (rounded >> 20) + ((k - 120) << 3).
//  - y < 2^-6 (E4M3 subnormal grid, quantum 2^-9): code = round(y * 2^9),
//    computed as |x| * 2^(k+9) (a normal power of two: exact, except for
//    products below 2^-126, which round to 0 either way; result <= 8)
//    and converted with embedded round-to-nearest-even (independent of MXCSR).
//  - the sign bit is copied last, so zeros keep it; floor mode clamps the
//    normal lanes to 0x7E (448), ceil mode never exceeds it.
// BF16 input runs the same steps in 16-bit lanes (7 mantissa bits to drop 4).
// Fast blocks: scale 9...254 (2^(k+9) is then a normal FP32 and the
// threshold 2^(-6-k) a normal one), and all-zero blocks (scale 0). NaN/Inf
// blocks and other blocks with scale 0...8 (amax below 2^-109) are redone
// by the scalar reference after the fast pass.
//
// Decode to BF16 is integer-only: the code's 7 magnitude bits shifted left by
// 4 are the BF16 exponent/mantissa fields of e4m3 * 2^-120, so multiplying by
// 2^(s-127) is one 16-bit add; the seven E4M3 subnormal codes come from an
// 8-entry table (vpermw) with the same add, zero stays zero. Every result is
// then an exact normal BF16 when 10 <= s <= 246 (the smallest subnormal code
// times 2^(10-127) is 2^-126); other scales, and blocks holding a NaN code, go
// to the scalar reference.
#include "codec/codec.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && \
    defined(__AVX512VBMI__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and trip
// -Wmaybe-uninitialized when inlined (a false positive in the system header).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#define SWA_AVX512_INLINE inline __attribute__((always_inline))

namespace swa::codec {
namespace {

// Per-block constants of the fast encode path, for scale byte s (k = 127 - s).
struct BlockConsts {
  alignas(64) int32_t rebias[16];     // (k - 120) << 3 = (7 - s) << 3
  alignas(64) int32_t threshold[16];  // FP32 bits of 2^(-6-k) = (s - 6) << 23
  alignas(64) int32_t factor[16];     // FP32 bits of 2^(k+9), capped at 2^127
  // The 16-bit forms of rebias and threshold >> 16, twice per dword (a dword
  // broadcast from memory is a plain load; a word broadcast is not).
  alignas(64) int32_t rebias16[16];
  alignas(64) int32_t threshold16[16];
};

// vpermb indices: the low byte of each 16-bit lane, in order.
alignas(64) constexpr uint8_t kEvenBytes[64] = {
    0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30,
    32, 34, 36, 38, 40, 42, 44, 46, 48, 50, 52, 54, 56, 58, 60, 62};

// vpermt2b indices: output byte e <- low byte of the dword holding element e
// (bit 6 selects the second vector).
alignas(64) constexpr uint8_t kF32Order[64] = {
    0,  4,  8,  12, 16, 20, 24, 28, 32, 36, 40,  44,  48,  52,  56,  60,
    64, 68, 72, 76, 80, 84, 88, 92, 96, 100, 104, 108, 112, 116, 120, 124};

// Codes (one per dword, magnitude only) of 16 FP32 bit patterns; see the top.
template <bool kCeil>
SWA_AVX512_INLINE __m512i EncodeLanes(__m512i x, __m512i rebias, __m512i threshold, __m512 factor) {
  const __m512i mag = _mm512_and_si512(x, _mm512_set1_epi32(0x7FFFFFFF));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(mag, 20), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(_mm512_add_epi32(mag, _mm512_set1_epi32(0x7FFFF)), lsb);
  __m512i code = _mm512_add_epi32(_mm512_srli_epi32(rounded, 20), rebias);
  if (!kCeil) code = _mm512_min_epi32(code, _mm512_set1_epi32(0x7E));  // floor saturates at 448
  const __mmask16 sub = _mm512_cmplt_epu32_mask(mag, threshold);
  return _mm512_mask_cvt_roundps_epi32(code, sub, _mm512_mul_ps(_mm512_castsi512_ps(mag), factor),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

struct F32Source {
  const float* p;
  // Largest magnitude bits of one block, per lane (16 lanes to reduce later;
  // AmaxBits turns the reduced maxima into FP32 bit patterns).
  static SWA_AVX512_INLINE __m512i AmaxBits(__m512i m) { return m; }
  SWA_AVX512_INLINE __m512i AbsMax(uint32_t block) const {
    const __m512i abs = _mm512_set1_epi32(0x7FFFFFFF);
    return _mm512_max_epu32(_mm512_and_si512(_mm512_loadu_si512(p + block * 32), abs),
                            _mm512_and_si512(_mm512_loadu_si512(p + block * 32 + 16), abs));
  }
  template <bool kCeil>
  SWA_AVX512_INLINE void Encode(uint32_t block, const BlockConsts& c, uint32_t j, uint8_t* codes) const {
    const __m512i r = _mm512_set1_epi32(c.rebias[j]);
    const __m512i t = _mm512_set1_epi32(c.threshold[j]);
    const __m512 f = _mm512_castsi512_ps(_mm512_set1_epi32(c.factor[j]));
    const __m512i x_lo = _mm512_loadu_si512(p + block * 32);
    const __m512i x_hi = _mm512_loadu_si512(p + block * 32 + 16);
    const __m512i order = _mm512_load_si512(kF32Order);
    const __m512i magnitude = _mm512_permutex2var_epi8(EncodeLanes<kCeil>(x_lo, r, t, f), order,
                                                       EncodeLanes<kCeil>(x_hi, r, t, f));
    // The top byte of each input (sign first), gathered the same way.
    const __m512i top = _mm512_permutex2var_epi8(x_lo, _mm512_add_epi8(order, _mm512_set1_epi8(3)), x_hi);
    const __m512i bytes = _mm512_ternarylogic_epi32(magnitude, top, _mm512_set1_epi8(static_cast<char>(0x80)), 0xF8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes), _mm512_castsi512_si256(bytes));
  }
  void Bits(uint32_t block, uint32_t* out) const { std::memcpy(out, p + block * 32, 128); }
};

// BF16 input is encoded in 16-bit lanes (one vector per block): the same
// rounding on 7 mantissa bits instead of 23. Lanes on the subnormal grid are
// rare in practice, so they are converted only when a block has some
// (widened to FP32 with unpacklo/hi, which packus undoes).
struct Bf16Source {
  const uint16_t* p;
  // Per dword: high word = the larger of its two magnitudes, low word = the
  // low one (only breaks ties between equal maxima, and is cleared later).
  static SWA_AVX512_INLINE __m512i AmaxBits(__m512i m) {
    return _mm512_and_si512(m, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u)));
  }
  SWA_AVX512_INLINE __m512i AbsMax(uint32_t block) const {
    const __m512i m = _mm512_and_si512(_mm512_loadu_si512(p + block * 32), _mm512_set1_epi16(0x7FFF));
    return _mm512_max_epu16(m, _mm512_slli_epi32(m, 16));
  }
  template <bool kCeil>
  SWA_AVX512_INLINE void Encode(uint32_t block, const BlockConsts& c, uint32_t j, uint8_t* codes) const {
    const __m512i h = _mm512_loadu_si512(p + block * 32);
    const __m512i mag = _mm512_and_si512(h, _mm512_set1_epi16(0x7FFF));
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi16(mag, 4), _mm512_set1_epi16(1));
    const __m512i rounded = _mm512_add_epi16(_mm512_add_epi16(mag, _mm512_set1_epi16(7)), lsb);
    __m512i code = _mm512_add_epi16(_mm512_srli_epi16(rounded, 4), _mm512_set1_epi32(c.rebias16[j]));
    if (!kCeil) code = _mm512_min_epi16(code, _mm512_set1_epi16(0x7E));
    const __mmask32 sub = _mm512_cmplt_epu16_mask(mag, _mm512_set1_epi32(c.threshold16[j]));
    if (sub != 0) {
      const __m512 f = _mm512_castsi512_ps(_mm512_set1_epi32(c.factor[j]));
      const __m512i zero = _mm512_setzero_si512();
      const __m512i n_lo = _mm512_cvt_roundps_epi32(
          _mm512_mul_ps(_mm512_castsi512_ps(_mm512_unpacklo_epi16(zero, mag)), f),
          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      const __m512i n_hi = _mm512_cvt_roundps_epi32(
          _mm512_mul_ps(_mm512_castsi512_ps(_mm512_unpackhi_epi16(zero, mag)), f),
          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      code = _mm512_mask_mov_epi16(code, sub, _mm512_packus_epi32(n_lo, n_hi));
    }
    code = _mm512_ternarylogic_epi32(code, _mm512_srli_epi16(h, 8), _mm512_set1_epi16(0x80), 0xF8);
    const __m512i bytes = _mm512_permutexvar_epi8(_mm512_load_si512(kEvenBytes), code);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes), _mm512_castsi512_si256(bytes));
  }
  void Bits(uint32_t block, uint32_t* out) const {
    for (int i = 0; i < 32; ++i) out[i] = static_cast<uint32_t>(p[block * 32 + i]) << 16;
  }
};

// Lane j of the result = max over the 16 lanes of m[j] (unsigned).
SWA_AVX512_INLINE __m512i TransposeMax16(const __m512i m[16]) {
  __m512i p[8], q[4], s[2];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i)  // per 128-bit lane: blocks 2i, 2i+1, 2i, 2i+1
    p[i] = _mm512_max_epu32(_mm512_unpacklo_epi32(m[2 * i], m[2 * i + 1]),
                            _mm512_unpackhi_epi32(m[2 * i], m[2 * i + 1]));
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i)  // per 128-bit lane: blocks 4i ... 4i+3
    q[i] = _mm512_max_epu32(_mm512_unpacklo_epi64(p[2 * i], p[2 * i + 1]),
                            _mm512_unpackhi_epi64(p[2 * i], p[2 * i + 1]));
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i)  // 128-bit lanes: 8i..8i+3 twice, 8i+4..8i+7 twice
    s[i] = _mm512_max_epu32(_mm512_shuffle_i32x4(q[2 * i], q[2 * i + 1], 0x88),
                            _mm512_shuffle_i32x4(q[2 * i], q[2 * i + 1], 0xDD));
  return _mm512_max_epu32(_mm512_shuffle_i32x4(s[0], s[1], 0x88),
                          _mm512_shuffle_i32x4(s[0], s[1], 0xDD));
}

// Scale bytes (docs/semantics.md, "MXFP8") for 16 amax values; non-finite -> 0xFF.
template <bool kCeil>
SWA_AVX512_INLINE __m512i ScaleBytes(__m512i amax) {
  __m512i byte = _mm512_sub_epi32(_mm512_srli_epi32(amax, 23), _mm512_set1_epi32(8));
  if (kCeil) {
    const __mmask16 above = _mm512_cmpgt_epi32_mask(
        _mm512_and_si512(amax, _mm512_set1_epi32(0x7FFFFF)), _mm512_set1_epi32(0x600000));
    byte = _mm512_mask_add_epi32(byte, above, byte, _mm512_set1_epi32(1));
  }
  byte = _mm512_min_epi32(_mm512_max_epi32(byte, _mm512_setzero_si512()), _mm512_set1_epi32(254));
  const __mmask16 nonfinite = _mm512_cmpgt_epu32_mask(amax, _mm512_set1_epi32(0x7F7FFFFF));
  return _mm512_mask_mov_epi32(byte, nonfinite, _mm512_set1_epi32(0xFF));
}

template <bool kCeil, typename Src>
SWA_AVX512_INLINE uint32_t EncodeRow(const Src& src, uint32_t dim, uint8_t* dst) {
  const uint32_t blocks = dim / 32;
  uint32_t bad = 0;
  BlockConsts c;
  for (uint32_t g = 0; g < blocks; g += 16) {
    const uint32_t count = blocks - g < 16 ? blocks - g : 16;
    __m512i m[16];
    if (count == 16) {  // the usual case, kept in registers
#pragma GCC unroll 16
      for (uint32_t j = 0; j < 16; ++j) m[j] = src.AbsMax(g + j);
    } else {
      for (uint32_t j = 0; j < 16; ++j) m[j] = j < count ? src.AbsMax(g + j) : _mm512_setzero_si512();
    }
    const __m512i amax = Src::AmaxBits(TransposeMax16(m));
    const __m512i scale = ScaleBytes<kCeil>(amax);
    const __mmask16 live = static_cast<__mmask16>((1u << count) - 1);
    _mm512_mask_cvtepi32_storeu_epi8(dst + dim + g, live, scale);
    // Scalar blocks: NaN/Inf (0xFF) and the tiny scales 0...8, except
    // all-zero blocks (scale 0, amax 0), which the fast path handles.
    const __mmask16 rare =
        _mm512_cmpeq_epi32_mask(scale, _mm512_set1_epi32(0xFF)) |
        _mm512_mask_cmplt_epu32_mask(_mm512_test_epi32_mask(amax, amax), scale, _mm512_set1_epi32(9));
    const __m512i rebias = _mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(7), scale), 3);
    // For s = 0 the threshold wraps to a huge unsigned value, so every lane
    // of an all-zero block takes the subnormal route (0 * factor = 0).
    const __m512i threshold = _mm512_slli_epi32(_mm512_sub_epi32(scale, _mm512_set1_epi32(6)), 23);
    _mm512_store_si512(c.rebias, rebias);
    _mm512_store_si512(c.threshold, threshold);
    const __m512i low16 = _mm512_set1_epi32(0xFFFF);
    const __m512i rebias16 = _mm512_and_si512(rebias, low16);
    _mm512_store_si512(c.rebias16, _mm512_or_si512(rebias16, _mm512_slli_epi32(rebias16, 16)));
    _mm512_store_si512(c.threshold16, _mm512_or_si512(_mm512_srli_epi32(threshold, 16),
                                                      _mm512_andnot_si512(low16, threshold)));
    _mm512_store_si512(c.factor, _mm512_slli_epi32(_mm512_min_epi32(_mm512_sub_epi32(_mm512_set1_epi32(263), scale),
                                                                    _mm512_set1_epi32(254)),
                                                   23));
    // Every block through the fast path first (rare ones give junk, never a
    // fault), then the rare ones again through the scalar reference: no call
    // in the hot loop, so its constants stay in registers.
    for (uint32_t j = 0; j < count; ++j) src.template Encode<kCeil>(g + j, c, j, dst + (g + j) * 32);
    for (uint32_t r = rare & live; r != 0; r &= r - 1) {
      const uint32_t j = static_cast<uint32_t>(__builtin_ctz(r));
      uint32_t bits[32];
      src.Bits(g + j, bits);
      bad += EncodeBlockScalar(bits, kCeil, dst + (g + j) * 32, dst + dim + g + j);
    }
  }
  return bad;
}

uint32_t EncodeF32(const float* src, uint32_t dim, bool ceil, uint8_t* dst) {
  return ceil ? EncodeRow<true>(F32Source{src}, dim, dst) : EncodeRow<false>(F32Source{src}, dim, dst);
}

uint32_t EncodeBf16(const uint16_t* src, uint32_t dim, bool ceil, uint8_t* dst) {
  return ceil ? EncodeRow<true>(Bf16Source{src}, dim, dst)
              : EncodeRow<false>(Bf16Source{src}, dim, dst);
}

uint32_t DecodeBf16(const uint8_t* src, uint32_t dim, uint16_t* dst) {
  // BF16 bits of c * 2^-9 for the subnormal codes c = 1...7 (lane c); lane 0 = zero.
  alignas(64) static constexpr uint16_t kSubBase[32] = {0,      0x3B00, 0x3B80, 0x3BC0,
                                                        0x3C00, 0x3C20, 0x3C40, 0x3C60};
  const __m512i sub_base = _mm512_load_si512(kSubBase);
  // Per block of a group: the 16-bit adds for normal codes ((s - 7) << 7) and
  // for the table ((s - 127) << 7), twice per dword (broadcast = plain load).
  alignas(64) int32_t normal_add[16], table_add[16];
  const uint32_t blocks = dim / 32;
  uint32_t bad = 0;
  for (uint32_t g = 0; g < blocks; g += 16) {
    const uint32_t count = blocks - g < 16 ? blocks - g : 16;
    const __mmask16 live = static_cast<__mmask16>((1u << count) - 1);
    const __m512i scale = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(live, src + dim + g));
    uint32_t rare = live & (_mm512_cmplt_epu32_mask(scale, _mm512_set1_epi32(10)) |
                            _mm512_cmpgt_epu32_mask(scale, _mm512_set1_epi32(246)));
    const __m512i low16 = _mm512_set1_epi32(0xFFFF);
    const __m512i n = _mm512_and_si512(_mm512_slli_epi32(_mm512_sub_epi32(scale, _mm512_set1_epi32(7)), 7), low16);
    const __m512i t = _mm512_and_si512(_mm512_slli_epi32(_mm512_sub_epi32(scale, _mm512_set1_epi32(127)), 7), low16);
    _mm512_store_si512(normal_add, _mm512_or_si512(n, _mm512_slli_epi32(n, 16)));
    _mm512_store_si512(table_add, _mm512_or_si512(t, _mm512_slli_epi32(t, 16)));
    // Every block through the fast path (rare ones give junk), then the rare
    // ones (bad scale or a NaN code) again through the scalar reference.
    for (uint32_t j = 0; j < count; ++j) {
      const uint32_t b = g + j;
      const __m512i x = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + b * 32)));
      const __m512i m4 = _mm512_and_si512(_mm512_slli_epi16(x, 4), _mm512_set1_epi16(0x7F0));
      rare |= static_cast<uint32_t>(_mm512_cmpeq_epi16_mask(m4, _mm512_set1_epi16(0x7F0)) != 0) << j;
      // Times 2^(s-127): normal codes hold e4m3 * 2^-120, the table c * 2^-9.
      __m512i v = _mm512_add_epi16(m4, _mm512_set1_epi32(normal_add[j]));
      const __m512i table = _mm512_maskz_add_epi16(0xFE, sub_base, _mm512_set1_epi32(table_add[j]));
      const __mmask32 sub = _mm512_cmplt_epu16_mask(m4, _mm512_set1_epi16(0x80));
      v = _mm512_mask_permutexvar_epi16(v, sub, x, table);  // index: low 5 bits of the code
      v = _mm512_ternarylogic_epi32(v, _mm512_slli_epi16(x, 8), _mm512_set1_epi16(static_cast<short>(0x8000)), 0xF8);
      _mm512_storeu_si512(dst + b * 32, v);
    }
    for (; rare != 0; rare &= rare - 1) {
      const uint32_t b = g + static_cast<uint32_t>(__builtin_ctz(rare));
      bad += DecodeBlockScalarBf16(src + b * 32, src[dim + b], dst + b * 32);
    }
  }
  return bad;
}

}  // namespace

const RowKernels* Avx512Kernels() {
  static const RowKernels* const kernels = []() -> const RowKernels* {
    __builtin_cpu_init();
    const bool supported = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl") &&
                           __builtin_cpu_supports("avx512vbmi");
    // Decode to FP32, fp8_ds_mla encode and decode, the plain formats.
    const RowKernels* avx2 = Avx2Kernels();
    if (!supported || avx2 == nullptr) return nullptr;
    static RowKernels k = *avx2;
    k.name = "avx512";
    k.mxfp8_encode_f32 = EncodeF32;
    k.mxfp8_encode_bf16 = EncodeBf16;
    k.mxfp8_decode_bf16 = DecodeBf16;
    // The AVX2 set's multi-row entries would bypass the kernels above
    // (decode to FP32 is the AVX2 one here as well, so it keeps its own).
    k.mxfp8_encode_f32_rows = nullptr;
    k.mxfp8_encode_bf16_rows = nullptr;
    k.mxfp8_decode_bf16_rows = nullptr;
    return &k;
  }();
  return kernels;
}

}  // namespace swa::codec

#else  // not an x86-64 build with AVX-512 flags

namespace swa::codec {
const RowKernels* Avx512Kernels() { return nullptr; }
}  // namespace swa::codec

#endif
