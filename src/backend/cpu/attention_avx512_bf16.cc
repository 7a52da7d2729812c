// AVX512-BF16 attention kernels (compiled with -mavx512bf16; attention.cc only
// calls them after checking cpuid). vdpbf16ps multiplies pairs of BF16 values
// and adds both products to an FP32 lane, so both GEMMs take their depth in
// pairs: K^T panels hold 16 keys x (d, d+1) per register, V holds
// (key, key+1) x 16 columns. The products are exact (BF16 x BF16 fits FP32)
// and accumulate in FP32. The driver is attention_bf16.cc.
#if defined(__x86_64__)

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/attention_kernels.h"
#include "backend/cpu/avx512_reduce.h"

namespace swa::cpu {
namespace {

inline __m512bh AsBh(__m512i x) { return (__m512bh)x; }

// The 32-bit pair at p (two BF16 values), broadcast to every lane.
inline __m512i BroadcastPair(const uint16_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm512_set1_epi32(v);
}

// 16 rows of 16 dwords -> 16 columns (in place): r[c] becomes column c.
inline void Transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int k = 0; k < 8; ++k) {
    t[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 4; ++k) {
    u[4 * k + 0] = _mm512_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 1] = _mm512_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 2] = _mm512_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
    u[4 * k + 3] = _mm512_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
  }
  // u[4k + j], 128-bit lane L, holds column 4L + j of rows 4k .. 4k + 3.
  for (int j = 0; j < 4; ++j) {
    const __m512i v01 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44);
    const __m512i w01 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44);
    const __m512i v23 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xEE);
    const __m512i w23 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xEE);
    r[j] = _mm512_shuffle_i32x4(v01, w01, 0x88);
    r[4 + j] = _mm512_shuffle_i32x4(v01, w01, 0xDD);
    r[8 + j] = _mm512_shuffle_i32x4(v23, w23, 0x88);
    r[12 + j] = _mm512_shuffle_i32x4(v23, w23, 0xDD);
  }
}

// 32 consecutive values -> 16 dwords of BF16 pairs (x[2i] low, x[2i+1] high).
inline __m512i PairsOf(const float* x) {
  return _mm512_castps_si512(
      (__m512)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x)));
}
inline __m512i PairsOf(const uint16_t* x) { return _mm512_loadu_si512(x); }

// 16 consecutive values -> 16 dwords, the value in the low half.
inline __m512i Widen(const float* x) {
  return _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x)));
}
inline __m512i Widen(const uint16_t* x) {
  return _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
}

// dst[p][d/2][16][2]: panel p holds keys 16p .. 16p + 15, depth in pairs.
template <typename T>
void PackKt(const T* k, ptrdiff_t ldk, int n_keys, int d, uint16_t* dst) {
  for (int p0 = 0; p0 < n_keys; p0 += kTileCols) {
    int32_t* panel = reinterpret_cast<int32_t*>(dst + static_cast<ptrdiff_t>(p0) * d);
    const int keys = n_keys - p0 < kTileCols ? n_keys - p0 : kTileCols;
    for (int e = 0; e < d; e += 32) {
      __m512i r[16];
      for (int c = 0; c < kTileCols; ++c)
        r[c] = c < keys ? PairsOf(k + (p0 + c) * ldk + e) : _mm512_setzero_si512();
      Transpose16(r);
      for (int c = 0; c < 16; ++c) _mm512_storeu_si512(panel + (e / 2 + c) * kTileCols, r[c]);
    }
  }
}

// dst[e / 16][q][e % 16][r] = key 2q + r (zero past n_keys), element e: each
// 16-column slab holds its key pairs contiguously (64 bytes apart), so P.V
// streams them (a stride of 2 * d values would alias to a few L1 sets).
template <typename T>
void PackV(const T* v, ptrdiff_t ldv, int n_keys, int d, uint16_t* dst) {
  const ptrdiff_t slab = static_cast<ptrdiff_t>(PairSlabStride(n_keys));
  for (int key = 0; key < n_keys; key += 2) {
    uint16_t* out = dst + static_cast<ptrdiff_t>(key / 2) * 32;
    const T* a = v + key * ldv;
    const T* b = key + 1 < n_keys ? v + (key + 1) * ldv : nullptr;
    for (int e = 0; e < d; e += 16) {
      const __m512i lo = Widen(a + e);
      __m512i hi = _mm512_setzero_si512();
      if (b != nullptr) hi = _mm512_slli_epi32(Widen(b + e), 16);
      _mm512_storeu_si512(out + (e / 16) * slab, _mm512_or_si512(lo, hi));
    }
  }
}

