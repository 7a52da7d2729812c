// StepPlan: one engine step turned into every index the step needs, once, for
// all layers (docs/semantics.md "Steps and plans"; docs/planner.md). Pure host code; the
// arrays are plain int32 so either backend can consume them directly.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "cache/slot_table.h"
#include "common/compress_math.h"
#include "common/records.h"
#include "layout/layout.h"
#include "plan/fast_mod.h"
#include "plan/plan_buffer.h"

namespace swa::plan {

enum class Path : int { kNone = 0, kRing = 1, kStaged = 2 };  // == swa_plan_path_t
enum class IndexPad : int { kMinusOne = 0, kLastRow = 1 };    // == swa_index_pad_t

struct PlanOptions {
  IndexPad index_pad = IndexPad::kMinusOne;
  // Keep the [T, W] decode index inside the plan (decode_index()); without it
  // only offset_len is kept and WriteDecodeIndex() produces the index on demand.
  bool materialize_index = true;
};

// A slot's state before the build, the ring_high the build set (for Cancel()),
// and the slot's generation and epoch: the owner and sequence the build planned for.
struct PrevSlotState {
  int32_t written_end;
  int32_t valid_start;
  int32_t ring_high;
  int32_t new_ring_high;
  uint32_t generation;
  uint32_t epoch;
  uint32_t builds;  // the slot's build count before this build
};

class StepPlan {
 public:
  // `slots` and `layout` (a cache's) are borrowed and must outlive the plan.
  StepPlan(SlotTable* slots, const Layout& layout, PlanOptions options = {});
  StepPlan(const StepPlan&) = delete;
  StepPlan& operator=(const StepPlan&) = delete;

  // Validates the whole batch against the slot table and, when every sequence
  // is legal, advances each slot (written_end = seqlen_k, valid_start raised)
  // and fills the arrays. On error nothing changes (slots and this plan).
  // Rebuilding a built plan keeps the previous build's slot updates.
  absl::Status Build(absl::Span<const SeqDesc> seqs);

  // Restores the slots this build advanced. FAILED_PRECONDITION when there is
  // no build, after MarkExecuted(), or when a slot changed since the build.
  absl::Status Cancel();

  // OK while every slot of the build is still allocated to the owner it was
  // planned for (same generation) and not busy; FAILED_PRECONDITION naming the
  // slot otherwise (a slot freed and handed out again since the build must not
  // be written by this plan).
  absl::Status CheckSlotsStillPlanned() const;
  // CheckSlotsStillPlanned(), and on success a step hold on each planned slot
  // (SlotState::step_holds) until ReleaseStepHolds(): free, reset, copy, save
  // and restore of those slots fail meanwhile. Const: the holds live in the
  // slot table, and several layers' steps may hold one plan's slots at once.
  absl::Status TakeStepHolds() const;
  void ReleaseStepHolds() const;

  // Called once a layer of the step has run: the step can no longer be undone.
  // Safe to call from several layers' threads at once.
  void MarkExecuted() { executed_.store(true, std::memory_order_relaxed); }

  // swa_compress_step runs each compressor of a layer once per build: its
  // store overwrites ring rows its windows read, so a second run would pool
  // the wrong rows. True for the first claim of (layer, compressor < 2) since
  // the build; ReleaseCompress() gives it back (a run that failed). Safe to
  // call from several layers' threads at once.
  bool ClaimCompress(uint32_t layer, uint32_t compressor) {
    return compress_ran_[2 * size_t{layer} + compressor].exchange(1, std::memory_order_relaxed) == 0;
  }
  void ReleaseCompress(uint32_t layer, uint32_t compressor) {
    compress_ran_[2 * size_t{layer} + compressor].store(0, std::memory_order_relaxed);
  }
  // swa_step likewise runs each layer once per build: a staged step's store
  // overwrites ring rows its load plan reads. ReleaseStep() gives the claim
  // back when the run failed.
  bool ClaimStep(uint32_t layer) {
    return step_ran_[layer].exchange(1, std::memory_order_relaxed) == 0;
  }
  void ReleaseStep(uint32_t layer) { step_ran_[layer].store(0, std::memory_order_relaxed); }

