// Per-slot metadata and the free list (docs/semantics.md, "Rewinds" and
// "valid_start and bounded replay").
#pragma once

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace swa {

struct SlotState {
  bool allocated = false;
  int32_t written_end = 0;  // one past the highest position written
  int32_t valid_start = 0;  // positions below it are missing
  // One past the highest position stored into the ring since alloc/reset.
  // After a rewind it exceeds written_end: rejected drafts above written_end
  // still occupy ring rows, and the planner must not count on the positions
  // they overwrote. The planner uses max(written_end, ring_high), so a writer
  // that only sets written_end stays safe (a stale value is merely stricter).
  // See docs/planner.md.
  int32_t ring_high = 0;
  // Bumped by every Free (Alloc keeps it): a restore that read the store while
  // the slot was freed and handed out again sees another value and writes
  // nothing. The same check serves anyone who must know "still the same owner".
  uint32_t generation = 0;
  // Bumped by every call that replaces the slot's sequence while it stays
  // allocated: reset, copy into it, restore into it, begin_replay. A plan built
  // before (StepPlan::CheckOwnerLocked) then refuses to step or cancel: it
  // would write the old sequence's rows into the new one's ring (rows its
  // ring_high does not count) or put back the old lengths.
  uint32_t epoch = 0;
  // Bumped by every successful plan build that lists the slot, put back by its
  // cancel: a cancel is refused unless its build is still the slot's latest,
  // also when a later build happened to leave the same numbers.
  uint32_t builds = 0;
  // > 0: that many saves are reading the slot's bytes outside the lock;
  // -1: a restore is writing them. While busy, every other call on the slot
  // fails with FAILED_PRECONDITION (CheckAllocatedLocked).
  int32_t busy = 0;
  // A graph decode may have advanced the slot since it was imported into a
  // graph (src/step/decode_graph.h): its lengths here are stale until
  // SetLengths(). Host planning, saves, restores, copies and replay refuse it.
  bool device_advanced = false;
  // Live decode graphs that imported the slot and have not released it: any
  // of them may still write its ring. While > 0, every call that would hand the
  // slot to another owner or replace its content (free, reset, copy into it,
  // restore into it, begin_replay, set_valid_start) fails (CheckNotHeldLocked).
  int32_t graph_holds = 0;
  // swa_step calls running on the slot now (several may: one per layer). The
  // step reads and writes the slot's rings outside the lock; while > 0, every
  // call that reads or writes the slot's bytes from elsewhere or hands the slot
  // to another owner (free, reset, copy from or into it, save, restore) fails
  // (CheckNotSteppingLocked). A CUDA step holds the slot while it enqueues.
  int32_t step_holds = 0;
};

// What swa_slot_begin_replay reports: the positions to re-run.
struct ReplayRange {
  int32_t start = 0;  // max(0, H - span)
  int32_t len = 0;    // H - start
};

// The exact replay span (docs/semantics.md, "Exact replay"): L * (W - 1), plus
// one when the output at the last prefix position is needed; saturates at
// INT32_MAX (a span that long covers every int32 prefix).
int32_t ExactReplaySpan(uint32_t window, uint32_t sliding_layers, bool need_last_output);

// O(1) alloc/free from a LIFO free list; every method locks `mu()` itself
// except the *Locked ones, which the planner calls while holding it to check
// and update a whole batch atomically.
class SlotTable {
 public:
  explicit SlotTable(uint32_t num_slots);

  uint32_t size() const { return static_cast<uint32_t>(state_.size()); }
  absl::StatusOr<uint32_t> Alloc() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Free(uint32_t slot) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Reset(uint32_t slot) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<SlotState> Get(uint32_t slot) const ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Set(uint32_t slot, const SlotState& state) ABSL_LOCKS_EXCLUDED(mu_);
  uint32_t num_allocated() const ABSL_LOCKS_EXCLUDED(mu_);

  // Raises an allocated slot's valid_start; lowering it is FAILED_PRECONDITION.
  absl::Status SetValidStart(uint32_t slot, int32_t valid_start) ABSL_LOCKS_EXCLUDED(mu_);
  // Prepares a slot holding no valid position (written_end <= valid_start) for
  // a prefill of positions max(0, H - span) ... H - 1: valid_start =
  // written_end = ring_high = start. `span` is W for the approximate replay,
  // ExactReplaySpan() for the exact one.
  absl::StatusOr<ReplayRange> BeginReplay(uint32_t slot, int32_t span, int32_t hit_len)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The slot's generation, asked by a restore before its store I/O;
  // OUT_OF_RANGE, FAILED_PRECONDITION as CheckPlannableLocked (also for a
  // device-advanced slot) and CheckNotHeldLocked.
  absl::StatusOr<uint32_t> Generation(uint32_t slot) const ABSL_LOCKS_EXCLUDED(mu_);

  // Payload copies run without the lock; the slot is marked busy meanwhile.
  // A save: several may read one slot at once. Returns the slot's state.
  absl::StatusOr<SlotState> BeginRead(uint32_t slot) ABSL_LOCKS_EXCLUDED(mu_);
  void EndRead(uint32_t slot) ABSL_LOCKS_EXCLUDED(mu_);
  // A restore: alone, and only while the slot still has `generation` (it was
  // not freed since the caller read it) and no decode graph holds it.
  absl::Status BeginWrite(uint32_t slot, uint32_t generation) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends a write; `restored` (when not null) supplies written_end, valid_start
  // and ring_high.
  void EndWrite(uint32_t slot, const SlotState* restored) ABSL_LOCKS_EXCLUDED(mu_);

  // Marks slots imported into a graph decode (all-or-nothing; each must be
  // allocated, idle and not already device-advanced) and returns their states.
  // `takes_hold[i]` != 0: the importing graph did not hold slots[i] yet, and
  // takes a hold on it (graph_holds + 1).
  absl::Status MarkDeviceAdvanced(const uint32_t* slots, size_t n, const uint8_t* takes_hold,
                                  SlotState* states) ABSL_LOCKS_EXCLUDED(mu_);
  // Undoes MarkDeviceAdvanced() (the mark and the holds taken) for slots the
  // graph never received (its copy failed).
  void UnmarkDeviceAdvanced(const uint32_t* slots, size_t n, const uint8_t* takes_hold)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A graph released `slots` (or was destroyed): one hold less on each.
  void DropGraphHolds(const uint32_t* slots, size_t n) ABSL_LOCKS_EXCLUDED(mu_);
  // The engine's lengths of slots a graph decode advanced (all-or-nothing);
  // clears device_advanced. `valid_start` may be null (keep the slot's).
  // `ring_slack` (R - W + 1): how far past written_end the ring may hold rows.
  absl::Status SetLengths(const uint32_t* slots, const int32_t* written_end,
                          const int32_t* valid_start, size_t n, int32_t ring_slack)
      ABSL_LOCKS_EXCLUDED(mu_);
  // FAILED_PRECONDITION naming the slot when it is device-advanced.
  absl::Status CheckHostKnownLocked(uint32_t slot) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FAILED_PRECONDITION naming the slot when a decode graph holds it; `action`
  // ("freeing it", ...) completes the message's advice.
  absl::Status CheckNotHeldLocked(uint32_t slot, const char* action) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FAILED_PRECONDITION naming the slot while a step runs on it; `action`
  // ("freeing it", ...) completes the message.
  absl::Status CheckNotSteppingLocked(uint32_t slot, const char* action) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // CheckAllocatedLocked, then CheckHostKnownLocked.
  absl::Status CheckPlannableLocked(uint32_t slot) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex& mu() const ABSL_LOCK_RETURNED(mu_) { return mu_; }
  // OUT_OF_RANGE for an id past the pool, FAILED_PRECONDITION when not
  // allocated or busy (being saved or restored).
  absl::Status CheckAllocatedLocked(uint32_t slot) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Copies written_end, valid_start and ring_high (not the slot's identity:
  // allocated, generation, busy).
  static void CopyPositions(const SlotState& from, SlotState* to);
  SlotState& StateLocked(uint32_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return state_[slot]; }
  const SlotState& StateLocked(uint32_t slot) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return state_[slot];
  }

 private:
  absl::Status CheckInRangeLocked(uint32_t slot) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<SlotState> state_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> free_ ABSL_GUARDED_BY(mu_);  // stack of free ids
};

}  // namespace swa