template <int M>
void GemmQkMx16(int kpairs, const uint16_t* a, ptrdiff_t lda, const uint16_t* b, float alpha,
                float* c, ptrdiff_t ldc, bool accumulate) {
  __m512 even[M], odd[M];
#pragma GCC unroll 6
  for (int i = 0; i < M; ++i) even[i] = odd[i] = _mm512_setzero_ps();
  int kp = 0;
  for (; kp + 2 <= kpairs; kp += 2) {
    const __m512bh b0 = AsBh(_mm512_loadu_si512(b + kp * 32));
    const __m512bh b1 = AsBh(_mm512_loadu_si512(b + kp * 32 + 32));
#pragma GCC unroll 6
    for (int i = 0; i < M; ++i) {
      even[i] = _mm512_dpbf16_ps(even[i], AsBh(BroadcastPair(a + i * lda + 2 * kp)), b0);
      odd[i] = _mm512_dpbf16_ps(odd[i], AsBh(BroadcastPair(a + i * lda + 2 * kp + 2)), b1);
    }
  }
  if (kp < kpairs) {
    const __m512bh b0 = AsBh(_mm512_loadu_si512(b + kp * 32));
#pragma GCC unroll 6
    for (int i = 0; i < M; ++i)
      even[i] = _mm512_dpbf16_ps(even[i], AsBh(BroadcastPair(a + i * lda + 2 * kp)), b0);
  }
  const __m512 va = _mm512_set1_ps(alpha);
#pragma GCC unroll 6
  for (int i = 0; i < M; ++i) {
    const __m512 base = accumulate ? _mm512_loadu_ps(c + i * ldc) : _mm512_setzero_ps();
    _mm512_storeu_ps(c + i * ldc, _mm512_fmadd_ps(_mm512_add_ps(even[i], odd[i]), va, base));
  }
}

void GemmQk(int m, int kpairs, const uint16_t* a, ptrdiff_t lda, const uint16_t* b, float alpha,
            float* c, ptrdiff_t ldc, bool accumulate) {
  ForTileRows(m, [&](auto rows) {
    GemmQkMx16<rows.value>(kpairs, a, lda, b, alpha, c, ldc, accumulate);
  });
}

// M rows by N (<= 4) keys of GemmQkRows: M * N accumulators, one per score,
// each summing 32 products (16 lanes x a pair) per step of the depth.
template <int M, int N, typename T>
void QkRowsTile(int kpairs, const uint16_t* a, ptrdiff_t lda, const T* k, ptrdiff_t ldk,
                float alpha, float* c, ptrdiff_t ldc) {
  __m512 acc[M][N];
#pragma GCC unroll 6
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int e = 0; e < 2 * kpairs; e += 32) {
    __m512bh kv[N];
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) kv[j] = AsBh(PairsOf(k + j * ldk + e));
#pragma GCC unroll 6
    for (int i = 0; i < M; ++i) {
      const __m512bh q = AsBh(_mm512_loadu_si512(a + i * lda + e));
#pragma GCC unroll 4
      for (int j = 0; j < N; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], q, kv[j]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) c[i * ldc + j] = ReduceAdd(acc[i][j]) * alpha;
}

// gemm_qk_rows: the scores of n keys read from their rows, four at a time.
template <typename T>
void GemmQkRows(int m, int n, int kpairs, const uint16_t* a, ptrdiff_t lda, const T* k,
                ptrdiff_t ldk, float alpha, float* c, ptrdiff_t ldc) {
  ForTileRows(m, [&](auto rows) {
    constexpr int M = rows.value;
    for (int j = 0; j < n; j += 4) {
      const T* kj = k + j * ldk;
      switch (n - j) {
        case 1: QkRowsTile<M, 1>(kpairs, a, lda, kj, ldk, alpha, c + j, ldc); break;
        case 2: QkRowsTile<M, 2>(kpairs, a, lda, kj, ldk, alpha, c + j, ldc); break;
        case 3: QkRowsTile<M, 3>(kpairs, a, lda, kj, ldk, alpha, c + j, ldc); break;
        default: QkRowsTile<M, 4>(kpairs, a, lda, kj, ldk, alpha, c + j, ldc); break;
      }
    }
  });
}

// One key of a packed pair as FP32 (exact): the low or the high half.
inline __m512 KeyOfPair(const uint16_t* pair, int half) {
  const __m512i x = _mm512_loadu_si512(pair);
  return _mm512_castsi512_ps(half ? _mm512_and_si512(x, _mm512_set1_epi32(int32_t(0xFFFF0000u)))
                                  : _mm512_slli_epi32(x, 16));
}

