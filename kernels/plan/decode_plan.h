// Device-side decode planner (docs/semantics.md, "Decode index", on the GPU): the ring-only
// offset_len and index arrays from device-resident sequence arrays, with no
// host synchronisation, so a decode step can be captured in a CUDA graph.
// The host planner still validates and advances the slots (a metadata-only
// build, options.materialize_index = 0); this kernel only produces indices.
#pragma once

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "common/records.h"

namespace swa::kernels {

// Error codes written to *error (device memory) by the planner.
inline constexpr int32_t kDecodePlanOk = 0;
inline constexpr int32_t kDecodePlanTooManyTokens = -1;  // sum of seqlen_q > max_tokens
// A value e > 0 means sequence e - 1 is invalid (lengths, valid_start, slot,
// or seqlen_q > R - W + 1); no token is planned then.

struct DecodePlanParams {
  // Inputs, device memory (valid_start: effective values; null = all 0).
  SeqColumns batch;
  int32_t max_tokens = 0;  // rows of offset_len / index (fixed for graph capture)
  int32_t window = 0;      // W
  int32_t ring_len = 0;    // R
  int32_t max_slots = 0;
  int32_t pad_last_row = 0;  // 0: pad with -1; 1: with the token's own ring row

  // Outputs, device memory.
  int32_t* cu_seqlens = nullptr;  // [n_seqs + 1]
  int32_t* offset_len = nullptr;  // [max_tokens, 2]; rows past T get (0, 0)
  int32_t* index = nullptr;       // [max_tokens, W] or nullptr; rows past T are all padding
  int32_t* error = nullptr;       // [1]: kDecodePlanOk, kDecodePlanTooManyTokens or 1 + seq
};

// Enqueues the planner on `stream` (two kernels). Returns cudaErrorInvalidValue
// for inconsistent parameters (checked on the host, nothing enqueued), else the
// launch status.
cudaError_t LaunchDecodePlan(const DecodePlanParams& params, cudaStream_t stream);

}  // namespace swa::kernels
