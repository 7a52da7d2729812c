// AVX2 + FMA + F16C kernels (MXFP8 and fp8_ds_mla decode, plain formats;
// MXFP8 encode lives in mxfp8_encode_avx2.cc), bit-identical to the scalar reference
// (tests/unit/codec_simd_test.cc checks that byte for byte).
//
// This file is compiled with -mavx2 -mfma -mf16c. It must not instantiate
// inline functions that other files also use (the linker could keep this
// file's AVX copy for everyone), so it includes no project header with inline
// code and keeps its few scalar helpers in an anonymous namespace.
#include "codec/avx2_internal.h"
#include "common/cpu_features.h"
#include "codec/codec.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>

#include <cstring>

namespace swa::codec {
namespace {

constexpr int kBlk = 32;

SWA_AVX2_INLINE float FloatFromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// 2^k for k in [-126, 127] (normal FP32 only; callers stay in range).
SWA_AVX2_INLINE float Pow2Normal(int k) { return FloatFromBits(static_cast<uint32_t>(k + 127) << 23); }

SWA_AVX2_INLINE __m256i WidenBf16(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
}

// True when the block must take the scalar path: NaN scale, a scale so large
// that 2^(scale-119) is not a finite FP32 (never produced by the encoder),
// or a NaN code among the 32.
SWA_AVX2_INLINE bool RareBlock(__m256i codes, uint8_t scale) {
  if (scale >= 247) return true;
  const __m256i all = _mm256_set1_epi8(static_cast<char>(0xFF));
  const __m256i nan = _mm256_cmpeq_epi8(_mm256_or_si256(codes, _mm256_set1_epi8(char(0x80))), all);
  return _mm256_movemask_epi8(nan) != 0;
}

// 32 codes -> four vectors of FP32 values times 2^(scale-127). The code is
// placed in the high byte of a 16-bit lane, shifted right arithmetically by
// one and masked: that is the FP16 pattern of e4m3 * 2^-8 (same field widths
// after the shift, subnormals included), which F16C converts exactly.
// Output order: elements 0-7, 16-23, 8-15, 24-31.
SWA_AVX2_INLINE void DecodeToF32(__m256i codes, uint8_t scale, __m256 out[4]) {
  const __m256i zero = _mm256_setzero_si256();
  const __m256i mask = _mm256_set1_epi16(static_cast<short>(0xBF80));
  const __m256i lo = _mm256_and_si256(_mm256_srai_epi16(_mm256_unpacklo_epi8(zero, codes), 1), mask);
  const __m256i hi = _mm256_and_si256(_mm256_srai_epi16(_mm256_unpackhi_epi8(zero, codes), 1), mask);
  const __m256 factor = _mm256_set1_ps(Pow2Normal(static_cast<int>(scale) - 119));
  out[0] = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(lo)), factor);
  out[1] = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(lo, 1)), factor);
  out[2] = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(hi)), factor);
  out[3] = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(hi, 1)), factor);
}

// The integer path: when a block's scale byte is in [7, 246] and every code
// is normal (exponent field 1-15, not NaN), each value e4m3 * 2^(scale-127) is
// a normal FP32 with at most 4 significant bits, so its FP32 and BF16
// patterns are the code's sign, exponent and mantissa moved into the wider
// fields plus (scale - 7) on the exponent: no rounding, the same bits as the
// scalar reference's multiply (and round to BF16). Other blocks (zero or
// subnormal codes, NaN codes, extreme scales) take the F16C path or the
// scalar reference, one block at a time.

// x = (code + 1) & 0x7F is 0 for a NaN code, 1-8 for exponent field 0 and
// 9-127 for the codes of the integer path.
SWA_AVX2_INLINE __m256i IntegerKey(__m256i codes) {
  return _mm256_and_si256(_mm256_add_epi8(codes, _mm256_set1_epi8(1)), _mm256_set1_epi8(0x7F));
}

