// A pure-decode step of one layer driven entirely from device memory, so that
// an engine can capture it in a CUDA graph once and replay it every step with
// new sequence lengths written to the same device arrays (docs/cuda_backend.md).
//
// Enqueue() runs: the device decode planner (kernels/plan/) -> per-sequence
// records and ring rows -> encode new K/V into the ring -> decode attention.
// It allocates nothing, copies nothing to or from the host and never waits,
// so it is legal inside stream capture. All shapes that size the grid are
// fixed at creation (max_seqs, max_tokens); the contents of the
// device arrays may change between replays.
//
// Lifetime: a captured graph holds raw pointers into this object's arena and
// the cache's pool; destroy (or stop replaying) the graph before this object
// and the cache. Enqueue() itself may be captured any number of times.
//
// What it does NOT do: host-side slot bookkeeping. The engine keeps written_end
// and valid_start itself (or builds a metadata-only host plan per step, see
// docs/planner.md); the device planner rejects an invalid batch by writing a
// non-zero *error and the step then writes nothing (no ring row, no output).
// Nor RoPE inside the step: Create() refuses a layer with rope_style set (the
// encode kernel would need per-token positions on the device). The logit
// soft-cap and tensors.lse are honoured (the same attention params as swa_step).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "backend/step_work.h"
#include "cache/cache.h"

namespace swa::cuda {

// Device arrays [n_seqs] (valid_start may be null); n_seqs <= max_seqs, fixed
// for a captured graph.
using DeviceDecodeBatch = SeqColumns;

class DeviceDecodeStep {
 public:
  // `cache` must be a CUDA cache and outlive the object. The attention grid
  // covers R - W + 1 query tokens per sequence (any legal ring-only step).
  static absl::StatusOr<std::unique_ptr<DeviceDecodeStep>> Create(Cache& cache, uint32_t layer,
                                                                   int32_t max_seqs,
                                                                   int32_t max_tokens);
  ~DeviceDecodeStep();

  // `tensors`: device memory in batch token order, [max_tokens, ...] rows
  // (tensors.layer and tensors.stream are ignored: the object's layer, `stream`).
  absl::Status Enqueue(const DeviceDecodeBatch& batch, const StepTensors& tensors,
                       cudaStream_t stream);

  // Device outputs of the last run (valid once the stream has reached them).
  const int32_t* error() const { return error_; }          // [1]: 0 ok, else see decode_plan.h
  const int32_t* cu_seqlens() const { return cu_seqlens_; }  // [max_seqs + 1]
  unsigned long long* nonfinite() const { return nonfinite_; }  // cumulative, never reset

 private:
  DeviceDecodeStep() = default;
  Cache* cache_ = nullptr;
  uint32_t layer_ = 0;
  int32_t max_seqs_ = 0, max_tokens_ = 0, max_seqlen_q_ = 0;
  uint8_t* arena_ = nullptr;  // one cudaMalloc for everything below
  int32_t* cu_seqlens_ = nullptr;
  int32_t* offset_len_ = nullptr;
  int32_t* store_rows_ = nullptr;
  int32_t* error_ = nullptr;
  PlannedSeq* seqs_ = nullptr;  // [max_seqs]
  unsigned long long* nonfinite_ = nullptr;
};

}  // namespace swa::cuda
