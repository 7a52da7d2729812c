// AVX-512 attention kernels (compiled with -mavx512f/bw/vl; attention.cc only
// calls them after checking cpuid). A 16-key panel row is one zmm register, so
// the Mx16 tile (GemmTile<Zmm>) keeps M accumulators; the k loop is split over
// two accumulator sets (even and odd k) for 2M independent FMA chains, enough
// to cover the FMA latency on both ports. The K^T packing is the AVX2 kernel's.
#if defined(__x86_64__)

// GCC 12's AVX-512 headers build unmasked operations on _mm512_undefined_ps()
// and then warn about it at -Wall; the values are never read.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/attention_kernels.h"
#include "backend/cpu/avx512_reduce.h"

namespace swa::cpu {
namespace {

// One register width of the Mx(lanes) tile: zmm (16 columns) or ymm (8).
struct Zmm {
  using V = __m512;
  static V Load(const float* p) { return _mm512_loadu_ps(p); }
  static V Zero() { return _mm512_setzero_ps(); }
  static V Set1(float x) { return _mm512_set1_ps(x); }
  static V Fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V Add(V a, V b) { return _mm512_add_ps(a, b); }
  static V Mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static void Store(float* p, V x) { _mm512_storeu_ps(p, x); }
};
struct Ymm {
  using V = __m256;
  static V Load(const float* p) { return _mm256_loadu_ps(p); }
  static V Zero() { return _mm256_setzero_ps(); }
  static V Set1(float x) { return _mm256_set1_ps(x); }
  static V Fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V Add(V a, V b) { return _mm256_add_ps(a, b); }
  static V Mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static void Store(float* p, V x) { _mm256_storeu_ps(p, x); }
};

// C[M x lanes] (+)= A[M x k] B[k x lanes], one register per row; row i then
// multiplied by row_scale[i] unless row_scale is nullptr.
template <class R, int M>
void GemmTile(int k, const float* a, ptrdiff_t lda, const float* b, ptrdiff_t ldb, float* c,
              ptrdiff_t ldc, bool accumulate, const float* row_scale = nullptr) {
  typename R::V even[M], odd[M];
#pragma GCC unroll 6
  for (int i = 0; i < M; ++i) {
    even[i] = accumulate ? R::Load(c + i * ldc) : R::Zero();
    odd[i] = R::Zero();
  }
  int kk = 0;
  for (; kk + 2 <= k; kk += 2) {
    const typename R::V b0 = R::Load(b);
    const typename R::V b1 = R::Load(b + ldb);
    b += 2 * ldb;
#pragma GCC unroll 6
    for (int i = 0; i < M; ++i) {
      even[i] = R::Fma(R::Set1(a[i * lda + kk]), b0, even[i]);
      odd[i] = R::Fma(R::Set1(a[i * lda + kk + 1]), b1, odd[i]);
    }
  }
  if (kk < k) {
    const typename R::V b0 = R::Load(b);
#pragma GCC unroll 6
    for (int i = 0; i < M; ++i) even[i] = R::Fma(R::Set1(a[i * lda + kk]), b0, even[i]);
  }
#pragma GCC unroll 6
  for (int i = 0; i < M; ++i) {
    const typename R::V sum = R::Add(even[i], odd[i]);
    R::Store(c + i * ldc, row_scale != nullptr ? R::Mul(sum, R::Set1(row_scale[i])) : sum);
  }
}

void Gemm(int m, int k, const float* a, ptrdiff_t lda, const float* b, ptrdiff_t ldb, float* c,
          ptrdiff_t ldc, bool accumulate) {
  ForTileRows(m, [&](auto rows) {
    GemmTile<Zmm, rows.value>(k, a, lda, b, ldb, c, ldc, accumulate);
  });
}

// gemm_pv: the Mx16 tile over each 16-column slab of B in turn.
void GemmPv(int m, int k, const float* a, ptrdiff_t lda, const float* b, ptrdiff_t slab, int cols,
            float* c, ptrdiff_t ldc, bool accumulate, const float* row_scale) {
  ForTileRows(m, [&](auto rows) {
    for (int j = 0; j < cols; j += kTileCols)
      GemmTile<Zmm, rows.value>(k, a, lda, b + (j / kTileCols) * slab, kTileCols, c + j, ldc,
                                accumulate, row_scale);
  });
}

// The 8-column (ymm) tile: half the FMA cost on a double-pumped core.
void GemmHalf(int m, int k, const float* a, ptrdiff_t lda, const float* b, ptrdiff_t ldb, float* c,
              ptrdiff_t ldc, bool accumulate) {
  ForTileRows(m, [&](auto rows) {
    GemmTile<Ymm, rows.value>(k, a, lda, b, ldb, c, ldc, accumulate);
  });
}

// C[M x 32] (+)= A[M x k] [B0 | B1][k x 32] (two 16-column panels, rows ldb
// apart in each), row i then times row_scale[i] unless nullptr. For cores
// with two full-width 512-bit FMA ports (Intel): one broadcast of A feeds two
// FMAs, so a k step is 2 + M loads for 2M FMAs (the Mx16 tile: 1 + M for M)
// and the load ports keep up; 2M chains (M >= 4: at least 8, the ports'
// 2 x 4-cycle latency), and even/odd k sets below 4 rows.
template <int M>
void GemmTile2(int k, const float* a, ptrdiff_t lda, const float* b0, const float* b1,
               ptrdiff_t ldb, float* c, ptrdiff_t ldc, bool accumulate,
               const float* row_scale = nullptr) {
  constexpr bool kSplit = M < 4;
  __m512 l[M], r[M], l2[kSplit ? M : 1], r2[kSplit ? M : 1];
#pragma GCC unroll 6
  for (int i = 0; i < M; ++i) {
    l[i] = accumulate ? _mm512_loadu_ps(c + i * ldc) : _mm512_setzero_ps();
    r[i] = accumulate ? _mm512_loadu_ps(c + i * ldc + 16) : _mm512_setzero_ps();
    if (kSplit) l2[i] = r2[i] = _mm512_setzero_ps();
  }
  int kk = 0;
  if (kSplit) {
    for (; kk + 2 <= k; kk += 2) {
      const __m512 x0 = _mm512_loadu_ps(b0), y0 = _mm512_loadu_ps(b1);
      const __m512 x1 = _mm512_loadu_ps(b0 + ldb), y1 = _mm512_loadu_ps(b1 + ldb);
      b0 += 2 * ldb;
      b1 += 2 * ldb;
#pragma GCC unroll 3
      for (int i = 0; i < M; ++i) {
        const __m512 e = _mm512_set1_ps(a[i * lda + kk]);
        const __m512 o = _mm512_set1_ps(a[i * lda + kk + 1]);
        l[i] = _mm512_fmadd_ps(e, x0, l[i]);
        r[i] = _mm512_fmadd_ps(e, y0, r[i]);
        l2[i] = _mm512_fmadd_ps(o, x1, l2[i]);
        r2[i] = _mm512_fmadd_ps(o, y1, r2[i]);
      }
    }
  }
  for (; kk < k; ++kk) {
    const __m512 x = _mm512_loadu_ps(b0), y = _mm512_loadu_ps(b1);
    b0 += ldb;
    b1 += ldb;
#pragma GCC unroll 6
    for (int i = 0; i < M; ++i) {
      const __m512 e = _mm512_set1_ps(a[i * lda + kk]);
      l[i] = _mm512_fmadd_ps(e, x, l[i]);
      r[i] = _mm512_fmadd_ps(e, y, r[i]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < M; ++i) {
    __m512 x = l[i], y = r[i];
    if (kSplit) {
      x = _mm512_add_ps(x, l2[i]);
      y = _mm512_add_ps(y, r2[i]);
    }
    if (row_scale != nullptr) {
      const __m512 sc = _mm512_set1_ps(row_scale[i]);
      x = _mm512_mul_ps(x, sc);
      y = _mm512_mul_ps(y, sc);
    }
    _mm512_storeu_ps(c + i * ldc, x);
    _mm512_storeu_ps(c + i * ldc + 16, y);
  }
}

void Gemm2(int m, int k, const float* a, ptrdiff_t lda, const float* b0, const float* b1,
           ptrdiff_t ldb, float* c, ptrdiff_t ldc, bool accumulate) {
  ForTileRows(m, [&](auto rows) {
    GemmTile2<rows.value>(k, a, lda, b0, b1, ldb, c, ldc, accumulate);
  });
}

// gemm_pv with the Mx32 tile: two 16-column slabs at a time.
void GemmPv2(int m, int k, const float* a, ptrdiff_t lda, const float* b, ptrdiff_t slab, int cols,
             float* c, ptrdiff_t ldc, bool accumulate, const float* row_scale) {
  ForTileRows(m, [&](auto rows) {
    int j = 0;
    for (; j + 2 * kTileCols <= cols; j += 2 * kTileCols) {
      const float* b0 = b + (j / kTileCols) * slab;
      GemmTile2<rows.value>(k, a, lda, b0, b0 + slab, kTileCols, c + j, ldc, accumulate,
                            row_scale);
    }
    if (j < cols)
      GemmTile<Zmm, rows.value>(k, a, lda, b + (j / kTileCols) * slab, kTileCols, c + j, ldc,
                                accumulate, row_scale);
  });
}

// Same algorithm and constants as Exp4 in attention_kernels.cc and Exp8 in
// attention_avx2.cc.
inline __m512 Exp16(__m512 x) {
  const __m512 low = _mm512_set1_ps(-87.0f);
  const __mmask16 keep = _mm512_cmp_ps_mask(x, low, _CMP_NLT_UQ);  // false only for x < -87
  x = _mm512_min_ps(_mm512_set1_ps(88.0f), x);  // NaN is the 2nd operand: it passes through
  x = _mm512_max_ps(low, x);
  const __m512 magic = _mm512_set1_ps(12582912.0f);
  const __m512 shifted = _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), magic);
  const __m512 n = _mm512_sub_ps(shifted, magic);
  const __m512i ni = _mm512_sub_epi32(_mm512_castps_si512(shifted), _mm512_castps_si512(magic));
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(ni, _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mov_ps(keep, _mm512_mul_ps(y, _mm512_castsi512_ps(bits)));
}

inline __mmask16 TailMask(int n) { return static_cast<__mmask16>((1u << n) - 1u); }

float RowMax(const float* x, int n) {
  __m512 m = _mm512_set1_ps(-__builtin_inff());
  int i = 0;
  for (; i + 16 <= n; i += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(x + i));
  if (i < n) {
    const __mmask16 mask = TailMask(n - i);
    m = _mm512_mask_max_ps(m, mask, m, _mm512_maskz_loadu_ps(mask, x + i));
  }
  return ReduceMax(m);
}

float ExpSum(float* x, int n, float scale, float m) {
  const __m512 vm = _mm512_set1_ps(m);
  const __m512 vs = _mm512_set1_ps(scale);
  __m512 acc = _mm512_setzero_ps();
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = Exp16(_mm512_fmsub_ps(_mm512_loadu_ps(x + i), vs, vm));
    _mm512_storeu_ps(x + i, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (i < n) {
    const __mmask16 mask = TailMask(n - i);
    const __m512 v = _mm512_fmsub_ps(_mm512_maskz_loadu_ps(mask, x + i), vs, vm);
    const __m512 e = _mm512_maskz_mov_ps(mask, Exp16(v));
    _mm512_mask_storeu_ps(x + i, mask, e);
    acc = _mm512_add_ps(acc, e);
  }
  return ReduceAdd(acc);
}

void ScaleRow(float* dst, const float* src, int n, float s) {
  const __m512 vs = _mm512_set1_ps(s);
  int i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, _mm512_mul_ps(_mm512_loadu_ps(src + i), vs));
  if (i < n) {
    const __mmask16 mask = TailMask(n - i);
    _mm512_mask_storeu_ps(dst + i, mask, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, src + i), vs));
  }
}

// 16x16 transpose of zmm rows: unpack pairs of rows, then shuffle 4-row
// groups within 128-bit lanes, then move the lanes (2 x 16 shuffle_f32x4).
inline void Transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  // u[4g + j], lane b: element 4b + j of rows 4g .. 4g + 3.
  for (int g = 0; g < 16; g += 4) {
    u[g + 0] = _mm512_shuffle_ps(t[g], t[g + 2], 0x44);
    u[g + 1] = _mm512_shuffle_ps(t[g], t[g + 2], 0xEE);
    u[g + 2] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0x44);
    u[g + 3] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88);
    const __m512 v1 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD);
    const __m512 w0 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
    const __m512 w1 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);
    r[j] = _mm512_shuffle_f32x4(v0, w0, 0x88);
    r[4 + j] = _mm512_shuffle_f32x4(v1, w1, 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(v0, w0, 0xDD);
    r[12 + j] = _mm512_shuffle_f32x4(v1, w1, 0xDD);
  }
}

