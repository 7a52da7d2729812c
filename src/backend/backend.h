// The device abstraction under the cache: memory now, kernels later (issue 5).
// cache/ and plan/ only ever talk to this interface.
#pragma once

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "backend/project_work.h"
#include "backend/step_work.h"

namespace swa {

enum class BackendKind : int { kCpu = 1, kCuda = 2 };  // == swa_backend_t values

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;
  virtual int device() const = 0;  // CUDA ordinal, -1 for host
  // True when the pool is ordinary host memory that host code may read and
  // write directly (no CopyToHost / CopyFromHost needed).
  virtual bool HostAddressable() const = 0;

  // Zero-filled memory of `bytes` bytes aligned to at least `alignment`.
  virtual absl::StatusOr<void*> Allocate(size_t bytes, size_t alignment) = 0;
  virtual void Free(void* ptr, size_t bytes) = 0;

  // Copies inside backend memory, and between it and host memory.
  virtual absl::Status Copy(void* dst, const void* src, size_t bytes) = 0;
  virtual absl::Status CopyToHost(void* host_dst, const void* src, size_t bytes) = 0;
  virtual absl::Status CopyFromHost(void* dst, const void* host_src, size_t bytes) = 0;
  virtual absl::Status Memset(void* dst, int value, size_t bytes) = 0;

  // One layer of a planned step (SPEC sections 5 and 6): encode the new K/V,
  // build the keys each token sees, attend, store into the ring.
  virtual absl::Status RunStep(const StepWork& work, StepResult* result) = 0;

  // The merged projection GEMM of swa_project(). The default runs the blocked
  // CPU GEMM of src/project/ on host memory; the CUDA backend uses cuBLASLt.
  virtual absl::Status Project(const ProjectWork& work);
};

// The CPU backend; `num_threads` = 0 means the machine's hardware threads.
std::unique_ptr<Backend> MakeCpuBackend(unsigned num_threads);

}  // namespace swa
