// The probe of kernels/common/device_probe.h: an empty kernel in a
// translation unit of its own, so that looking it up loads (or JIT-compiles)
// almost nothing.
#include "kernels/common/device_probe.h"

namespace swa::kernels {
namespace {

__global__ void ProbeKernel(int) {}

}  // namespace

cudaError_t ProbeKernelImage() {
  const bool clean = cudaPeekAtLastError() == cudaSuccess;
  cudaFuncAttributes attr;
  const cudaError_t e = cudaFuncGetAttributes(&attr, ProbeKernel);
  // Our failure must not stay behind as the application's last error.
  if (e != cudaSuccess && clean) cudaGetLastError();
  return e;
}

}  // namespace swa::kernels
