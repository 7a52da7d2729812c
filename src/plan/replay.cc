#include "plan/replay.h"

#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace swa::plan {

absl::Status SetValidStart(SlotTable& slots, uint32_t slot, int32_t valid_start) {
  if (valid_start < 0)
    return absl::InvalidArgumentError(
        absl::StrFormat("valid_start = %d is negative", valid_start));
  absl::MutexLock lock(&slots.mu());
  SWA_RETURN_IF_ERROR(slots.CheckAllocatedLocked(slot));
  SlotState& st = slots.StateLocked(slot);
  if (valid_start < st.valid_start)
    return absl::FailedPreconditionError(absl::StrFormat(
        "slot %u: valid_start = %d is below the current valid_start = %d; lowering it would "
        "expose positions that were never written (reset the slot instead)",
        slot, valid_start, st.valid_start));
  st.valid_start = valid_start;
  return absl::OkStatus();
}

absl::StatusOr<ReplayRange> BeginReplay(SlotTable& slots, uint32_t slot, int32_t window,
                                        int32_t hit_len) {
  if (hit_len < 0)
    return absl::InvalidArgumentError(absl::StrFormat("hit_len = %d is negative", hit_len));
  absl::MutexLock lock(&slots.mu());
  SWA_RETURN_IF_ERROR(slots.CheckAllocatedLocked(slot));
  SlotState& st = slots.StateLocked(slot);
  if (st.written_end > st.valid_start)
    return absl::FailedPreconditionError(absl::StrFormat(
        "slot %u holds positions %d ... %d (written_end = %d, valid_start = %d); bounded replay "
        "needs a fresh or reset slot",
        slot, st.valid_start, st.written_end - 1, st.written_end, st.valid_start));
  ReplayRange r;
  r.start = hit_len > window ? hit_len - window : 0;
  r.len = hit_len - r.start;
  st.valid_start = r.start;
  st.written_end = r.start;
  st.ring_high = r.start;  // stale rows are older than anything the replay writes
  return r;
}

}  // namespace swa::plan
