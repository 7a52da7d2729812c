// AVX2/FMA attention kernels (compiled with -mavx2 -mfma; attention.cc only
// calls them after checking cpuid). The 6x16 tile keeps 12 accumulators, two
// B vectors and one broadcast in the 16 ymm registers: per k step 2 loads of B,
// 6 broadcasts and 12 FMAs, so the two FMA ports stay the bottleneck.
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "backend/cpu/attention_kernels.h"

namespace swa::cpu {
namespace {

template <int M>
void GemmMx16(int k, const float* a, ptrdiff_t lda, const float* b, ptrdiff_t ldb, float* c,
              ptrdiff_t ldc, bool accumulate) {
  __m256 c0[M], c1[M];
#pragma GCC unroll 6
  for (int i = 0; i < M; ++i) {
    c0[i] = accumulate ? _mm256_loadu_ps(c + i * ldc) : _mm256_setzero_ps();
    c1[i] = accumulate ? _mm256_loadu_ps(c + i * ldc + 8) : _mm256_setzero_ps();
  }
#pragma GCC unroll 2
  for (int kk = 0; kk < k; ++kk) {
    const __m256 b0 = _mm256_loadu_ps(b);
    const __m256 b1 = _mm256_loadu_ps(b + 8);
    b += ldb;
#pragma GCC unroll 6
    for (int i = 0; i < M; ++i) {
      const __m256 x = _mm256_broadcast_ss(a + i * lda + kk);
      c0[i] = _mm256_fmadd_ps(x, b0, c0[i]);
      c1[i] = _mm256_fmadd_ps(x, b1, c1[i]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < M; ++i) {
    _mm256_storeu_ps(c + i * ldc, c0[i]);
    _mm256_storeu_ps(c + i * ldc + 8, c1[i]);
  }
}

void Gemm(int m, int k, const float* a, ptrdiff_t lda, const float* b, ptrdiff_t ldb, float* c,
          ptrdiff_t ldc, bool accumulate) {
  ForTileRows(m, [&](auto rows) { GemmMx16<rows.value>(k, a, lda, b, ldb, c, ldc, accumulate); });
}

// Same algorithm and constants as Exp4 in attention_kernels.cc.
inline __m256 Exp8(__m256 x) {
  const __m256 low = _mm256_set1_ps(-87.0f);
  const __m256 keep = _mm256_cmp_ps(x, low, _CMP_NLT_UQ);  // false only for x < -87
  x = _mm256_min_ps(_mm256_set1_ps(88.0f), x);  // NaN is the 2nd operand: it passes through
  x = _mm256_max_ps(low, x);
  const __m256 magic = _mm256_set1_ps(12582912.0f);
  const __m256 shifted = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), magic);
  const __m256 n = _mm256_sub_ps(shifted, magic);
  const __m256i ni = _mm256_sub_epi32(_mm256_castps_si256(shifted), _mm256_castps_si256(magic));
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(ni, _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(_mm256_mul_ps(y, _mm256_castsi256_ps(bits)), keep);
}

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float HorizontalMax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Lanes past n read as -inf / are not written: a masked load keeps every
// access inside the row.
inline __m256i TailMask(int n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
}

float RowMax(const float* x, int n) {
  __m256 m = _mm256_set1_ps(-__builtin_inff());
  int i = 0;
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
  if (i < n) {
    const __m256i mask = TailMask(n - i);
    const __m256 v = _mm256_maskload_ps(x + i, mask);
    m = _mm256_max_ps(m, _mm256_blendv_ps(m, v, _mm256_castsi256_ps(mask)));
  }
  return HorizontalMax(m);
}

float ExpSum(float* x, int n, float scale, float m) {
  const __m256 vm = _mm256_set1_ps(m);
  const __m256 vs = _mm256_set1_ps(scale);
  __m256 acc = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = Exp8(_mm256_fmsub_ps(_mm256_loadu_ps(x + i), vs, vm));
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  if (i < n) {
    const __m256i mask = TailMask(n - i);
    __m256 e = Exp8(_mm256_fmsub_ps(_mm256_maskload_ps(x + i, mask), vs, vm));
    e = _mm256_and_ps(e, _mm256_castsi256_ps(mask));
    _mm256_maskstore_ps(x + i, mask, e);
    acc = _mm256_add_ps(acc, e);
  }
  return HorizontalSum(acc);
}

void ScaleRow(float* dst, const float* src, int n, float s) {
  const __m256 vs = _mm256_set1_ps(s);
  int i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_loadu_ps(src + i), vs));
  for (; i < n; ++i) dst[i] = src[i] * s;
}

// 8x8 transpose of ymm rows (the classic unpack/shuffle/permute network).
inline void Transpose8(__m256& r0, __m256& r1, __m256& r2, __m256& r3, __m256& r4, __m256& r5,
                       __m256& r6, __m256& r7) {
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r0 = _mm256_permute2f128_ps(u0, u4, 0x20), r4 = _mm256_permute2f128_ps(u0, u4, 0x31);
  r1 = _mm256_permute2f128_ps(u1, u5, 0x20), r5 = _mm256_permute2f128_ps(u1, u5, 0x31);
  r2 = _mm256_permute2f128_ps(u2, u6, 0x20), r6 = _mm256_permute2f128_ps(u2, u6, 0x31);
  r3 = _mm256_permute2f128_ps(u3, u7, 0x20), r7 = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// Transposes 8 keys (rows[0..8), some possibly absent = zero) x d elements
// into columns [c0, c0+8) of a kTileCols-wide panel. d is a multiple of 8.
inline void PackEight(const float* const rows[8], int d, float* panel, int c0) {
  for (int e = 0; e < d; e += 8) {
    __m256 r[8];
    for (int i = 0; i < 8; ++i)
      r[i] = rows[i] != nullptr ? _mm256_loadu_ps(rows[i] + e) : _mm256_setzero_ps();
    Transpose8(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
    for (int i = 0; i < 8; ++i) _mm256_storeu_ps(panel + (e + i) * kTileCols + c0, r[i]);
  }
}

void PackKt(const float* k, ptrdiff_t ldk, int n_keys, int d, float* dst) {
  for (int p0 = 0; p0 < n_keys; p0 += kTileCols) {
    float* panel = dst + static_cast<ptrdiff_t>(p0) * d;
    // The tile is usually cold (L3): fetch the next panel's keys while this
    // one is transposed.
    for (int key = p0 + kTileCols; key < std::min(n_keys, p0 + 2 * kTileCols); ++key)
      for (int e = 0; e < d; e += 16) _mm_prefetch(reinterpret_cast<const char*>(k + key * ldk + e), _MM_HINT_T1);
    for (int half = 0; half < kTileCols; half += 8) {
      const float* rows[8];
      for (int i = 0; i < 8; ++i) {
        const int key = p0 + half + i;
        rows[i] = key < n_keys ? k + key * ldk : nullptr;
      }
      PackEight(rows, d, panel, half);
    }
  }
}

constexpr AttentionKernels kAvx2 = {"avx2_fma", Gemm, RowMax, ExpSum, ScaleRow, PackKt,
                                       nullptr, nullptr, nullptr, nullptr,
                                       nullptr};

}  // namespace

const AttentionKernels* Avx2AttentionKernels() { return &kAvx2; }

}  // namespace swa::cpu

#else  // not x86

#include "backend/cpu/attention_kernels.h"

namespace swa::cpu {
const AttentionKernels* Avx2AttentionKernels() { return nullptr; }
}  // namespace swa::cpu

#endif
