// What a backend runs for the graph-capturable decode (docs/cuda_backend.md,
// "Graph-capturable decode"): a planner fed from arrays in backend memory and
// the per-layer step of its plan. Plain data and one interface; the slot table
// bookkeeping lives above (src/step/decode_graph.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "backend/step_work.h"
#include "common/graph_math.h"

namespace swa {

// Fixed at creation: what sizes every buffer (and, on CUDA, every grid).
struct GraphSetup {
  int32_t max_slots = 0;  // the cache's pool
  int32_t max_seqs = 0;   // sequences per planned step, padding included
  int32_t tokens = 0;     // new tokens per sequence, 1 ... R - W + 1
  int32_t window = 0;
  int32_t ring_len = 0;
};

class GraphExecutor {
 public:
  virtual ~GraphExecutor() = default;

  // Writes `n` entries of the graph's slot copy: slots[i] <- values[i] (host
  // memory, read before the call returns), ordered on `stream`.
  virtual absl::Status SetSlots(const uint32_t* slots, const plan::GraphSlot* values, size_t n,
                                void* stream) = 0;

  // Plans one step from `slots` / `seqlen_k` ([n_seqs] each, backend memory):
  // checks every sequence (common/graph_math.h), advances the graph's copy of
  // the valid ones, records the first bad one. Enqueued on `stream`.
  virtual absl::Status Plan(const int32_t* slots, const int32_t* seqlen_k, int32_t n_seqs,
                            void* stream) = 0;

  // One layer of the last planned step: rows of padding and invalid sequences
  // are written as zeros (out, lse), nothing of theirs reaches the ring.
  // `tensors` rows: n_seqs * tokens of the last Plan(); stream in tensors.
  virtual absl::Status Step(const StepLayer& layer, const StepTensors& tensors, float scale,
                            StepResult* result) = 0;

  // The error record (backend memory; stable for the executor's life).
  virtual plan::GraphError* error_record() = 0;
  // Copies the record to the host once `stream` has reached this point (waits).
  virtual absl::Status ReadError(void* stream, plan::GraphError* out) = 0;
  // Clears the record, ordered on `stream`.
  virtual absl::Status ResetError(void* stream) = 0;
};

}  // namespace swa
