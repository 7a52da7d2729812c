// The CUDA backend's entry points (backend/cuda/cuda_backend.h) in a build
// without it (SWACACHE_CUDA=OFF): every one answers UNIMPLEMENTED and no
// device is available. Linked only there (CMakeLists.txt); the CUDA tree
// compiles it too, for tests/unit/no_cuda_check.cc.
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "backend/cuda/cuda_backend.h"

namespace swa::cuda {

absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(int /*device*/) {
  return absl::UnimplementedError(
      "backend = SWA_BACKEND_CUDA: this build of the library has no CUDA backend");
}

bool DeviceAvailable() { return false; }

absl::Status MergeOnDevice(int device, const MergeWork& /*work*/) {
  return absl::UnimplementedError(absl::StrFormat(
      "device = %d: this build of the library has no CUDA backend (-1 merges host memory)",
      device));
}

absl::Status RopeApplyOnDevice(int device, const RopeWork& /*work*/) {
  return absl::UnimplementedError(absl::StrFormat(
      "device = %d: this build of the library has no CUDA backend (-1 rotates host memory)",
      device));
}

}  // namespace swa::cuda
