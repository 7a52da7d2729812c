// CUDA error -> absl::Status, with the CUDA error name and text, and a guard
// that makes the backend's device current for the calling thread.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace swa::cuda {

// `what` names the operation ("cudaMalloc of 1024 bytes", "decode attention").
inline absl::Status CudaStatus(cudaError_t e, std::string_view what) {
  if (e == cudaSuccess) return absl::OkStatus();
  const std::string msg =
      absl::StrFormat("%s failed: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
  switch (e) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(msg);
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidDevice:
      return absl::InvalidArgumentError(msg);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return absl::UnavailableError(msg);
    case cudaErrorNotSupported:
      return absl::UnimplementedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

#define SWA_CUDA_RETURN_IF_ERROR(expr, what) \
  SWA_RETURN_IF_ERROR(::swa::cuda::CudaStatus((expr), (what)))

// Makes `device` current for the scope and restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    status_ = previous_ == device ? cudaSuccess : cudaSetDevice(device);
  }
  ~DeviceGuard() {
    if (previous_ >= 0 && status_ == cudaSuccess) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  absl::Status status() const { return CudaStatus(status_, "cudaSetDevice"); }

 private:
  int previous_ = -1;
  cudaError_t status_ = cudaSuccess;
};

}  // namespace swa::cuda
