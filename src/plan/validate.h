// Batch validation of the step planner (docs/semantics.md "Rewinds", "Pivots"): every rule a
// step must satisfy before any slot is touched.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "cache/slot_table.h"
#include "plan/step_plan.h"

namespace swa::plan {

struct BatchSummary {
  int32_t n_tokens = 0;
  int32_t max_seqlen_q = 0;
  int32_t max_seqlen_k = 0;
  Path path = Path::kNone;
};

// Checks `seqs` against the slot table (the caller holds slots.mu() for the
// check and the commit that follows) and writes one PlannedSeq and the slot's
// current state per input into `out` and `prev` (capacity >= seqs.size()).
// `slot_mark` has one entry per slot; an entry equal to (stamp << 32 | i)
// means "sequence i uses this slot in this build".
// Changes nothing but `out`, `prev`, `slot_mark` and `summary`.
absl::Status ValidateBatch(const SlotTable& slots, int32_t window, int32_t ring_len,
                           absl::Span<const SeqDesc> seqs, uint64_t* slot_mark, uint32_t stamp,
                           PlannedSeq* out, PrevSlotState* prev, BatchSummary* summary)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(slots.mu());

}  // namespace swa::plan
