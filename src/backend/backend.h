// The device abstraction under the cache: memory, copies, and the kernels of a
// step. cache/ and step/ only ever talk to this interface; the two
// implementations are the CPU backend (backend/cpu/) and the CUDA backend
// (backend/cuda/), made by MakeBackend().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backend/compress_work.h"
#include "backend/graph_work.h"
#include "common/merge_work.h"
#include "backend/project_work.h"
#include "backend/rope_work.h"
#include "backend/step_work.h"
#include "layout/model_spec.h"

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

  // OK when the step kernels can run `layer`; else UNIMPLEMENTED (or
  // INVALID_ARGUMENT) naming the unsupported value. Checked for every layer
  // when a cache is created, so a step never finds out later.
  virtual absl::Status Supports(const LayerSpec& layer) const = 0;

  // Zero-filled memory of `bytes` bytes aligned to at least `alignment`.
  virtual absl::StatusOr<void*> Allocate(size_t bytes, size_t alignment) = 0;
  virtual void Free(void* ptr, size_t bytes) = 0;

  // Copies inside backend memory, and between it and host memory.
  virtual absl::Status Copy(void* dst, const void* src, size_t bytes) = 0;
  virtual absl::Status CopyToHost(void* host_dst, const void* src, size_t bytes) = 0;
  virtual absl::Status CopyFromHost(void* dst, const void* host_src, size_t bytes) = 0;
  virtual absl::Status Memset(void* dst, int value, size_t bytes) = 0;

  // Derives, once per build of a plan, what the step kernels of every layer
  // consume. `*prepared` is created on first use and reused (with its memory)
  // for later builds; its stamp is set to plan.stamp on success.
  virtual absl::Status Prepare(const PlanView& plan, std::unique_ptr<PreparedPlan>* prepared) = 0;

  // One layer of a planned step (docs/semantics.md, "Steps and plans"): encode the new
  // K/V, build the keys each token sees, attend, store into the ring.
  // `prepared` comes from Prepare() of the same build.
  // It may extend `prepared` (e.g. with per-head-shape work lists).
  virtual absl::Status RunStep(const StepWork& work, PreparedPlan& prepared,
                               StepResult* result) = 0;

  // The merged projection GEMM of swa_project().
  virtual absl::Status Project(const ProjectWork& work) = 0;

  // swa_attention_merge: two partial attentions into one, row by row.
  virtual absl::Status Merge(const MergeWork& work) = 0;
  // swa_compress_step (backend/compress_work.h, docs/semantics.md "Compression
  // state"): compute the entry of every closing window into work.out, reading
  // each window's ring rows before any store, then store the new source rows
  // into the ring (work.store). UNIMPLEMENTED on a backend without the
  // compressor kernel; nothing is written then.
  virtual absl::Status CompressStep(const CompressWork& work) {
    (void)work;
    return absl::UnimplementedError(
        "swa_compress_step: this backend has no compressor kernel yet (use the CPU backend, or "
        "the plan's windows with your own kernel)");
  }

  // The executor of the graph-capturable decode (graph_work.h) for one graph.
  virtual absl::StatusOr<std::unique_ptr<GraphExecutor>> MakeGraph(const GraphSetup& setup) = 0;

  // Non-finite blocks (StepResult::nonfinite_blocks) that the backend counted
  // on the device and has not reported yet: the CUDA graph decode's, which no
  // step can read back inside a capture. Called by swa_cache_stats; may wait
  // for a small copy, never for the caller's streams. The CPU backend reports
  // every count through StepResult.
  virtual absl::StatusOr<uint64_t> TakeDeviceNonfiniteBlocks() { return uint64_t{0}; }
};

// The backend of `kind` (CUDA: on device `device`; CPU: `num_threads` threads,
// 0 = the machine's hardware threads). UNIMPLEMENTED for CUDA in a build
// without it.
absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(BackendKind kind, int device,
                                                     unsigned num_threads);

// True when this build has the CUDA backend and the runtime reports a device.
bool CudaDeviceAvailable();

// swa_attention_merge without a cache: `device` -1 = host memory, merged on
// the calling thread (no pool); d >= 0 = device memory of CUDA device d, the
// CUDA backend's merge kernel on work.stream. UNIMPLEMENTED for d >= 0 in a
// build without CUDA; INVALID_ARGUMENT for a device that does not exist.
absl::Status MergeWithoutCache(int device, const MergeWork& work);

// swa_rope_apply: `device` -1 = host memory, rotated on the calling thread
// (the CPU step's rotation); d >= 0 = device memory of CUDA device d, on
// work.stream (the CUDA step's kernels). Same errors as MergeWithoutCache.
absl::Status RopeApply(int device, const RopeWork& work);

// swa_attention_cpu_path: the name of the CPU attention path swa_step takes
// for queries of `q_dtype` on this machine (docs/cpu_attention.md, "Paths").
const char* CpuAttentionPathName(Dtype q_dtype);

}  // namespace swa
