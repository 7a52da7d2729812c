#include "backend/cpu/gemm_microkernel.h"

namespace swa::cpu {
namespace {
__attribute__((optimize("O3"))) void Kernel(int64_t kc, const float* a, const float* b, float* c,
                                            int64_t ldc) {
  MicroKernelImpl(kc, a, b, c, ldc);
}
}  // namespace

MicroKernelFn BaselineMicroKernel() { return &Kernel; }

#if !defined(__x86_64__)
MicroKernelFn Avx2MicroKernel() { return nullptr; }
#endif

}  // namespace swa::cpu
