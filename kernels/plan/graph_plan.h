// The graph decode's device planner (docs/cuda_backend.md, "Graph-capturable
// decode"): per-sequence checks of common/graph_math.h against the graph's slot
// copy, the planned records (refused and padding sequences get seqlen_q = 0),
// offset_len and store rows at fixed token rows (sequence i: rows
// i * tokens ...), the error record; and the zero rows of sequences that did
// not run. No host synchronisation: legal inside stream capture.
#pragma once

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "common/records.h"
#include "common/graph_math.h"

namespace swa::kernels {

struct GraphPlanParams {
  const int32_t* slots = nullptr;     // [n_seqs] device: slot id or -1
  const int32_t* seqlen_k = nullptr;  // [n_seqs] device
  int32_t n_seqs = 0;
  int32_t tokens = 0;
  int32_t max_slots = 0;
  int32_t window = 0;
  int32_t ring_len = 0;
  plan::GraphSlot* table = nullptr;  // [max_slots]: the graph's slot copy (updated)
  int32_t* claim = nullptr;          // [max_slots]: INT_MAX between plans
  int32_t* reason = nullptr;         // [n_seqs] scratch
  PlannedSeq* seqs = nullptr;        // [n_seqs]
  int32_t* offset_len = nullptr;     // [n_seqs * tokens, 2]
  int32_t* store_rows = nullptr;     // [n_seqs * tokens]
  plan::GraphError* error = nullptr;
};
cudaError_t LaunchGraphPlan(const GraphPlanParams& p, cudaStream_t stream);

// Zeros rows [i * tokens, (i + 1) * tokens) of out, and sets those of lse to
// plan::GraphIdleRowLse() (-inf), for every sequence with seqlen_q == 0.
struct GraphZeroParams {
  const PlannedSeq* seqs = nullptr;
  int32_t n_seqs = 0;
  int32_t tokens = 0;
  uint32_t* out = nullptr;        // row of out_row_words 32-bit words
  int32_t out_row_words = 0;
  float* lse = nullptr;           // optional, rows of lse_row floats
  int32_t lse_row = 0;
};
cudaError_t LaunchGraphZeroRows(const GraphZeroParams& p, cudaStream_t stream);

// table[entries[i].slot] = entries[i].value for i < n (device arrays).
struct GraphSlotEntry {
  uint32_t slot;
  plan::GraphSlot value;
};
cudaError_t LaunchGraphSetSlots(plan::GraphSlot* table, const GraphSlotEntry* entries, int32_t n,
                                cudaStream_t stream);

}  // namespace swa::kernels
