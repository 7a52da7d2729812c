// The one place that knows which backends this build has.
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "backend/backend.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/merge_cpu.h"
#include "backend/cpu/rope_cpu.h"
#ifdef SWACACHE_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace swa {

absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(BackendKind kind, int device,
                                                     unsigned num_threads) {
  switch (kind) {
    case BackendKind::kCpu:
      return cpu::MakeCpuBackend(num_threads);
    case BackendKind::kCuda:
#ifdef SWACACHE_HAVE_CUDA
      return cuda::MakeCudaBackend(device);
#else
      return absl::UnimplementedError(
          "backend = SWA_BACKEND_CUDA: this build of the library has no CUDA backend");
#endif
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("backend = %d is not a backend kind", static_cast<int>(kind)));
}

bool CudaDeviceAvailable() {
#ifdef SWACACHE_HAVE_CUDA
  return cuda::DeviceAvailable();
#else
  return false;
#endif
}

absl::Status MergeWithoutCache(int device, const MergeWork& work) {
  if (device < 0) {
    cpu::MergeCpu(work, /*pool=*/nullptr);
    return absl::OkStatus();
  }
#ifdef SWACACHE_HAVE_CUDA
  return cuda::MergeOnDevice(device, work);
#else
  return absl::UnimplementedError(absl::StrFormat(
      "device = %d: this build of the library has no CUDA backend (-1 merges host memory)",
      device));
#endif
}

absl::Status RopeApply(int device, const RopeWork& work) {
  if (device < 0) {
    cpu::RopeApplyCpu(work);
    return absl::OkStatus();
  }
#ifdef SWACACHE_HAVE_CUDA
  return cuda::RopeApplyOnDevice(device, work);
#else
  return absl::UnimplementedError(absl::StrFormat(
      "device = %d: this build of the library has no CUDA backend (-1 rotates host memory)",
      device));
#endif
}

const char* CpuAttentionPathName(Dtype q_dtype) {
  return q_dtype == Dtype::kBf16 ? cpu::Bf16AttentionPathName() : cpu::AttentionKernelName();
}

}  // namespace swa