inline float Bf16ToF32(uint16_t x) {
  const uint32_t bits = uint32_t(x) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// One 16-column slab of GemmPv (pair q at vp + 32 * q).
template <int M>
__attribute__((always_inline)) inline void GemmPvMx16(int k0, int k1, const uint16_t* p,
                                                      ptrdiff_t ldp, const uint16_t* vp, float* c,
                                                      ptrdiff_t ldc, bool accumulate,
                                                      const float* row_scale) {
  constexpr ptrdiff_t kPair = 32;
  __m512 even[M], odd[M];
#pragma GCC unroll 6
  for (int i = 0; i < M; ++i) {
    even[i] = accumulate ? _mm512_loadu_ps(c + i * ldc) : _mm512_setzero_ps();
    odd[i] = _mm512_setzero_ps();
  }
  // Edge keys whose pair partner lies outside [k0, k1): one FP32 product each,
  // so the partner (which may hold anything) is never read into an output.
  auto single = [&](int key) {
    const __m512 v = KeyOfPair(vp + (key / 2) * kPair, key & 1);
#pragma GCC unroll 6
    for (int i = 0; i < M; ++i)
      even[i] = _mm512_fmadd_ps(_mm512_set1_ps(Bf16ToF32(p[i * ldp + key])), v, even[i]);
  };
  const int q0 = (k0 + 1) / 2;
  const int q1 = k1 / 2;
  if (q0 >= q1) {  // no whole pair: one or two keys
    for (int key = k0; key < k1; ++key) single(key);
  } else {
    if (k0 & 1) single(k0);
    int q = q0;
    for (; q + 2 <= q1; q += 2) {
      const __m512bh v0 = AsBh(_mm512_loadu_si512(vp + q * kPair));
      const __m512bh v1 = AsBh(_mm512_loadu_si512(vp + (q + 1) * kPair));
#pragma GCC unroll 6
      for (int i = 0; i < M; ++i) {
        even[i] = _mm512_dpbf16_ps(even[i], AsBh(BroadcastPair(p + i * ldp + 2 * q)), v0);
        odd[i] = _mm512_dpbf16_ps(odd[i], AsBh(BroadcastPair(p + i * ldp + 2 * q + 2)), v1);
      }
    }
    if (q < q1) {
      const __m512bh v0 = AsBh(_mm512_loadu_si512(vp + q * kPair));
#pragma GCC unroll 6
      for (int i = 0; i < M; ++i)
        even[i] = _mm512_dpbf16_ps(even[i], AsBh(BroadcastPair(p + i * ldp + 2 * q)), v0);
    }
    if (k1 & 1) single(k1 - 1);
  }
#pragma GCC unroll 6
  for (int i = 0; i < M; ++i) {
    const __m512 sum = _mm512_add_ps(even[i], odd[i]);
    _mm512_storeu_ps(c + i * ldc,
                     row_scale != nullptr ? _mm512_mul_ps(sum, _mm512_set1_ps(row_scale[i])) : sum);
  }
}

void GemmPv(int m, int k0, int k1, const uint16_t* p, ptrdiff_t ldp, const uint16_t* vp,
            ptrdiff_t slab, int cols, float* c, ptrdiff_t ldc, bool accumulate,
            const float* row_scale) {
  ForTileRows(m, [&](auto rows) {
    for (int j = 0; j < cols; j += kTileCols)
      GemmPvMx16<rows.value>(k0, k1, p, ldp, vp + (j / kTileCols) * slab, c + j, ldc, accumulate,
                             row_scale);
  });
}

// Round to nearest even (vcvtneps2bf16).
void ToBf16(const float* src, int n, uint16_t* dst) {
  int i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + i)));
  if (i < n) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm256_mask_storeu_epi16(dst + i, mask,
                             (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, src + i)));
  }
}

}  // namespace

const Bf16AttentionKernels* Avx512Bf16AttentionKernels() {
  static const Bf16AttentionKernels kBf16 = {
      "avx512_bf16", PackKt<float>,  PackV<float>, PackKt<uint16_t>, PackV<uint16_t>, GemmQk,
      GemmPv,        ToBf16,         GemmQkRows<float>, GemmQkRows<uint16_t>};
  return &kBf16;
}

}  // namespace swa::cpu

#else  // not x86-64

#include "backend/cpu/attention_kernels.h"

namespace swa::cpu {
const Bf16AttentionKernels* Avx512Bf16AttentionKernels() { return nullptr; }
}  // namespace swa::cpu

#endif
