// valid_start and bounded replay (docs/semantics.md, "valid_start and bounded replay").
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/slot_table.h"

namespace swa::plan {

// Raises an allocated slot's valid_start; lowering it is FAILED_PRECONDITION.
absl::Status SetValidStart(SlotTable& slots, uint32_t slot, int32_t valid_start);

struct ReplayRange {
  int32_t start = 0;  // max(0, H - W)
  int32_t len = 0;    // H - start
};

// Prepares a slot holding no valid position (written_end <= valid_start) for a
// prefill of positions max(0, H - W) ... H - 1: valid_start = written_end = start.
absl::StatusOr<ReplayRange> BeginReplay(SlotTable& slots, uint32_t slot, int32_t window,
                                        int32_t hit_len);

}  // namespace swa::plan
