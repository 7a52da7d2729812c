#include "cache/slot_table.h"

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common/rewind_rule.h"
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

absl::Status SlotTable::CheckHostKnownLocked(uint32_t slot) const {
  if (state_[slot].device_advanced)
    return absl::FailedPreconditionError(absl::StrFormat(
        "slot %u is device-advanced: a graph decode may have moved it past written_end = %d; "
        "call swa_slot_set_lengths() with its lengths first",
        slot, state_[slot].written_end));
  return absl::OkStatus();
}

absl::Status SlotTable::CheckNotHeldLocked(uint32_t slot, const char* action) const {
  const int32_t holds = state_[slot].graph_holds;
  if (holds > 0)
    return absl::FailedPreconditionError(absl::StrFormat(
        "slot %u is imported into %d decode graph%s, whose steps may still write its ring: "
        "release it with swa_decode_graph_release() (or destroy the graph) before %s",
        slot, holds, holds == 1 ? "" : "s", action));
  return absl::OkStatus();
}

absl::Status SlotTable::CheckNotSteppingLocked(uint32_t slot, const char* action) const {
  const int32_t steps = state_[slot].step_holds;
  if (steps > 0)
    return absl::FailedPreconditionError(absl::StrFormat(
        "slot %u is in use by %d running swa_step call%s (on another thread), which read%s and "
        "write%s its rings: wait for %s to return before %s",
        slot, steps, steps == 1 ? "" : "s", steps == 1 ? "s" : "", steps == 1 ? "s" : "",
        steps == 1 ? "it" : "them", action));
  return absl::OkStatus();
}

absl::Status SlotTable::CheckPlannableLocked(uint32_t slot) const {
  SWA_RETURN_IF_ERROR(CheckAllocatedLocked(slot));
  return CheckHostKnownLocked(slot);
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
  // A graph that still holds the slot would write the next owner's ring.
  SWA_RETURN_IF_ERROR(CheckNotHeldLocked(slot, "freeing it"));
  SWA_RETURN_IF_ERROR(CheckNotSteppingLocked(slot, "freeing it"));
  state_[slot] = SlotState{.generation = state_[slot].generation + 1};
  free_.push_back(slot);
  return absl::OkStatus();
}

absl::Status SlotTable::Reset(uint32_t slot) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckAllocatedLocked(slot); !s.ok()) return s;
  SWA_RETURN_IF_ERROR(CheckNotHeldLocked(slot, "resetting it"));
  SWA_RETURN_IF_ERROR(CheckNotSteppingLocked(slot, "resetting it"));
  state_[slot] = SlotState{.allocated = true,
                           .generation = state_[slot].generation,
                           .epoch = state_[slot].epoch + 1};
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
  // Plannable, not only allocated: a restore asks before its store I/O, and a
  // device-advanced slot must be refused as such, whatever the store answers.
  if (absl::Status s = CheckPlannableLocked(slot); !s.ok()) return s;
  SWA_RETURN_IF_ERROR(CheckNotHeldLocked(slot, "restoring into it"));
  SWA_RETURN_IF_ERROR(CheckNotSteppingLocked(slot, "restoring into it"));
  return state_[slot].generation;
}

absl::StatusOr<SlotState> SlotTable::BeginRead(uint32_t slot) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckInRangeLocked(slot); !s.ok()) return s;
  SWA_RETURN_IF_ERROR(CheckHostKnownLocked(slot));
  SWA_RETURN_IF_ERROR(CheckNotSteppingLocked(slot, "saving it"));
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
  if (absl::Status s = CheckPlannableLocked(slot); !s.ok()) return s;
  // A graph may have imported the slot while the restore read the store.
  SWA_RETURN_IF_ERROR(CheckNotHeldLocked(slot, "restoring into it"));
  SWA_RETURN_IF_ERROR(CheckNotSteppingLocked(slot, "restoring into it"));
  st.busy = -1;
  return absl::OkStatus();
}

void SlotTable::EndWrite(uint32_t slot, const SlotState* restored) {
  absl::MutexLock lock(&mu_);
  if (restored != nullptr) {
    CopyPositions(*restored, &state_[slot]);
    ++state_[slot].epoch;  // another sequence now: plans built before must not run
  }
  state_[slot].busy = 0;
}

// ---- Graph decode (src/step/decode_graph.h) ----------------------------------

absl::Status SlotTable::MarkDeviceAdvanced(const uint32_t* slots, size_t n,
                                           const uint8_t* takes_hold, SlotState* states) {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < n; ++i) {
    if (absl::Status s = CheckPlannableLocked(slots[i]); !s.ok())
      return absl::Status(s.code(), absl::StrFormat("slots[%u]: %s", i, s.message()));
    for (size_t j = 0; j < i; ++j)
      if (slots[j] == slots[i])
        return absl::InvalidArgumentError(
            absl::StrFormat("slots[%u] = %u repeats slots[%u]", i, slots[i], j));
  }
  for (size_t i = 0; i < n; ++i) {
    state_[slots[i]].device_advanced = true;
    if (takes_hold[i] != 0) ++state_[slots[i]].graph_holds;
    states[i] = state_[slots[i]];
  }
  return absl::OkStatus();
}

void SlotTable::UnmarkDeviceAdvanced(const uint32_t* slots, size_t n, const uint8_t* takes_hold) {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < n; ++i) {
    if (slots[i] >= state_.size()) continue;
    state_[slots[i]].device_advanced = false;
    if (takes_hold[i] != 0 && state_[slots[i]].graph_holds > 0) --state_[slots[i]].graph_holds;
  }
}

