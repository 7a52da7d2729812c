#include "cache/slot_table.h"

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

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

}  // namespace swa
