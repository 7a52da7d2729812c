// The one place that knows which backends this build has.
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "backend/backend.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/merge_cpu.h"
#include "backend/cpu/rope_cpu.h"
// Defined by the CUDA backend (src/backend/cuda/), or in a build without it by
// src/backend/no_cuda.cc, whose entry points answer UNIMPLEMENTED: this file
// compiles the same either way (one ccache entry for CPU-only and CUDA trees).
#include "backend/cuda/cuda_backend.h"

namespace swa {

absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(BackendKind kind, int device,
                                                     unsigned num_threads) {
  switch (kind) {
    case BackendKind::kCpu:
      return cpu::MakeCpuBackend(num_threads);
    case BackendKind::kCuda:
      return cuda::MakeCudaBackend(device);
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("backend = %d is not a backend kind", static_cast<int>(kind)));
}

bool CudaDeviceAvailable() { return cuda::DeviceAvailable(); }

absl::Status MergeWithoutCache(int device, const MergeWork& work) {
  if (device < 0) {
    cpu::MergeCpu(work, /*pool=*/nullptr);
    return absl::OkStatus();
  }
  return cuda::MergeOnDevice(device, work);
}

absl::Status RopeApply(int device, const RopeWork& work) {
  if (device < 0) {
    cpu::RopeApplyCpu(work);
    return absl::OkStatus();
  }
  return cuda::RopeApplyOnDevice(device, work);
}

const char* CpuAttentionPathName(Dtype q_dtype) {
  return q_dtype == Dtype::kBf16 ? cpu::Bf16AttentionPathName() : cpu::AttentionKernelName();
}

}  // namespace swa
