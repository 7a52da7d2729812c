// Asks the runtime whether this build has a kernel image for the current
// device (SASS of a matching architecture, or PTX the driver compiles), using
// an empty kernel built with the same architectures as every other kernel.
#pragma once

#include <cuda_runtime_api.h>

namespace swa::kernels {

// cudaSuccess when the image exists; cudaErrorNoKernelImageForDevice,
// cudaErrorInvalidDeviceFunction, cudaErrorUnsupportedPtxVersion or
// cudaErrorInvalidPtx when it does not; another error when the runtime
// failed. Leaves the thread's last error as it found it when it found none.
cudaError_t ProbeKernelImage();

// True for the errors above that mean "no image for this device".
inline bool IsMissingKernelImage(cudaError_t e) {
  return e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction ||
         e == cudaErrorUnsupportedPtxVersion || e == cudaErrorInvalidPtx;
}

}  // namespace swa::kernels
