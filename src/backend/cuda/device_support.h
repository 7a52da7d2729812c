// Whether this build's kernels run on a CUDA device: the decision at cache
// creation, as host code with no CUDA headers (unit-tested on the CPU in
// tests/unit/cuda_host_checks_test.cc). docs/cuda_backend.md, "Devices".
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace swa::cuda {

// The kernels need compute capability 8.0 (bf16 tensor-core mma.sync).
inline constexpr int kMinComputeMajor = 8;
inline constexpr int kMinComputeMinor = 0;

struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;
  int major = 0;  // compute capability
  int minor = 0;
};

// What the runtime says of a small kernel of this build on the device
// (kernels/common/device_probe.h): an image runs there (SASS of a matching
// architecture, or PTX it JIT-compiles), or none does.
enum class KernelImage { kPresent, kMissing };

// OK, or UNIMPLEMENTED naming the device and its compute capability: below
// 8.0, or (a build for other architectures) no kernel image for it.
inline absl::Status CheckDeviceSupported(const CudaDeviceInfo& d, KernelImage image) {
  if (d.major < kMinComputeMajor || (d.major == kMinComputeMajor && d.minor < kMinComputeMinor))
    return absl::UnimplementedError(absl::StrFormat(
        "device %d (%s) has compute capability %d.%d: the CUDA backend needs %d.%d or newer "
        "(bf16 tensor cores); use SWA_BACKEND_CPU on this machine",
        d.ordinal, d.name, d.major, d.minor, kMinComputeMajor, kMinComputeMinor));
  if (image == KernelImage::kMissing)
    return absl::UnimplementedError(absl::StrFormat(
        "device %d (%s) has compute capability %d.%d, for which this build of the library has "
        "no kernel image (no SASS for sm_%d%d and no PTX the driver can compile for it): "
        "rebuild with CMAKE_CUDA_ARCHITECTURES including %d%d (the default builds sm_80 and "
        "sm_90a SASS and compute_90 PTX)",
        d.ordinal, d.name, d.major, d.minor, d.major, d.minor, d.major, d.minor));
  return absl::OkStatus();
}

}  // namespace swa::cuda
