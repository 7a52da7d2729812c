// CudaBackend::Merge: swa_attention_merge as one kernel on the caller's stream.
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_status.h"
#include "kernels/attention/merge.h"

namespace swa::cuda {

absl::Status CudaBackend::Merge(const MergeWork& work) {
  DeviceGuard guard(device_);
  SWA_RETURN_IF_ERROR(guard.status());
  return CudaStatus(kernels::LaunchMerge(work, static_cast<cudaStream_t>(work.stream)),
                    "attention merge");
}

}  // namespace swa::cuda