// 16 BF16 values widened to FP32 (exact: the BF16 bits are the high half).
inline __m512 WidenBf16(const uint8_t* p) {
  const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(x), 16));
}

void PackKtBf16(const uint8_t* const* rows, size_t offset, int n_keys, int d, float* dst) {
  for (int p0 = 0; p0 < n_keys; p0 += kTileCols) {
    float* panel = dst + static_cast<ptrdiff_t>(p0) * d;
    const uint8_t* src[kTileCols];
    for (int c = 0; c < kTileCols; ++c)
      src[c] = p0 + c < n_keys && rows[p0 + c] != nullptr ? rows[p0 + c] + offset : nullptr;
    for (int e = 0; e < d; e += 16) {
      __m512 r[16];
      for (int c = 0; c < kTileCols; ++c)
        r[c] = src[c] != nullptr ? WidenBf16(src[c] + sizeof(uint16_t) * e) : _mm512_setzero_ps();
      Transpose16(r);
      for (int i = 0; i < 16; ++i) _mm512_storeu_ps(panel + (e + i) * kTileCols, r[i]);
    }
  }
}

void SlabsBf16(const uint8_t* const* rows, size_t offset, int n_keys, int d, float* dst,
               ptrdiff_t slab) {
  for (int r = 0; r < n_keys; ++r) {
    float* out = dst + static_cast<ptrdiff_t>(r) * kTileCols;
    if (rows[r] == nullptr) {
      for (int j = 0; j < d; j += kTileCols) _mm512_storeu_ps(out + (j / kTileCols) * slab, _mm512_setzero_ps());
      continue;
    }
    const uint8_t* src = rows[r] + offset;
    for (int j = 0; j < d; j += kTileCols)
      _mm512_storeu_ps(out + (j / kTileCols) * slab, WidenBf16(src + sizeof(uint16_t) * j));
  }
}

}  // namespace

const AttentionKernels* Avx512AttentionKernels() {
  const AttentionKernels* avx2 = Avx2AttentionKernels();
  if (avx2 == nullptr) return nullptr;
  static const AttentionKernels kAvx512 = {"avx512",      Gemm,       RowMax,   ExpSum,
                                           ScaleRow,      avx2->pack_kt, GemmHalf, GemmPv,
                                           nullptr,       PackKtBf16, SlabsBf16};
  return &kAvx512;
}

const AttentionKernels* Avx512WideAttentionKernels() {
  const AttentionKernels* avx2 = Avx2AttentionKernels();
  if (avx2 == nullptr) return nullptr;
  static const AttentionKernels kWide = {"avx512_wide", Gemm,       RowMax,   ExpSum,
                                         ScaleRow,      avx2->pack_kt, GemmHalf, GemmPv2,
                                         Gemm2,         PackKtBf16, SlabsBf16};
  return &kWide;
}

}  // namespace swa::cpu

#else  // not x86-64

#include "backend/cpu/attention_kernels.h"

namespace swa::cpu {
const AttentionKernels* Avx512AttentionKernels() { return nullptr; }
const AttentionKernels* Avx512WideAttentionKernels() { return nullptr; }
}  // namespace swa::cpu

#endif