void SlotTable::DropGraphHolds(const uint32_t* slots, size_t n) {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < n; ++i)
    if (slots[i] < state_.size() && state_[slots[i]].graph_holds > 0)
      --state_[slots[i]].graph_holds;
}

absl::Status SlotTable::SetLengths(const uint32_t* slots, const int32_t* written_end,
                                   const int32_t* valid_start, size_t n, int32_t ring_slack) {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t slot = slots[i];
    if (absl::Status s = CheckAllocatedLocked(slot); !s.ok())
      return absl::Status(s.code(), absl::StrFormat("slots[%u]: %s", i, s.message()));
    const SlotState& st = state_[slot];
    const int32_t e = written_end[i];
    const int32_t v = valid_start != nullptr ? valid_start[i] : st.valid_start;
    if (v < st.valid_start)
      return absl::InvalidArgumentError(absl::StrFormat(
          "slots[%u] (slot %u): valid_start = %d is below the slot's valid_start = %d", i, slot,
          v, st.valid_start));
    if (e < v)
      return absl::InvalidArgumentError(absl::StrFormat(
          "slots[%u] (slot %u): written_end = %d is below valid_start = %d", i, slot, e, v));
    if (e > INT32_MAX - ring_slack)
      return absl::InvalidArgumentError(absl::StrFormat(
          "slots[%u] (slot %u): written_end = %d overflows the position range", i, slot, e));
    // A slot the host still knows may only be rewound, never moved past what
    // its ring holds (positions that were never written).
    const int32_t high = plan::RingContentEnd(st.written_end, st.ring_high);
    if (!st.device_advanced && e > high)
      return absl::FailedPreconditionError(absl::StrFormat(
          "slots[%u] (slot %u) is not device-advanced and its ring holds positions below %d: "
          "written_end = %d would claim positions that were never written",
          i, slot, high, e));
    for (size_t j = 0; j < i; ++j)
      if (slots[j] == slot)
        return absl::InvalidArgumentError(
            absl::StrFormat("slots[%u] = %u repeats slots[%u]", i, slot, j));
  }
  for (size_t i = 0; i < n; ++i) {
    SlotState& st = state_[slots[i]];
    const int32_t e = written_end[i];
    if (valid_start != nullptr) st.valid_start = valid_start[i];
    // A graph step may have stored up to R - W + 1 positions past the lengths
    // the engine reports (rejected drafts): assume it did, which is stricter.
    const int32_t bound =
        st.device_advanced ? e + ring_slack : plan::RingContentEnd(st.written_end, st.ring_high);
    st.ring_high = std::max(st.ring_high, bound);
    st.written_end = e;
    st.device_advanced = false;
  }
  return absl::OkStatus();
}

// ---- valid_start and bounded replay (docs/semantics.md, "valid_start and bounded replay")

absl::Status SlotTable::SetValidStart(uint32_t slot, int32_t valid_start) {
  if (valid_start < 0)
    return absl::InvalidArgumentError(
        absl::StrFormat("valid_start = %d is negative", valid_start));
  absl::MutexLock lock(&mu_);
  SWA_RETURN_IF_ERROR(CheckPlannableLocked(slot));
  // The graph keeps the valid_start it imported and would read below the new one.
  SWA_RETURN_IF_ERROR(CheckNotHeldLocked(slot, "raising its valid_start"));
  SlotState& st = state_[slot];
  if (valid_start < st.valid_start)
    return absl::FailedPreconditionError(absl::StrFormat(
        "slot %u: valid_start = %d is below the current valid_start = %d; lowering it would "
        "expose positions that were never written (reset the slot instead)",
        slot, valid_start, st.valid_start));
  st.valid_start = valid_start;
  return absl::OkStatus();
}

int32_t ExactReplaySpan(uint32_t window, uint32_t sliding_layers, bool need_last_output) {
  const int64_t per_layer = window > 0 ? int64_t{window} - 1 : 0;
  // Both factors < 2^32: the product fits in 64 bits unsigned; clamp first.
  const uint64_t span = static_cast<uint64_t>(per_layer) * sliding_layers +
                        (need_last_output ? 1u : 0u);
  return span > static_cast<uint64_t>(INT32_MAX) ? INT32_MAX : static_cast<int32_t>(span);
}

absl::StatusOr<ReplayRange> SlotTable::BeginReplay(uint32_t slot, int32_t span,
                                                   int32_t hit_len) {
  if (hit_len < 0)
    return absl::InvalidArgumentError(absl::StrFormat("hit_len = %d is negative", hit_len));
  absl::MutexLock lock(&mu_);
  SWA_RETURN_IF_ERROR(CheckPlannableLocked(slot));
  SWA_RETURN_IF_ERROR(CheckNotHeldLocked(slot, "preparing it for replay"));
  SlotState& st = state_[slot];
  if (st.written_end > st.valid_start)
    return absl::FailedPreconditionError(absl::StrFormat(
        "slot %u holds positions %d ... %d (written_end = %d, valid_start = %d); bounded replay "
        "needs a fresh or reset slot",
        slot, st.valid_start, st.written_end - 1, st.written_end, st.valid_start));
  ReplayRange r;
  r.start = hit_len > span ? hit_len - span : 0;
  r.len = hit_len - r.start;
  st.valid_start = r.start;
  st.written_end = r.start;
  st.ring_high = r.start;  // stale rows are older than anything the replay writes
  ++st.epoch;
  return r;
}

}  // namespace swa