SWA_AVX2_INLINE bool IntegerScale(uint8_t scale) { return static_cast<uint8_t>(scale - 7) <= 239; }

SWA_AVX2_INLINE bool IntegerBlock(__m256i codes, uint8_t scale) {
  const __m256i not_integer = _mm256_cmpgt_epi8(_mm256_set1_epi8(9), IntegerKey(codes));
  return IntegerScale(scale) && _mm256_movemask_epi8(not_integer) == 0;
}

// The 16 blocks of codes at `codes` and their scale bytes all take the
// integer path (the smallest key of the 256 codes is at least 9); then
// bias[j] holds (scale_j - 7) << 7, the exponent bias in BF16 position, in
// both of its 16-bit halves.
SWA_AVX2_INLINE bool IntegerGroup(const uint8_t* codes, const uint8_t* scales, int32_t bias[16]) {
  __m256i low = _mm256_set1_epi8(0x7F);
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j)
    low = _mm256_min_epu8(low, IntegerKey(_mm256_loadu_si256(
                                   reinterpret_cast<const __m256i*>(codes + j * kBlk))));
  const __m256i not_integer = _mm256_cmpgt_epi8(_mm256_set1_epi8(9), low);
  const __m128i s = _mm_sub_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)),
                                 _mm_set1_epi8(7));
  const __m128i in_range = _mm_cmpeq_epi8(_mm_min_epu8(s, _mm_set1_epi8(static_cast<char>(239))), s);
  // Scales 0-7, then 8-15 (the shift is an immediate: no loop over it).
  const __m128i halves[2] = {s, _mm_srli_si128(s, 8)};
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m256i b = _mm256_slli_epi32(_mm256_cvtepu8_epi32(halves[h]), 7);
    _mm256_store_si256(reinterpret_cast<__m256i*>(bias + 8 * h), _mm256_or_si256(b, _mm256_slli_epi32(b, 16)));
  }
  return _mm_movemask_epi8(in_range) == 0xFFFF && _mm256_testz_si256(not_integer, not_integer);
}

// For a group that IntegerGroup declines: bit j set when block j must take
// `slow` (a key under 9 among its codes or a scale byte outside [7, 246]).
// Each block's smallest key comes out of one transposing minimum over the
// 16 key vectors (bytes, then 16-, 32- and 64-bit units, then the halves),
// which leaves block j in byte j.
SWA_AVX2_INLINE uint32_t SlowBlocks(const uint8_t* codes, const uint8_t* scales) {
  __m256i k[16];
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j)
    k[j] = IntegerKey(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + j * kBlk)));
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j)
    k[j] = _mm256_min_epu8(_mm256_unpacklo_epi8(k[2 * j], k[2 * j + 1]),
                           _mm256_unpackhi_epi8(k[2 * j], k[2 * j + 1]));
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j)
    k[j] = _mm256_min_epu8(_mm256_unpacklo_epi16(k[2 * j], k[2 * j + 1]),
                           _mm256_unpackhi_epi16(k[2 * j], k[2 * j + 1]));
#pragma GCC unroll 2
  for (int j = 0; j < 2; ++j)
    k[j] = _mm256_min_epu8(_mm256_unpacklo_epi32(k[2 * j], k[2 * j + 1]),
                           _mm256_unpackhi_epi32(k[2 * j], k[2 * j + 1]));
  const __m256i q = _mm256_min_epu8(_mm256_unpacklo_epi64(k[0], k[1]), _mm256_unpackhi_epi64(k[0], k[1]));
  const __m128i low = _mm_min_epu8(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
  const __m128i s = _mm_sub_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)),
                                 _mm_set1_epi8(7));
  const __m128i bad = _mm_or_si128(
      _mm_cmpgt_epi8(_mm_set1_epi8(9), low),
      _mm_xor_si128(_mm_cmpeq_epi8(_mm_min_epu8(s, _mm_set1_epi8(static_cast<char>(239))), s),
                    _mm_set1_epi8(-1)));
  return static_cast<uint32_t>(_mm_movemask_epi8(bad));
}

