// Portable attention kernels: GCC/Clang vector extensions of 4 floats, which
// lower to SSE2 on baseline x86-64 and to NEON on AArch64. Same arithmetic as
// the AVX2 set (attention_avx2.cc) except that multiply and add round
// separately.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cpu/attention_kernels.h"

namespace swa::cpu {
namespace {

typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

inline v4f Load(const float* p) {
  v4f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void Store(float* p, v4f v) { std::memcpy(p, &v, sizeof v); }
inline v4f Splat(float x) { return v4f{x, x, x, x}; }

// One half (8 columns) of an Mx16 tile: 12 accumulators at most, so they fit
// the 16 SSE registers with room for the B row and the broadcast.
template <int M>
void GemmMx8(int k, const float* a, ptrdiff_t lda, const float* b, ptrdiff_t ldb, float* c,
             ptrdiff_t ldc, bool accumulate) {
  v4f c0[M], c1[M];
  for (int i = 0; i < M; ++i) {
    c0[i] = accumulate ? Load(c + i * ldc) : Splat(0.0f);
    c1[i] = accumulate ? Load(c + i * ldc + 4) : Splat(0.0f);
  }
  for (int kk = 0; kk < k; ++kk) {
    const v4f b0 = Load(b + kk * ldb);
    const v4f b1 = Load(b + kk * ldb + 4);
    for (int i = 0; i < M; ++i) {
      const v4f x = Splat(a[i * lda + kk]);
      c0[i] += x * b0;
      c1[i] += x * b1;
    }
  }
  for (int i = 0; i < M; ++i) {
    Store(c + i * ldc, c0[i]);
    Store(c + i * ldc + 4, c1[i]);
  }
}

template <int M>
void GemmMx16(int k, const float* a, ptrdiff_t lda, const float* b, ptrdiff_t ldb, float* c,
              ptrdiff_t ldc, bool accumulate) {
  GemmMx8<M>(k, a, lda, b, ldb, c, ldc, accumulate);
  GemmMx8<M>(k, a, lda, b + 8, ldb, c + 8, ldc, accumulate);
}

void Gemm(int m, int k, const float* a, ptrdiff_t lda, const float* b, ptrdiff_t ldb, float* c,
          ptrdiff_t ldc, bool accumulate) {
  ForTileRows(m, [&](auto rows) { GemmMx16<rows.value>(k, a, lda, b, ldb, c, ldc, accumulate); });
}

// exp(x) for x <= 88: Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, a
// degree-7 polynomial (Cephes expf coefficients, ~1 ulp) and 2^n built from
// the exponent bits. Results below exp(-87) (~FLT_MIN) flush to 0; NaN stays.
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.12194440e-4f;
constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
constexpr float kExpLow = -87.0f;
constexpr float kExpHigh = 88.0f;
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;

inline v4f Exp4(v4f x) {
  const v4i underflow = x < Splat(kExpLow);
  x = x > Splat(kExpHigh) ? Splat(kExpHigh) : x;
  x = x < Splat(kExpLow) ? Splat(kExpLow) : x;
  const v4f shifted = x * Splat(kLog2e) + Splat(kRoundMagic);
  const v4f n = shifted - Splat(kRoundMagic);
  const v4i ni = (v4i)shifted - (v4i)Splat(kRoundMagic);
  const v4f r = (x - n * Splat(kLn2Hi)) - n * Splat(kLn2Lo);
  v4f p = Splat(kP0);
  p = p * r + Splat(kP1);
  p = p * r + Splat(kP2);
  p = p * r + Splat(kP3);
  p = p * r + Splat(kP4);
  p = p * r + Splat(kP5);
  const v4f y = p * (r * r) + r + Splat(1.0f);
  const v4f two_n = (v4f)((ni + 127) << 23);
  return (v4f)((v4i)(y * two_n) & ~underflow);
}

inline float Exp1(float x) {
  float lanes[4] = {x, x, x, x};
  const v4f e = Exp4(Load(lanes));
  return e[0];
}

float RowMax(const float* x, int n) {
  int i = 0;
  float m = x[0];
  if (n >= 4) {
    v4f vm = Load(x);
    for (i = 4; i + 4 <= n; i += 4) {
      const v4f v = Load(x + i);
      vm = v > vm ? v : vm;
    }
    m = std::max(std::max(vm[0], vm[1]), std::max(vm[2], vm[3]));
  }
  for (; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

float ExpSum(float* x, int n, float scale, float m) {
  v4f acc = Splat(0.0f);
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    const v4f e = Exp4(Load(x + i) * Splat(scale) - Splat(m));
    Store(x + i, e);
    acc += e;
  }
  float sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  for (; i < n; ++i) {
    x[i] = Exp1(x[i] * scale - m);
    sum += x[i];
  }
  return sum;
}

void ScaleRow(float* dst, const float* src, int n, float s) {
  int i = 0;
  for (; i + 4 <= n; i += 4) Store(dst + i, Load(src + i) * Splat(s));
  for (; i < n; ++i) dst[i] = src[i] * s;
}

void PackKt(const float* k, ptrdiff_t ldk, int n_keys, int d, float* dst) {
  for (int p0 = 0; p0 < n_keys; p0 += kTileCols) {
    float* panel = dst + static_cast<ptrdiff_t>(p0) * d;
    for (int c = 0; c < kTileCols; ++c) {
      if (p0 + c < n_keys) {
        const float* row = k + (p0 + c) * ldk;
        for (int e = 0; e < d; ++e) panel[e * kTileCols + c] = row[e];
      } else {
        for (int e = 0; e < d; ++e) panel[e * kTileCols + c] = 0.0f;
      }
    }
  }
}

constexpr AttentionKernels kPortable = {"portable", Gemm, RowMax, ExpSum, ScaleRow, PackKt,
                                           nullptr, nullptr, nullptr, nullptr,
                                           nullptr};

}  // namespace

const AttentionKernels& PortableAttentionKernels() { return kPortable; }

}  // namespace swa::cpu
