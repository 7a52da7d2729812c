#include "store/stream_copy.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace swa {
namespace {

constexpr size_t kMinStreamBytes = size_t{256} << 10;

#if defined(__x86_64__)
// Aligns the destination with a plain copy, streams whole 64-byte lines,
// then copies the tail.
__attribute__((target("avx512f"))) void StreamAvx512(uint8_t* d, const uint8_t* s, size_t n) {
  const size_t head = (64 - reinterpret_cast<uintptr_t>(d) % 64) % 64;
  std::memcpy(d, s, head);
  d += head, s += head, n -= head;
  for (; n >= 256; d += 256, s += 256, n -= 256) {
    const __m512i a = _mm512_loadu_si512(s), b = _mm512_loadu_si512(s + 64),
                  c = _mm512_loadu_si512(s + 128), e = _mm512_loadu_si512(s + 192);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d), a);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + 64), b);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + 128), c);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + 192), e);
  }
  _mm_sfence();  // streaming stores are weakly ordered: publish before the slot lock is released
  std::memcpy(d, s, n);
}

__attribute__((target("avx2"))) void StreamAvx2(uint8_t* d, const uint8_t* s, size_t n) {
  const size_t head = (32 - reinterpret_cast<uintptr_t>(d) % 32) % 32;
  std::memcpy(d, s, head);
  d += head, s += head, n -= head;
  for (; n >= 128; d += 128, s += 128, n -= 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 64));
    const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 96), e);
  }
  _mm_sfence();
  std::memcpy(d, s, n);
}
#endif

}  // namespace

void StreamCopy(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
  static const int level = __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx2") ? 1 : 0;
  if (bytes >= kMinStreamBytes && level == 2)
    return StreamAvx512(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), bytes);
  if (bytes >= kMinStreamBytes && level == 1)
    return StreamAvx2(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), bytes);
#endif
  std::memcpy(dst, src, bytes);
}

}  // namespace swa
