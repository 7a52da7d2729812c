// Compiled with -mavx2 -mfma (file name suffix); only called after a cpuid check.
#include "backend/cpu/gemm_microkernel.h"

#if defined(__x86_64__)
namespace swa::cpu {

MicroKernelFn Avx2MicroKernel() { return &MicroKernelO3; }

}  // namespace swa::cpu
#endif