// `n` (at most 32) blocks from block b0, each checked on its own: integer
// path blocks through `fast` in this loop, the others afterwards through
// `slow` (a call in the loop would make it reload its constants).
template <typename Out, typename Fast, typename Slow>
SWA_AVX2_INLINE uint32_t DecodeBlocks(const uint8_t* src, uint32_t dim, uint32_t b0, uint32_t n,
                                      Out* dst, Fast fast, Slow slow) {
  uint32_t others = 0, bad = 0;
  for (uint32_t j = 0; j < n; ++j) {
    const size_t b = b0 + j;
    const uint8_t scale = src[dim + b];
    const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + b * kBlk));
    if (__builtin_expect(IntegerBlock(codes, scale), 1))
      fast(src + b * kBlk, _mm256_set1_epi16(static_cast<short>((scale - 7) << 7)), dst + b * kBlk);
    else
      others |= 1u << j;
  }
  for (; others != 0; others &= others - 1) {
    const size_t b = b0 + static_cast<uint32_t>(__builtin_ctz(others));
    bad += slow(src + b * kBlk, src[dim + b], dst + b * kBlk);
  }
  return bad;
}

// Row loop shared by both outputs: every block of a group of 16 through
// `fast` (codes, bias vector, out) without per-block checks; in a group that
// IntegerGroup declines, the blocks SlowBlocks names are then redone through
// `slow` (codes, scale, out). The row's last blocks go one at a time through
// `fast` or `slow`.
template <typename Out, typename Fast, typename Slow>
SWA_AVX2_INLINE uint32_t DecodeRow(const uint8_t* src, uint32_t dim, Out* dst, Fast fast,
                                   Slow slow) {
  const uint32_t blocks = dim / kBlk;
  uint32_t bad = 0;
  uint32_t b = 0;
  alignas(32) int32_t bias[16];
  for (; b + 16 <= blocks; b += 16) {
    const uint8_t* in = src + size_t{b} * kBlk;
    Out* out = dst + size_t{b} * kBlk;
    uint32_t redo = 0;
    if (__builtin_expect(!IntegerGroup(in, src + dim + b, bias), 0)) redo = SlowBlocks(in, src + dim + b);
    // Broadcast each bias from memory (a load), not out of the stored
    // vector with shuffles, which the compiler would otherwise do.
    asm("" : "+m"(bias));
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) fast(in + j * kBlk, _mm256_set1_epi32(bias[j]), out + j * kBlk);
    for (; __builtin_expect(redo != 0, 0); redo &= redo - 1) {
      const uint32_t j = static_cast<uint32_t>(__builtin_ctz(redo));
      bad += slow(in + j * kBlk, src[dim + b + j], out + j * kBlk);
    }
  }
  return bad + DecodeBlocks(src, dim, b, blocks - b, dst, fast, slow);
}

// BF16 patterns of 16 codes: vpmovsxbw leaves the code's low 7 bits at the
// bottom of each 16-bit lane and its sign above; shifted left by 4 and masked
// that is s.0000eeee.mmm0000 (exponent and mantissa in BF16's fields); plus
// the bias on the exponent.
SWA_AVX2_INLINE __m256i Bf16FromCodes(const uint8_t* codes, __m256i bias) {
  const __m256i wide = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
  return _mm256_add_epi16(
      _mm256_and_si256(_mm256_slli_epi16(wide, 4), _mm256_set1_epi16(static_cast<short>(0x87F0))),
      bias);
}

