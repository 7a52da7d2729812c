// Horizontal max / sum of a zmm by folding halves (GCC 12's _mm512_reduce_*
// warn at -Wall). For translation units compiled with AVX-512 F only
// (attention_avx512.cc, attention_avx512_bf16.cc); internal linkage, so the
// units' different target flags never meet in one definition.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

namespace swa::cpu {
namespace {  // NOLINT(build/namespaces): one copy per AVX-512 unit, on purpose

inline float ReduceMax(__m512 v) {
  v = _mm512_max_ps(v, _mm512_shuffle_f32x4(v, v, 0x4E));  // 256-bit halves
  v = _mm512_max_ps(v, _mm512_shuffle_f32x4(v, v, 0xB1));  // 128-bit lanes
  __m128 s = _mm512_castps512_ps128(v);
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float ReduceAdd(__m512 v) {
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0x4E));
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0xB1));
  __m128 s = _mm512_castps512_ps128(v);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace
}  // namespace swa::cpu
#endif
