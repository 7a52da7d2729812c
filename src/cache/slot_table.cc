#include "cache/slot_table.h"

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace swa {

SlotTable::SlotTable(uint32_t num_slots) : state_(num_slots) {
  free_.reserve(num_slots);
  for (uint32_t i = num_slots; i > 0; --i) free_.push_back(i - 1);  // slot 0 first
}

absl::Status SlotTable::CheckInRangeLocked(uint32_t slot) const {
  if (slot >= state_.size())
    return absl::OutOfRangeError(
        absl::StrFormat("slot %u is out of range: the pool has %u slots", slot, state_.size()));
  return absl::OkStatus();
}

absl::Status SlotTable::CheckAllocatedLocked(uint32_t slot) const {
  if (absl::Status s = CheckInRangeLocked(slot); !s.ok()) return s;
  if (!state_[slot].allocated)
    return absl::FailedPreconditionError(absl::StrFormat("slot %u is not allocated", slot));
  if (state_[slot].busy != 0)
    return absl::FailedPreconditionError(
        absl::StrFormat("slot %u is being saved/restored", slot));
  return absl::OkStatus();
}

void SlotTable::CopyPositions(const SlotState& from, SlotState* to) {
  to->written_end = from.written_end;
  to->valid_start = from.valid_start;
  to->ring_high = from.ring_high;
}

absl::StatusOr<uint32_t> SlotTable::Alloc() {
  absl::MutexLock lock(&mu_);
  if (free_.empty())
    return absl::ResourceExhaustedError(
        absl::StrFormat("all %u slots are allocated", state_.size()));
  const uint32_t slot = free_.back();
  free_.pop_back();
  state_[slot] = SlotState{.allocated = true, .generation = state_[slot].generation};
  return slot;
}

absl::Status SlotTable::Free(uint32_t slot) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckAllocatedLocked(slot); !s.ok()) {
    if (absl::IsFailedPrecondition(s) && !state_[slot].allocated)
      return absl::FailedPreconditionError(
          absl::StrFormat("slot %u is not allocated (double free?)", slot));
    return s;
  }
  state_[slot] = SlotState{.generation = state_[slot].generation + 1};
  free_.push_back(slot);
  return absl::OkStatus();
}

absl::Status SlotTable::Reset(uint32_t slot) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckAllocatedLocked(slot); !s.ok()) return s;
  state_[slot] = SlotState{.allocated = true, .generation = state_[slot].generation};
  return absl::OkStatus();
}

absl::StatusOr<SlotState> SlotTable::Get(uint32_t slot) const {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckInRangeLocked(slot); !s.ok()) return s;
  return state_[slot];
}

absl::Status SlotTable::Set(uint32_t slot, const SlotState& state) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckAllocatedLocked(slot); !s.ok()) return s;
  CopyPositions(state, &state_[slot]);
  return absl::OkStatus();
}

uint32_t SlotTable::num_allocated() const {
  absl::MutexLock lock(&mu_);
  return static_cast<uint32_t>(state_.size() - free_.size());
}

absl::StatusOr<uint32_t> SlotTable::Generation(uint32_t slot) const {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckAllocatedLocked(slot); !s.ok()) return s;
  return state_[slot].generation;
}

absl::StatusOr<SlotState> SlotTable::BeginRead(uint32_t slot) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckInRangeLocked(slot); !s.ok()) return s;
  SlotState& st = state_[slot];
  if (st.busy > 0 && st.allocated) {  // other saves read it too: share
    ++st.busy;
    return st;
  }
  if (absl::Status s = CheckAllocatedLocked(slot); !s.ok()) return s;
  st.busy = 1;
  return st;
}

void SlotTable::EndRead(uint32_t slot) {
  absl::MutexLock lock(&mu_);
  --state_[slot].busy;
}

absl::Status SlotTable::BeginWrite(uint32_t slot, uint32_t generation) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckInRangeLocked(slot); !s.ok()) return s;
  SlotState& st = state_[slot];
  if (st.generation != generation)
    return absl::FailedPreconditionError(absl::StrFormat(
        "slot %u was freed%s while the restore read the store (generation %u, now %u); "
        "nothing was written",
        slot, st.allocated ? " and allocated again" : "", generation, st.generation));
  if (absl::Status s = CheckAllocatedLocked(slot); !s.ok()) return s;
  st.busy = -1;
  return absl::OkStatus();
}

void SlotTable::EndWrite(uint32_t slot, const SlotState* restored) {
  absl::MutexLock lock(&mu_);
  if (restored != nullptr) CopyPositions(*restored, &state_[slot]);
  state_[slot].busy = 0;
}

// ---- valid_start and bounded replay (docs/semantics.md, "valid_start and bounded replay")

absl::Status SlotTable::SetValidStart(uint32_t slot, int32_t valid_start) {
  if (valid_start < 0)
    return absl::InvalidArgumentError(
        absl::StrFormat("valid_start = %d is negative", valid_start));
  absl::MutexLock lock(&mu_);
  SWA_RETURN_IF_ERROR(CheckAllocatedLocked(slot));
  SlotState& st = state_[slot];
  if (valid_start < st.valid_start)
    return absl::FailedPreconditionError(absl::StrFormat(
        "slot %u: valid_start = %d is below the current valid_start = %d; lowering it would "
        "expose positions that were never written (reset the slot instead)",
        slot, valid_start, st.valid_start));
  st.valid_start = valid_start;
  return absl::OkStatus();
}

absl::StatusOr<ReplayRange> SlotTable::BeginReplay(uint32_t slot, int32_t window,
                                                   int32_t hit_len) {
  if (hit_len < 0)
    return absl::InvalidArgumentError(absl::StrFormat("hit_len = %d is negative", hit_len));
  absl::MutexLock lock(&mu_);
  SWA_RETURN_IF_ERROR(CheckAllocatedLocked(slot));
  SlotState& st = state_[slot];
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

}  // namespace swa
