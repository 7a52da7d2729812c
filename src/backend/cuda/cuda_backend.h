// The CUDA backend's entry points for code that is compiled without CUDA
// headers (the backend factory, benchmarks). Defined by src/backend/cuda/ in a
// build with the CUDA backend (SWACACHE_CUDA=ON), else by src/backend/no_cuda.cc,
// whose functions answer UNIMPLEMENTED (DeviceAvailable: false).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "backend/rope_work.h"

namespace swa::cuda {

// A backend on CUDA device `device` (checked: it must exist). All work of a
// step is enqueued on the caller's stream (StepTensors::stream).
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(int device);

// True when the CUDA runtime reports at least one device (for SWA_BACKEND_AUTO).
bool DeviceAvailable();

// swa_attention_merge without a cache: the merge kernel on work.stream, with
// `device` (checked: it must exist) current for the launch.
absl::Status MergeOnDevice(int device, const MergeWork& work);

// swa_rope_apply on device memory of `device` (checked: it must exist), on
// work.stream (cuda_rope.cc).
absl::Status RopeApplyOnDevice(int device, const RopeWork& work);

}  // namespace swa::cuda
