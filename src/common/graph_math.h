// Per-sequence arithmetic of the graph decode (docs/cuda_backend.md, "Graph-capturable
// decode"): the checks a device-planned sequence must pass and the record it
// becomes. Host+device: the CUDA planner kernel and the CPU twin run this code,
// so the CPU tests prove the device path's integer logic. The rewind rule is
// the host planner's (common/rewind_rule.h), applied to the graph's own copy of
// the slot lengths.
#pragma once

#include <math.h>
#include <stdint.h>

#include "common/host_device.h"
#include "common/records.h"
#include "common/index_math.h"
#include "common/rewind_rule.h"

namespace swa::plan {

// Reason codes of the graph error record (== swa_graph_error_reason_t).
inline constexpr int32_t kGraphOk = 0;
inline constexpr int32_t kGraphSlotOutOfRange = 1;  // slot < -1 or >= max_slots
inline constexpr int32_t kGraphSlotNotImported = 2; // not imported into this graph (or released)
inline constexpr int32_t kGraphLengthOutOfRange = 3;  // seqlen_k < tokens_per_seq + valid_start
inline constexpr int32_t kGraphGap = 4;             // q_start past written_end: a forward jump
inline constexpr int32_t kGraphRewindTooDeep = 5;   // the ring no longer holds the oldest key
inline constexpr int32_t kGraphDuplicateSlot = 6;   // an earlier sequence of the batch has the slot

// The graph's copy of one slot's lengths (host memory on the CPU, device memory
// on CUDA). `imported` = 0: the graph refuses the slot.
struct GraphSlot {
  int32_t written_end;
  int32_t valid_start;
  int32_t ring_high;  // as SlotState::ring_high
  int32_t imported;
};

// What one graph decode reports (== swa_graph_error_t, mirrored in the header).
struct GraphError {
  int32_t reason;      // kGraphOk: no error since the last reset
  int32_t seq;         // the batch index of the first bad sequence
  int32_t slot;        // its slot id as given
  int32_t seqlen_k;    // its seqlen_k as given
  int32_t written_end; // the graph's written_end of that slot (-1 when unknown)
  int32_t ring_high;   // and its ring_high (-1 when unknown)
};

// Checks sequence (slot, seqlen_k) of a batch with `tokens` new tokens per
// sequence against the graph's slot copy `st` (read only when the slot is in
// range). Duplicates are the caller's check. Returns a reason code.
SWA_HOST_DEVICE int32_t CheckGraphSeq(int32_t slot, int32_t seqlen_k, int32_t tokens,
                                      int32_t max_slots, int32_t window, int32_t ring_len,
                                      const GraphSlot* slots) {
  if (slot < 0 || slot >= max_slots) return kGraphSlotOutOfRange;
  const GraphSlot st = slots[slot];
  if (st.imported == 0) return kGraphSlotNotImported;
  // seqlen_k - tokens >= 0 (>= valid_start: CheckRewind), and no overflow below.
  if (seqlen_k < tokens) return kGraphLengthOutOfRange;
  const RewindCheck c = CheckRewind(seqlen_k - tokens, st.valid_start, st.written_end,
                                    st.ring_high, window, ring_len);
  switch (c.verdict) {
    case kRewindOk: return kGraphOk;
    case kRewindBelowValidStart: return kGraphLengthOutOfRange;
    case kRewindGap: return kGraphGap;
    default: return kGraphRewindTooDeep;
  }
}

// The planned record of a valid sequence whose tokens start at `token_offset`.
SWA_HOST_DEVICE PlannedSeq GraphPlannedSeq(int32_t slot, int32_t seqlen_k, int32_t tokens,
                                           int32_t valid_start, int32_t token_offset) {
  PlannedSeq s;
  s.slot = static_cast<uint32_t>(slot);
  s.seqlen_q = tokens;
  s.seqlen_k = seqlen_k;
  s.q_start = seqlen_k - tokens;
  s.valid_start = valid_start;
  s.token_offset = token_offset;
  return s;
}

// The slot copy after a valid sequence ran (the host planner's commit).
SWA_HOST_DEVICE void AdvanceGraphSlot(GraphSlot* st, int32_t seqlen_k) {
  const int32_t high = RingContentEnd(st->written_end, st->ring_high);
  st->ring_high = high > seqlen_k ? high : seqlen_k;
  st->written_end = seqlen_k;
}

// The LSE written for the rows of a padding or refused sequence: that of a row
// that saw no key, so that swa_attention_merge gives their zero output no
// weight (0 would weigh it as exp(0 - m)).
SWA_HOST_DEVICE float GraphIdleRowLse() { return -INFINITY; }

// Token j of a planned ring-only sequence: offset_len pair and store row
// (every new token of a ring-only step is stored).
SWA_HOST_DEVICE void GraphTokenRows(const PlannedSeq& s, int32_t j, int32_t window,
                                    int32_t ring_len, int32_t* offset_len, int32_t* store_row) {
  const int32_t p = s.q_start + j;
  const TokenGather g = DecodeGather(s.slot, p, s.valid_start, window, ring_len);
  offset_len[0] = g.first_row;
  offset_len[1] = g.len;
  *store_row = RingRow(s.slot, p, ring_len);
}

}  // namespace swa::plan
