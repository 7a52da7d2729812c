// Kernel launches that report their own status: cudaLaunchKernel returns the
// launch's error, whereas `kernel<<<>>>(); cudaGetLastError()` would also
// report (and clear) an error the application left on this thread earlier.
#pragma once

#include <cuda_runtime_api.h>

namespace swa::kernels {

// Launches `kernel(params)` (every kernel here takes one params struct by value).
template <typename Params>
cudaError_t Launch(void (*kernel)(Params), dim3 grid, dim3 block, size_t smem,
                   cudaStream_t stream, Params params) {
  void* args[] = {&params};
  return cudaLaunchKernel(reinterpret_cast<const void*>(kernel), grid, block, args, smem, stream);
}

}  // namespace swa::kernels
