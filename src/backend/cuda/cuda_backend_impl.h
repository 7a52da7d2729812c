// The CUDA backend class (internal to src/backend/cuda/ and the GPU tests).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "backend/backend.h"
#include "backend/cuda/device_scratch.h"
#include "backend/step_work.h"
#include "kernels/attention/attention_dims.h"
#include "layout/rope_table.h"

namespace swa::cuda {

class CublasLtContext;  // cuda_project.cc
absl::Status CreateBlas(CublasLtContext** out);
void DestroyBlas(CublasLtContext* blas);
struct CudaPreparedPlan;  // cuda_step.cc

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device);
  ~CudaBackend() override;
  absl::Status Init();

  BackendKind kind() const override { return BackendKind::kCuda; }
  int device() const override { return device_; }
  bool HostAddressable() const override { return false; }  // device memory

  // Device memory from cudaMalloc (256-byte aligned), zero-filled on return.
  absl::StatusOr<void*> Allocate(size_t bytes, size_t alignment) override;
  void Free(void* ptr, size_t bytes) override;
  // Synchronous copies / memset (complete on return): slot copy, save and
  // restore are not on the step path and must be visible to any stream.
  absl::Status Copy(void* dst, const void* src, size_t bytes) override;
  absl::Status CopyToHost(void* host_dst, const void* src, size_t bytes) override;
  absl::Status CopyFromHost(void* dst, const void* host_src, size_t bytes) override;
  absl::Status Memset(void* dst, int value, size_t bytes) override;

  absl::Status Supports(const LayerSpec& layer) const override;
  // The attention tiles of a layer on this device (docs/cuda_backend.md
  // "Shared memory"); UNIMPLEMENTED when none fits.
  absl::StatusOr<kernels::AttentionVariant> AttentionVariantOf(const StepLayer& layer) const;
  size_t smem_limit() const { return smem_limit_; }
  absl::Status Prepare(const PlanView& plan, std::unique_ptr<PreparedPlan>* prepared) override;
  // Enqueues the step on the tensors' stream; returns without waiting for the device.
  absl::Status RunStep(const StepWork& work, PreparedPlan& prepared, StepResult* result) override;
  absl::Status Project(const ProjectWork& work) override;
  absl::Status Merge(const MergeWork& work) override;
  // swa_compress_step on the device (cuda_compress.cc): the windows, store
  // segments and RoPE frequencies go up in one stream-ordered scratch buffer.
  absl::Status CompressStep(const CompressWork& work) override;
  // graph_executor.cc
  absl::StatusOr<std::unique_ptr<GraphExecutor>> MakeGraph(const GraphSetup& setup) override;
  // Non-finite blocks of finished host-planned steps not yet harvested by a
  // later step, plus those the graph decodes counted on the device since the
  // last call (GraphCounters: a small copy and a wait for it only).
  absl::StatusOr<uint64_t> TakeDeviceNonfiniteBlocks() override;
  GraphCounters& graph_counters() { return graph_counters_; }

  // Stream-ordered scratch from the backend's own memory pool.
  absl::StatusOr<uint8_t*> AllocScratch(size_t bytes, cudaStream_t stream);
  absl::Status FreeScratch(uint8_t* ptr, cudaStream_t stream);

 private:
  // UNIMPLEMENTED when this build's kernels do not run on the device.
  absl::Status CheckDevice() const;
  absl::Status RunStepLocked(const StepWork& work, CudaPreparedPlan& prepared, StepResult* result);
  // The kernel chain of a step over the uploaded image `dev` of `prepared`.
  absl::Status LaunchStepKernels(const StepWork& w, const CudaPreparedPlan& prepared,
                                 const uint8_t* dev, cudaStream_t stream, StepResult* result);

  // The device copy of a layer's RoPE frequencies: uploaded on the layer's
  // first step (mu_ held), then only looked up. Keyed by the table's address,
  // which is stable: the tables belong to the cache that owns this backend.
  absl::StatusOr<const float*> RopeTableOnDevice(const RopeTable& table);

  const int device_;
  // cudaDevAttrMaxSharedMemoryPerBlockOptin, or less under the environment
  // variable SWACACHE_CUDA_SMEM_LIMIT (tests of the small tiles).
  size_t smem_limit_ = 0;
  cudaMemPool_t pool_ = nullptr;
  absl::Mutex mu_;  // one step / projection at a time: the scratch below is shared
  PlanUploader uploader_;
  NonfiniteCounters nonfinite_;  // under mu_
  GraphCounters graph_counters_;
  CublasLtContext* blas_ = nullptr;
  absl::flat_hash_map<const RopeTable*, float*> rope_tables_;  // under mu_; freed at destruction
};

}  // namespace swa::cuda
