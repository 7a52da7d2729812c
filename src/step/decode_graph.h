// The graph-capturable decode above the backends (docs/cuda_backend.md,
// "Graph-capturable decode"): the slot-table side (import, the device-advanced
// mark) and the argument checks; the backend's GraphExecutor does the work.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/graph_work.h"
#include "cache/cache.h"

namespace swa {

class DecodeGraph {
 public:
  // `cache` must outlive the graph. `tokens`: new tokens per sequence, in
  // [1, R - W + 1]. Refuses caches with a RoPE layer (UNIMPLEMENTED).
  static absl::StatusOr<std::unique_ptr<DecodeGraph>> Create(Cache& cache, int32_t max_seqs,
                                                            int32_t tokens);
  // Drops the graph's holds on the slots it still holds.
  ~DecodeGraph();
  DecodeGraph(const DecodeGraph&) = delete;
  DecodeGraph& operator=(const DecodeGraph&) = delete;

  // Copies the host lengths of `slots` into the graph, marks them
  // device-advanced in the slot table and holds them (all-or-nothing): while
  // held, the slot table refuses to free, reset or overwrite them.
  absl::Status Import(const uint32_t* slots, size_t n, void* stream);
  // The graph refuses `slots` from now on and drops its holds on them
  // (device_advanced unchanged).
  absl::Status Release(const uint32_t* slots, size_t n, void* stream);
  absl::Status Plan(const int32_t* slots, const int32_t* seqlen_k, int32_t n_seqs, void* stream);
  absl::Status Step(const StepTensors& tensors);

  plan::GraphError* error_record() { return exec_->error_record(); }
  // The record as a status (waits for `stream`): OK, or the first bad sequence.
  // `*out` (may be null) receives the record when it could be read.
  absl::Status CheckError(void* stream, plan::GraphError* out);
  absl::Status ResetError(void* stream) { return exec_->ResetError(stream); }

  int32_t max_seqs() const { return setup_.max_seqs; }
  int32_t tokens() const { return setup_.tokens; }

 private:
  DecodeGraph() = default;
  Cache* cache_ = nullptr;
  GraphSetup setup_;
  std::unique_ptr<GraphExecutor> exec_;
  std::vector<uint8_t> held_;  // per slot: 1 = this graph holds it (SlotState::graph_holds)
  bool planned_ = false;
  int32_t planned_seqs_ = 0;  // n_seqs of the last Plan: a step's tensors have n_seqs * tokens rows
};

// A reason code as words ("gap", "rewind too deep", ...).
const char* GraphReasonName(int32_t reason);

}  // namespace swa