  // ---- What was planned ----
  Path path() const { return path_; }
  bool built() const { return path_ != Path::kNone; }
  bool executed() const { return executed_.load(std::memory_order_relaxed); }
  const PlanOptions& options() const { return options_; }
  const SlotTable& slots() const { return *slots_; }
  // Unique in the process for every successful build (0: never built); what
  // backends key their per-build preparation by.
  uint64_t stamp() const { return stamp_; }
  int32_t window() const { return window_; }
  int32_t ring_len() const { return ring_len_; }
  uint32_t n_seqs() const { return static_cast<uint32_t>(seqs_.size()); }
  int32_t n_tokens() const { return n_tokens_; }
  int32_t max_seqlen_q() const { return max_seqlen_q_; }
  int32_t max_seqlen_k() const { return max_seqlen_k_; }
  // Staging rows: section 1 = n_seqs * W rows, section 2 = T rows after it.
  int32_t history_rows() const { return static_cast<int32_t>(n_seqs()) * window_; }

  absl::Span<const PlannedSeq> seqs() const { return seqs_.span(); }
  // [n_seqs + 1]: exclusive prefix sums of seqlen_q (cu_seqlens_q).
  absl::Span<const int32_t> cu_seqlens() const { return cu_seqlens_.span(); }
  // [T]: sequence index of each new token.
  absl::Span<const int32_t> token_seq() const { return token_seq_.span(); }
  // [T]: ring row each new token is stored to, -1 when it is not stored.
  absl::Span<const int32_t> store_rows() const { return store_rows_.span(); }
  // Runs of the store plan, at most two per sequence (split at the wrap).
  absl::Span<const RowSegment> store_segments() const { return store_segments_.span(); }

  // Ring-only path (empty on the staged path).
  absl::Span<const int32_t> offset_len() const { return offset_len_.span(); }    // [T, 2]
  absl::Span<const int32_t> decode_index() const { return decode_index_.span(); }  // [T, W]
  // Writes the decode arrays into caller memory; either pointer may be null.
  // Requires path() == kRing.
  void WriteDecodeIndex(int32_t* offset_len, int32_t* index) const;

  // Staged path (empty on the ring-only path).
  absl::Span<const RowSegment> load_segments() const { return load_segments_.span(); }
  absl::Span<const int32_t> pivots() const { return pivots_.span(); }  // [T, 4]

 private:
    absl::Status CheckOwnerLocked(uint32_t i) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(slots_->mu());
  void Clear();
  void FillCommon();
  size_t FillStore(PlannedSeq s, int32_t first, int32_t r_first, size_t n_segs);
  void FillRing();
  void FillStaged();
  void FillIndexRows(int32_t* index, int32_t t_begin, int32_t t_end) const;

  SlotTable* slots_;
  PlanOptions options_;
  int32_t window_;
  int32_t ring_len_;
  FastMod ring_mod_;  // p mod R
  std::vector<CompressRing> compress_rings_;  // typed compressor rings (compress_plan.h)
  // [num_layers * 2]: (layer, compressor) ran since the build (ClaimCompress).
  std::unique_ptr<std::atomic<uint8_t>[]> compress_ran_;
  size_t n_compress_ran_ = 0;
  // [num_layers]: the layer's swa_step ran since the build (ClaimStep).
  std::unique_ptr<std::atomic<uint8_t>[]> step_ran_;
  size_t n_step_ran_ = 0;

  Path path_ = Path::kNone;
  std::atomic<bool> executed_{false};
  uint64_t stamp_ = 0;
  int32_t n_tokens_ = 0;
  int32_t max_seqlen_q_ = 0;
  int32_t max_seqlen_k_ = 0;

  PlanBuffer<PlannedSeq> seqs_;
  PlanBuffer<PrevSlotState> prev_;
  PlanBuffer<PlannedSeq> scratch_;     // validation output, swapped in on success
  PlanBuffer<PrevSlotState> scratch_prev_;
  PlanBuffer<uint64_t> slot_mark_;     // duplicate-slot detection (validate.h)
  uint32_t build_stamp_ = 0;
  PlanBuffer<int32_t> cu_seqlens_;
  PlanBuffer<int32_t> token_seq_;
  PlanBuffer<int32_t> store_rows_;
  PlanBuffer<RowSegment> store_segments_;
  PlanBuffer<int32_t> offset_len_;
  PlanBuffer<int32_t> decode_index_;
  PlanBuffer<RowSegment> load_segments_;
  PlanBuffer<int32_t> pivots_;
};

}  // namespace swa::plan
