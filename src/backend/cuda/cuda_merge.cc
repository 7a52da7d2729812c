// swa_attention_merge on device memory: CudaBackend::Merge (with a cache) and
// MergeOnDevice (without one) launch the same kernel on the caller's stream.
#include "absl/strings/str_format.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_status.h"
#include "kernels/attention/merge.h"

namespace swa::cuda {
namespace {

absl::Status LaunchOn(int device, const MergeWork& work) {
  DeviceGuard guard(device);
  SWA_RETURN_IF_ERROR(guard.status());
  return CudaStatus(kernels::LaunchMerge(work, static_cast<cudaStream_t>(work.stream)),
                    "attention merge");
}

}  // namespace

absl::Status CudaBackend::Merge(const MergeWork& work) { return LaunchOn(device_, work); }

absl::Status MergeOnDevice(int device, const MergeWork& work) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error of this thread
    count = 0;
  }
  if (device >= count)
    return absl::InvalidArgumentError(absl::StrFormat(
        "device = %d does not exist: the CUDA runtime reports %d device(s)", device, count));
  return LaunchOn(device, work);
}

}  // namespace swa::cuda