// Blocks off the integer path: F16C, or the scalar reference for NaN codes
// and huge scales. Out of line so that the row loop keeps its constants in
// registers.
__attribute__((noinline)) uint32_t SlowBlockF32(const uint8_t* in, uint8_t scale, float* out) {
  const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in));
  if (RareBlock(codes, scale)) return DecodeBlockScalarF32(in, scale, out);
  __m256 v[4];
  DecodeToF32(codes, scale, v);
  _mm256_storeu_ps(out + 0, v[0]);
  _mm256_storeu_ps(out + 16, v[1]);
  _mm256_storeu_ps(out + 8, v[2]);
  _mm256_storeu_ps(out + 24, v[3]);
  return 0;
}

// The integer path's 32 outputs of one block, for DecodeRow.
struct FastF32 {
  SWA_AVX2_INLINE void operator()(const uint8_t* in, __m256i b, float* out) const {
    // FP32 pattern = BF16 pattern << 16 (the values have 4 significant bits).
    const __m256i zero = _mm256_setzero_si256();
    const __m256i lo = Bf16FromCodes(in, b);       // elements 0-15
    const __m256i hi = Bf16FromCodes(in + 16, b);  // elements 16-31
    // The in-lane unpacks give 0-3 | 8-11 and 4-7 | 12-15: put the halves back.
    const __m256i a0 = _mm256_unpacklo_epi16(zero, lo), a1 = _mm256_unpackhi_epi16(zero, lo);
    const __m256i c0 = _mm256_unpacklo_epi16(zero, hi), c1 = _mm256_unpackhi_epi16(zero, hi);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 0), _mm256_permute2x128_si256(a0, a1, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8), _mm256_permute2x128_si256(a0, a1, 0x31));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16), _mm256_permute2x128_si256(c0, c1, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 24), _mm256_permute2x128_si256(c0, c1, 0x31));
  }
};

// FP32 bits -> BF16 bits (round to nearest even) for finite or Inf lanes.
SWA_AVX2_INLINE __m256i RoundToBf16(__m256i bits) {
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  return _mm256_srli_epi32(
      _mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), odd)), 16);
}

// Same, NaN lanes quietened and kept (sign and top payload bits).
SWA_AVX2_INLINE __m256i ToBf16Any(__m256i bits) {
  const __m256i mag = _mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF));
  const __m256i is_nan = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7F800000));
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
  return _mm256_blendv_epi8(RoundToBf16(bits), quiet, is_nan);
}

// Two vectors of 16-bit values in int32 lanes -> 16 uint16 in element order.
SWA_AVX2_INLINE __m256i Pack16(__m256i a, __m256i b) {
  return _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
}

__attribute__((noinline)) uint32_t SlowBlockBf16(const uint8_t* in, uint8_t scale, uint16_t* out) {
  const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in));
  if (RareBlock(codes, scale)) return DecodeBlockScalarBf16(in, scale, out);
  __m256 v[4];
  DecodeToF32(codes, scale, v);  // finite: no NaN handling needed
  const __m256i e0_7 = RoundToBf16(_mm256_castps_si256(v[0]));
  const __m256i e16_23 = RoundToBf16(_mm256_castps_si256(v[1]));
  const __m256i e8_15 = RoundToBf16(_mm256_castps_si256(v[2]));
  const __m256i e24_31 = RoundToBf16(_mm256_castps_si256(v[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), Pack16(e0_7, e8_15));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16), Pack16(e16_23, e24_31));
  return 0;
}

struct FastBf16 {
  SWA_AVX2_INLINE void operator()(const uint8_t* in, __m256i b, uint16_t* out) const {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), Bf16FromCodes(in, b));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16), Bf16FromCodes(in + 16, b));
  }
};

uint32_t DecodeF32(const uint8_t* src, uint32_t dim, float* dst) {
  return DecodeRow(src, dim, dst, FastF32(), SlowBlockF32);
}

uint32_t DecodeBf16(const uint8_t* src, uint32_t dim, uint16_t* dst) {
  return DecodeRow(src, dim, dst, FastBf16(), SlowBlockBf16);
}

