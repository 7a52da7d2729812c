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
};

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

  absl::Mutex& mu() const ABSL_LOCK_RETURNED(mu_) { return mu_; }
  // OUT_OF_RANGE for an id past the pool, FAILED_PRECONDITION when not allocated.
  absl::Status CheckAllocatedLocked(uint32_t slot) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  SlotState& StateLocked(uint32_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return state_[slot]; }
  const SlotState& StateLocked(uint32_t slot) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return state_[slot];
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<SlotState> state_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> free_ ABSL_GUARDED_BY(mu_);  // stack of free ids
};

}  // namespace swa
