// x86-64 CRC32C paths, selected at run time (crc32c.cc checks cpuid):
//  - SSE4.2: the crc32 instruction on three interleaved streams, combined with
//    GF(2) shifts (the instruction has latency 3, throughput 1);
//  - AVX-512 + VPCLMULQDQ: carry-less folding of 256-byte blocks, 4x faster
//    again, then the crc32 instruction for the last 16 bytes and the tail.
#if defined(__x86_64__)

// GCC 12's AVX-512 broadcast/extract intrinsics self-initialise an
// "undefined" vector, which -Wmaybe-uninitialized reports in every caller.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "store/crc32c.h"

namespace swa::crc32c_internal {
namespace {

inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// Three streams of kBlock bytes each; `shift1`/`shift2` = x^(8 kBlock),
// x^(16 kBlock) mod P.
template <size_t kBlock>
__attribute__((target("sse4.2"))) uint32_t ThreeWay(uint32_t raw, const uint8_t*& p, size_t& n) {
  static const uint32_t shift1 = XPow8n(kBlock);
  static const uint32_t shift2 = XPow8n(2 * kBlock);
  while (n >= 3 * kBlock) {
    uint64_t a = raw, b = 0, c = 0;
    for (size_t i = 0; i < kBlock; i += 8) {
      a = _mm_crc32_u64(a, Load64(p + i));
      b = _mm_crc32_u64(b, Load64(p + kBlock + i));
      c = _mm_crc32_u64(c, Load64(p + 2 * kBlock + i));
    }
    raw = MulModP(static_cast<uint32_t>(a), shift2) ^ MulModP(static_cast<uint32_t>(b), shift1) ^
          static_cast<uint32_t>(c);
    p += 3 * kBlock;
    n -= 3 * kBlock;
  }
  return raw;
}

// Lane constants for moving a 128-bit lane N bytes forward. A reflected clmul
// returns a*b*x, hence the exponents 63 + 8N (high-degree half) and 8N - 1.
struct alignas(16) FoldKey {
  uint64_t hi_half;  // multiplies the lane's low qword (degrees 127..64)
  uint64_t lo_half;  // multiplies the lane's high qword (degrees 63..0)
};

FoldKey MakeKey(uint64_t n_bytes) {
  return {uint64_t{XPowModP(63 + 8 * n_bytes)} << 32, uint64_t{XPowModP(8 * n_bytes - 1)} << 32};
}

struct FoldKeys {
  FoldKey k256, k192, k128, k64, k48, k32, k16;
};

const FoldKeys& Keys() {
  static const FoldKeys keys = {MakeKey(256), MakeKey(192), MakeKey(128), MakeKey(64),
                                MakeKey(48),  MakeKey(32),  MakeKey(16)};
  return keys;
}

#define SWA_AVX512_TARGET __attribute__((target("avx512f,avx512vl,vpclmulqdq,pclmul,sse4.2")))

SWA_AVX512_TARGET inline __m512i Broadcast(const FoldKey& k) {
  return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(&k)));
}

// x moved forward by the key's distance, XORed with `data`.
SWA_AVX512_TARGET inline __m512i Fold(__m512i x, __m512i key, __m512i data) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, key, 0x00),
                                   _mm512_clmulepi64_epi128(x, key, 0x11), data, 0x96);
}

}  // namespace

__attribute__((target("sse4.2"))) uint32_t RawSse42(uint32_t raw, const uint8_t* p, size_t n) {
  raw = ThreeWay<8192>(raw, p, n);
  raw = ThreeWay<512>(raw, p, n);
  uint64_t r = raw;
  for (; n >= 8; n -= 8, p += 8) r = _mm_crc32_u64(r, Load64(p));
  raw = static_cast<uint32_t>(r);
  for (; n > 0; --n, ++p) raw = _mm_crc32_u8(raw, *p);
  return raw;
}

SWA_AVX512_TARGET uint32_t RawAvx512(uint32_t raw, const uint8_t* p, size_t n) {
  if (n < 1024) return RawSse42(raw, p, n);
  const FoldKeys& k = Keys();
  // The running CRC enters as an XOR into the first four message bytes.
  __m512i x0 = _mm512_xor_si512(_mm512_loadu_si512(p), _mm512_zextsi128_si512(_mm_cvtsi32_si128(
                                                           static_cast<int>(raw))));
  __m512i x1 = _mm512_loadu_si512(p + 64);
  __m512i x2 = _mm512_loadu_si512(p + 128);
  __m512i x3 = _mm512_loadu_si512(p + 192);
  p += 256;
  n -= 256;
  const __m512i k256 = Broadcast(k.k256);
  for (; n >= 256; n -= 256, p += 256) {
    x0 = Fold(x0, k256, _mm512_loadu_si512(p));
    x1 = Fold(x1, k256, _mm512_loadu_si512(p + 64));
    x2 = Fold(x2, k256, _mm512_loadu_si512(p + 128));
    x3 = Fold(x3, k256, _mm512_loadu_si512(p + 192));
  }
  // Everything onto the last 64 bytes, then the four lanes onto the last 16.
  x3 = Fold(x0, Broadcast(k.k192), x3);
  x3 = Fold(x1, Broadcast(k.k128), x3);
  x3 = Fold(x2, Broadcast(k.k64), x3);
  const FoldKey zero = {0, 0};
  const __m512i lane_keys = _mm512_inserti32x4(
      _mm512_inserti32x4(
          _mm512_inserti32x4(_mm512_zextsi128_si512(_mm_load_si128(
                                 reinterpret_cast<const __m128i*>(&k.k48))),
                             _mm_load_si128(reinterpret_cast<const __m128i*>(&k.k32)), 1),
          _mm_load_si128(reinterpret_cast<const __m128i*>(&k.k16)), 2),
      _mm_load_si128(reinterpret_cast<const __m128i*>(&zero)), 3);
  const __m512i y = Fold(x3, lane_keys, _mm512_setzero_si512());
  __m128i r = _mm_xor_si128(_mm512_extracti32x4_epi32(y, 0), _mm512_extracti32x4_epi32(y, 1));
  r = _mm_xor_si128(r, _mm512_extracti32x4_epi32(y, 2));
  r = _mm_xor_si128(r, _mm512_extracti32x4_epi32(x3, 3));
  uint64_t c = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(r)));
  c = _mm_crc32_u64(c, static_cast<uint64_t>(_mm_extract_epi64(r, 1)));
  return RawSse42(static_cast<uint32_t>(c), p, n);
}

}  // namespace swa::crc32c_internal

#endif  // __x86_64__
