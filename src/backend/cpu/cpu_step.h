// One layer of a planned step on the CPU (docs/semantics.md, "Steps and plans",
// "Attention").
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "backend/step_work.h"

namespace swa::cpu {

class ThreadPool;

// Reusable buffers of the CPU step; one per backend, not shared between
// concurrent steps.
struct StepScratch {
  std::vector<uint8_t> staged;     // [T, heads_per_token, vec_bytes]: new K/V in the layer's format
  std::vector<float> tiles;        // K (and V) tiles of a batch of sequences
  std::vector<float> q32;          // queries converted to FP32 when given as BF16
  std::vector<float> out32;        // outputs in FP32 when BF16 is asked for
  std::vector<int32_t> key_begin;  // per token: visible rows [begin, end) of its tile
  std::vector<int32_t> key_end;
};

// Runs the step. Every pointer in `work` has been validated by the caller.
absl::Status RunCpuStep(const StepWork& work, ThreadPool* pool, StepScratch& scratch,
                        StepResult* result);

}  // namespace swa::cpu
