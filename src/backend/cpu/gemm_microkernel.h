// The register-blocked inner kernel of the CPU projection GEMM, as a header
// so that it is compiled twice: baseline (gemm_kernel.cc) and AVX2+FMA
// (gemm_kernel_avx2.cc), chosen at run time.
#pragma once

#include <cstdint>

namespace swa::cpu {

inline constexpr int kMr = 4;   // rows of the register tile
inline constexpr int kNr = 16;  // columns of the register tile

using MicroKernelFn = void (*)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc);

MicroKernelFn BaselineMicroKernel();
MicroKernelFn Avx2MicroKernel();  // nullptr when not built for x86-64

// The kernel itself is local to each file that includes this header (unnamed
// namespace): each of the two compiles it with its own target flags, and the
// linker must never fold one into the other.
namespace {

// c[kMr][ldc] += a[k][kMr] (packed, column of the A block per k) x b[k][kNr]
// (packed panel, row of kNr per k), over `kc` steps. Fixed trip counts so the
// compiler keeps acc in vector registers.
void MicroKernelImpl(int64_t kc, const float* __restrict a, const float* __restrict b,
                     float* __restrict c, int64_t ldc) {
  float acc[kMr][kNr];
  for (int i = 0; i < kMr; ++i)
    for (int j = 0; j < kNr; ++j) acc[i][j] = c[i * ldc + j];
  for (int64_t k = 0; k < kc; ++k) {
    const float* bk = b + k * kNr;
    const float* ak = a + k * kMr;
    for (int i = 0; i < kMr; ++i) {
      const float ai = ak[i];
      for (int j = 0; j < kNr; ++j) acc[i][j] += ai * bk[j];
    }
  }
  for (int i = 0; i < kMr; ++i)
    for (int j = 0; j < kNr; ++j) c[i * ldc + j] = acc[i][j];
}

// MicroKernelImpl out of line, with O3 for the full unroll.
[[maybe_unused]] __attribute__((optimize("O3"))) void MicroKernelO3(int64_t kc, const float* a,
                                                                    const float* b, float* c,
                                                                    int64_t ldc) {
  MicroKernelImpl(kc, a, b, c, ldc);
}

}  // namespace

}  // namespace swa::cpu
