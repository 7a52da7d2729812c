// The CUDA entry points of a build without the CUDA backend
// (src/backend/no_cuda.cc), linked alone: in a CPU-only tree they are what
// swa_cache_create(SWA_BACKEND_CUDA), swa_attention_merge and swa_rope_apply
// on a device answer; a CUDA tree links the real ones but checks these too.
// Not a *_test.cc: it links the stub objects, not swacache_internal
// (tests/CMakeLists.txt, no_cuda_test).
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "gtest/gtest.h"

namespace swa::cuda {
namespace {

TEST(NoCuda, BackendIsUnimplemented) {
  auto backend = MakeCudaBackend(0);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(std::string(backend.status().message()),
            "backend = SWA_BACKEND_CUDA: this build of the library has no CUDA backend");
}

TEST(NoCuda, NoDevice) { EXPECT_FALSE(DeviceAvailable()); }

TEST(NoCuda, MergeAndRopeOnADeviceAreUnimplemented) {
  MergeWork merge;
  absl::Status merged = MergeOnDevice(3, merge);
  EXPECT_EQ(merged.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(std::string(merged.message()),
            "device = 3: this build of the library has no CUDA backend (-1 merges host memory)");
  RopeWork rope;
  absl::Status rotated = RopeApplyOnDevice(0, rope);
  EXPECT_EQ(rotated.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(std::string(rotated.message()),
            "device = 0: this build of the library has no CUDA backend (-1 rotates host memory)");
}

}  // namespace
}  // namespace swa::cuda
