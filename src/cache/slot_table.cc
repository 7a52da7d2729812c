#include "cache/slot_table.h"

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace swa {

SlotTable::SlotTable(uint32_t num_slots) : state_(num_slots) {
  free_.reserve(num_slots);
  for (uint32_t i = num_slots; i > 0; --i) free_.push_back(i - 1);  // slot 0 first
}

absl::Status SlotTable::CheckAllocatedLocked(uint32_t slot) const {
  if (slot >= state_.size())
    return absl::OutOfRangeError(
        absl::StrFormat("slot %u is out of range: the pool has %u slots", slot, state_.size()));
  if (!state_[slot].allocated)
    return absl::FailedPreconditionError(absl::StrFormat("slot %u is not allocated", slot));
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> SlotTable::Alloc() {
  absl::MutexLock lock(&mu_);
  if (free_.empty())
    return absl::ResourceExhaustedError(
        absl::StrFormat("all %u slots are allocated", state_.size()));
  const uint32_t slot = free_.back();
  free_.pop_back();
  state_[slot] = SlotState{.allocated = true};
  return slot;
}

absl::Status SlotTable::Free(uint32_t slot) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckAllocatedLocked(slot); !s.ok()) {
    if (absl::IsFailedPrecondition(s))
      return absl::FailedPreconditionError(
          absl::StrFormat("slot %u is not allocated (double free?)", slot));
    return s;
  }
  state_[slot] = SlotState{};
  free_.push_back(slot);
  return absl::OkStatus();
}

absl::Status SlotTable::Reset(uint32_t slot) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckAllocatedLocked(slot); !s.ok()) return s;
  state_[slot] = SlotState{.allocated = true};
  return absl::OkStatus();
}

absl::StatusOr<SlotState> SlotTable::Get(uint32_t slot) const {
  absl::MutexLock lock(&mu_);
  if (slot >= state_.size())
    return absl::OutOfRangeError(
        absl::StrFormat("slot %u is out of range: the pool has %u slots", slot, state_.size()));
  return state_[slot];
}

absl::Status SlotTable::Set(uint32_t slot, const SlotState& state) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckAllocatedLocked(slot); !s.ok()) return s;
  state_[slot] = state;
  state_[slot].allocated = true;
  return absl::OkStatus();
}

uint32_t SlotTable::num_allocated() const {
  absl::MutexLock lock(&mu_);
  return static_cast<uint32_t>(state_.size() - free_.size());
}

}  // namespace swa
