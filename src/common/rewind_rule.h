// The rewind rule of docs/semantics.md ("Rewinds"), in one place for the host
// planner (src/plan/validate.cc) and the graph decode's per-sequence check
// (common/graph_math.h: the CUDA planner kernel and its CPU twin). Plain
// integer code, host and device.
#pragma once

#include <stdint.h>

#include "common/host_device.h"
#include "common/index_math.h"

namespace swa::plan {

// One past the ring's newest content, max(written_end, ring_high): after a
// rewind, rejected drafts above written_end still occupy rows (docs/planner.md,
// "chained rewinds"); a stale ring_high below written_end counts as written_end.
SWA_HOST_DEVICE int32_t RingContentEnd(int32_t written_end, int32_t ring_high) {
  return written_end > ring_high ? written_end : ring_high;
}

// Outcome of CheckRewind, in the order the rules are checked.
enum RewindVerdict : int32_t {
  kRewindOk = 0,
  kRewindBelowValidStart = 1,  // q_start < valid_start: positions below it are missing
  kRewindGap = 2,              // q_start > max(written_end, valid_start): never-written positions
  kRewindTooDeep = 3,          // the ring no longer holds the oldest key the first token needs
};

struct RewindCheck {
  int32_t verdict;  // a RewindVerdict
  // Oldest position the first new token sees: max(0, valid_start, q_start - W + 1).
  int32_t oldest;
  // RingContentEnd(written_end, ring_high): the ring holds positions >= high - R.
  int32_t high;
};

// A step whose first new token is at `q_start` (>= 0), against a slot with
// `written_end`, `ring_high` (>= 0) and the effective `valid_start` (>= 0: the
// larger of the slot's and the sequence's), window W >= 1, ring length R.
SWA_HOST_DEVICE RewindCheck CheckRewind(int32_t q_start, int32_t valid_start, int32_t written_end,
                                        int32_t ring_high, int32_t window, int32_t ring_len) {
  RewindCheck c;
  c.oldest = WindowLo(q_start, valid_start, window);
  c.high = RingContentEnd(written_end, ring_high);
  if (q_start < valid_start) {
    c.verdict = kRewindBelowValidStart;
  } else if (q_start > (written_end > valid_start ? written_end : valid_start)) {
    c.verdict = kRewindGap;
  } else if (static_cast<int64_t>(c.oldest) < static_cast<int64_t>(c.high) - ring_len) {
    c.verdict = kRewindTooDeep;
  } else {
    c.verdict = kRewindOk;
  }
  return c;
}

}  // namespace swa::plan
