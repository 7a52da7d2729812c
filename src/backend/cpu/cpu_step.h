// One layer of a planned step on the CPU (docs/semantics.md, "Steps and plans" and
// "Attention"), and the per-build preparation every layer of the step shares.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "backend/cpu/attention.h"
#include "backend/step_work.h"

namespace swa::cpu {

class ThreadPool;

// Where one sequence's keys come from. Tile row r holds position base + r:
// rows [0, n_hist) from the ring (or zeros), rows [n_hist, n_hist + seqlen_q)
// are the step's new tokens cast back through the format.
struct SeqTile {
  int32_t base = 0;
  int32_t n_hist = 0;
  int32_t n_keys = 0;
  size_t k_offset = 0;  // floats into the batch tile buffer, or rows into its row pointers
  size_t v_offset = 0;
};

// What every layer of one build reads: the tiles' shape, each token's visible
// tile rows, and where each sequence's load segments start.
struct CpuPreparedPlan final : PreparedPlan {
  std::vector<SeqTile> tiles;           // [n_seqs]
  std::vector<int32_t> key_begin;       // [T]: visible rows [begin, end) of its tile
  std::vector<int32_t> key_end;         // [T]
  std::vector<int32_t> positions;       // [T]: each new token's absolute position
  std::vector<size_t> first_segment;    // staged: [n_seqs] first load segment
};

void PrepareCpuPlan(const PlanView& plan, CpuPreparedPlan* out);

// Reusable buffers of the CPU step; one per backend, not shared between
// concurrent steps.
struct StepScratch {
  std::vector<uint8_t> staged;  // [T, heads_per_token, vec_bytes]: new K/V in the layer's format
  std::vector<float> tiles;     // K (and V) tiles of a batch of sequences
  std::vector<const uint8_t*> rows;  // MXFP8 rows read in place, per tile row
  std::vector<float> q32;       // queries converted to FP32 when given as BF16
  std::vector<float> out32;     // outputs in FP32 when BF16 is asked for
  std::vector<SeqTile> batch_tiles;
  std::vector<SeqProblem> problems;
  std::vector<uint8_t> fused;   // per sequence: attended by the fused path
  std::vector<uint32_t> fused_list;
};

// Runs the step. Every pointer in `work` has been validated by the caller.
absl::Status RunCpuStep(const StepWork& work, const CpuPreparedPlan& prepared, ThreadPool* pool,
                        StepScratch& scratch, StepResult* result);

}  // namespace swa::cpu
