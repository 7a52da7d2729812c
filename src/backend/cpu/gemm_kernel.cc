// The baseline build of the projection's micro-kernel.
#include "backend/cpu/gemm_microkernel.h"

namespace swa::cpu {

MicroKernelFn BaselineMicroKernel() { return &MicroKernelO3; }

#if !defined(__x86_64__)
MicroKernelFn Avx2MicroKernel() { return nullptr; }
#endif

}  // namespace swa::cpu