// n rows in one call: the row loop inlined, its setup done once.
template <typename Out, typename Fast, typename Slow>
SWA_AVX2_INLINE uint64_t DecodeRowsOf(const uint8_t* src, size_t src_stride, uint32_t dim,
                                      size_t n, Out* dst, size_t dst_stride, Fast fast, Slow slow) {
  uint64_t bad = 0;
  for (size_t i = 0; i < n; ++i)
    bad += DecodeRow(src + i * src_stride, dim, dst + i * dst_stride, fast, slow);
  return bad;
}

uint64_t DecodeF32Rows(const uint8_t* src, size_t src_stride, uint32_t dim, size_t n, float* dst,
                       size_t dst_stride) {
  return DecodeRowsOf(src, src_stride, dim, n, dst, dst_stride, FastF32(), SlowBlockF32);
}

uint64_t DecodeBf16Rows(const uint8_t* src, size_t src_stride, uint32_t dim, size_t n, uint16_t* dst,
                        size_t dst_stride) {
  return DecodeRowsOf(src, src_stride, dim, n, dst, dst_stride, FastBf16(), SlowBlockBf16);
}

// ---- Plain formats ---------------------------------------------------------

// Non-zero when any FP32 lane of the four is NaN or Inf.
SWA_AVX2_INLINE int NonFinite32(const __m256i x[4]) {
  const __m256i e = _mm256_set1_epi32(0x7F800000);
  __m256i any = _mm256_setzero_si256();
  for (int v = 0; v < 4; ++v)
    any = _mm256_or_si256(any, _mm256_cmpeq_epi32(_mm256_and_si256(x[v], e), e));
  return !_mm256_testz_si256(any, any);
}

SWA_AVX2_INLINE int NonFinite16(__m256i a, __m256i b) {
  const __m256i e = _mm256_set1_epi16(0x7F80);
  const __m256i any = _mm256_or_si256(_mm256_cmpeq_epi16(_mm256_and_si256(a, e), e),
                                      _mm256_cmpeq_epi16(_mm256_and_si256(b, e), e));
  return !_mm256_testz_si256(any, any);
}

// The block loop of an FP32 source: counts non-finite blocks and hands each
// block's four vectors of raw bits to `store`.
template <typename Out, typename Store>
SWA_AVX2_INLINE uint32_t FromF32Blocks(const float* src, uint32_t dim, Out* dst, Store store) {
  uint32_t bad = 0;
  for (uint32_t b = 0; b < dim / kBlk; ++b) {
    __m256i x[4];
    for (int v = 0; v < 4; ++v)
      x[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + b * kBlk + 8 * v));
    bad += NonFinite32(x);
    store(x, dst + b * kBlk);
  }
  return bad;
}

uint32_t F32ToF32(const float* src, uint32_t dim, float* dst) {
  return FromF32Blocks(src, dim, dst, [](const __m256i x[4], float* out) {
    for (int v = 0; v < 4; ++v) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8 * v), x[v]);
  });
}

uint32_t F32ToBf16(const float* src, uint32_t dim, uint16_t* dst) {
  return FromF32Blocks(src, dim, dst, [](const __m256i x[4], uint16_t* out) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), Pack16(ToBf16Any(x[0]), ToBf16Any(x[1])));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16),
                        Pack16(ToBf16Any(x[2]), ToBf16Any(x[3])));
  });
}

uint32_t Bf16ToF32(const uint16_t* src, uint32_t dim, float* dst) {
  uint32_t bad = 0;
  for (uint32_t b = 0; b < dim / kBlk; ++b) {
    const uint16_t* in = src + b * kBlk;
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 16));
    bad += NonFinite16(a, c);
    float* out = dst + b * kBlk;
    for (int v = 0; v < 4; ++v)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8 * v), WidenBf16(in + 8 * v));
  }
  return bad;
}

uint32_t Bf16ToBf16(const uint16_t* src, uint32_t dim, uint16_t* dst) {
  uint32_t bad = 0;
  for (uint32_t b = 0; b < dim / kBlk; ++b) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + b * kBlk));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + b * kBlk + 16));
    bad += NonFinite16(a, c);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + b * kBlk), a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + b * kBlk + 16), c);
  }
  return bad;
}

