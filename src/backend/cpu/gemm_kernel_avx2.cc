// Compiled with -mavx2 -mfma (file name suffix); only called after a cpuid check.
#include "backend/cpu/gemm_microkernel.h"

#if defined(__x86_64__)
namespace swa::cpu {
namespace {
__attribute__((optimize("O3"))) void Kernel(int64_t kc, const float* a, const float* b, float* c,
                                            int64_t ldc) {
  MicroKernelImpl(kc, a, b, c, ldc);
}
}  // namespace

MicroKernelFn Avx2MicroKernel() { return &Kernel; }

}  // namespace swa::cpu
#endif
