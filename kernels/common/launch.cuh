// Kernel launches that report their own status: cudaLaunchKernel returns the
// launch's error, whereas `kernel<<<>>>(); cudaGetLastError()` would also
// report (and clear) an error the application left on this thread earlier.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/common/smem_optin_cache.h"

namespace swa::kernels {

// Dynamic shared memory a kernel may use without opting in.
inline constexpr size_t kDefaultDynamicSmem = 48 * 1024;

// The per-process record of the opt-ins done (one per kernel and device).
inline SmemOptinCache& KernelSmemOptins() {
  static SmemOptinCache cache;
  return cache;
}

// Launches `kernel(params)` (every kernel here takes one params struct by
// value). Above 48 KiB of dynamic shared memory the kernel must be allowed
// that much on the current device first (cudaFuncSetAttribute), which is done
// on its first such launch there, not on every launch (the CUDA backend
// forgets a device's record when it sets up on it, so a context made anew
// after cudaDeviceReset gets the attribute again).
template <typename Params>
cudaError_t Launch(void (*kernel)(Params), dim3 grid, dim3 block, size_t smem,
                   cudaStream_t stream, Params params) {
  if (smem > kDefaultDynamicSmem) {
    int device = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e != cudaSuccess) return e;
    e = KernelSmemOptins().Ensure(device, reinterpret_cast<const void*>(kernel), smem, [&] {
      return cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(smem));
    });
    if (e != cudaSuccess) return e;
  }
  void* args[] = {&params};
  return cudaLaunchKernel(reinterpret_cast<const void*>(kernel), grid, block, args, smem, stream);
}

}  // namespace swa::kernels