// ---- fp8_ds_mla (docs/codec.md, "fp8_ds_mla") -------------------------------
//
// A NoPE group is two blocks of 32 E4M3 codes under one scale byte, so each
// half goes through the MXFP8 block paths above (the integer path, else F16C,
// else the scalar reference: the same values as the scalar DecodeElement, bit
// for bit); the RoPE dims are BF16 already. Counts as DsMlaDecodeF32 does: a
// group whose scale is 0xFF, a 32-dim RoPE half holding a NaN or Inf.
template <typename Out, typename Fast, typename Slow, typename Rope>
SWA_AVX2_INLINE uint32_t DsMlaDecodeRow(const uint8_t* src, Out* dst, Fast fast, Slow slow,
                                        Rope rope) {
  uint32_t bad = 0;
  for (uint32_t g = 0; g < kDsMlaGroups; ++g) {
    const uint8_t scale = src[kDsMlaScaleOffset + g];
    bad += scale == 0xFF ? 1 : 0;
    const __m256i bias = _mm256_set1_epi16(static_cast<short>((scale - 7) << 7));
    for (uint32_t h = 0; h < 2; ++h) {
      const uint32_t d0 = g * kDsMlaGroup + h * kBlk;
      const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + d0));
      if (__builtin_expect(IntegerBlock(codes, scale), 1))
        fast(src + d0, bias, dst + d0);
      else
        slow(src + d0, scale, dst + d0);  // its count is per block: the group counted above
    }
  }
  for (uint32_t h = 0; h < kDsMlaRopeDims / kBlk; ++h) {
    const uint8_t* in = src + kDsMlaRopeOffset + 2 * h * kBlk;
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 32));
    bad += NonFinite16(a, c);
    rope(in, a, c, dst + kDsMlaNopeDims + h * kBlk);
  }
  return bad;
}

uint32_t DsMlaDecodeF32Avx2(const uint8_t* src, float* dst) {
  return DsMlaDecodeRow(src, dst, FastF32(), SlowBlockF32,
                        [](const uint8_t* in, __m256i, __m256i, float* out) {
                          const uint16_t* h = reinterpret_cast<const uint16_t*>(in);
                          for (int v = 0; v < 4; ++v)
                            _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8 * v),
                                                WidenBf16(h + 8 * v));
                        });
}

uint32_t DsMlaDecodeBf16Avx2(const uint8_t* src, uint16_t* dst) {
  return DsMlaDecodeRow(src, dst, FastBf16(), SlowBlockBf16,
                        [](const uint8_t*, __m256i a, __m256i c, uint16_t* out) {
                          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), a);
                          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16), c);
                        });
}

}  // namespace

const RowKernels* Avx2Kernels() {
  static const bool supported = (__builtin_cpu_init(), __builtin_cpu_supports("avx2")) &&
                                __builtin_cpu_supports("fma") && CpuHasF16c();
  static const RowKernels kernels = {
      "avx2",   Avx2Mxfp8EncodeF32, Avx2Mxfp8EncodeBf16, DecodeF32, DecodeBf16,
      F32ToF32, F32ToBf16, Bf16ToF32,  Bf16ToBf16,
      Avx2Mxfp8EncodeF32Rows, Avx2Mxfp8EncodeBf16Rows, DecodeF32Rows, DecodeBf16Rows,
      DsMlaDecodeF32Avx2, DsMlaDecodeBf16Avx2, Avx2DsMlaEncodeF32, Avx2DsMlaEncodeBf16,
  };
  return supported ? &kernels : nullptr;
}

}  // namespace swa::codec

#else  // not an x86-64 AVX2 build

namespace swa::codec {
const RowKernels* Avx2Kernels() { return nullptr; }
}  // namespace swa::codec

#endif
