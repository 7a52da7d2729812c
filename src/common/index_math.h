// Per-token window arithmetic of docs/semantics.md ("Ring", "Steps and plans"), shared by the host
// planner (src/plan/) and the device decode planner (kernels/plan/). Plain
// integer code: no standard library, no absl, so nvcc compiles it as-is.
//
// Inputs are assumed validated (positions >= 0, valid_start <= q_start <= p,
// slot * R + R - 1 fits int32); the planner and the kernel guarantee that.
#pragma once

#include <stdint.h>

#include "common/host_device.h"

namespace swa::plan {

SWA_HOST_DEVICE int32_t Max3(int32_t a, int32_t b, int32_t c) {
  const int32_t ab = a > b ? a : b;
  return ab > c ? ab : c;
}

// Oldest visible position of a query at `p`: max(0, v, p - W + 1) ("Window").
SWA_HOST_DEVICE int32_t WindowLo(int32_t p, int32_t valid_start, int32_t window) {
  return Max3(0, valid_start, p - window + 1);
}

// Flat ring row of position `pos` (>= 0) of `slot`: slot * R + pos mod R.
SWA_HOST_DEVICE int32_t RingRow(uint32_t slot, int32_t pos, int32_t ring_len) {
  return static_cast<int32_t>(slot) * ring_len + pos % ring_len;
}

// One token's decode gather ("Decode index"): first ring row and key count.
struct TokenGather {
  int32_t first_row;  // s * R + (lo mod R)
  int32_t len;        // p - lo + 1, in [1, W]
  int32_t lo;         // oldest visible position
};

SWA_HOST_DEVICE TokenGather DecodeGather(uint32_t slot, int32_t p, int32_t valid_start,
                                         int32_t window, int32_t ring_len) {
  TokenGather g;
  g.lo = WindowLo(p, valid_start, window);
  g.len = p - g.lo + 1;
  g.first_row = RingRow(slot, g.lo, ring_len);
  return g;
}

// Writes the W-entry index row of a token: rows of lo, lo+1, ..., p (oldest
// first), split where the ring wraps so no element needs a modulo, then `pad`
// (-1, or a legal row) in the remaining W - len entries. `slot_base` = s * R.
SWA_HOST_DEVICE void FillIndexRow(int32_t* row, int32_t slot_base, int32_t first_row,
                                  int32_t len, int32_t window, int32_t ring_len, int32_t pad) {
  const int32_t r0 = first_row - slot_base;
  const int32_t run1 = len < ring_len - r0 ? len : ring_len - r0;
  int32_t j = 0;
  for (; j < run1; ++j) row[j] = first_row + j;
  const int32_t wrap = slot_base - run1;  // row of entry j >= run1 is slot_base + (j - run1)
  for (; j < len; ++j) row[j] = wrap + j;
  for (; j < window; ++j) row[j] = pad;
}

// Entry j of a token's index row, computed alone (the device planner writes
// one entry per thread); equal to what FillIndexRow writes at row[j].
SWA_HOST_DEVICE int32_t IndexEntry(int32_t slot_base, int32_t first_row, int32_t len, int32_t j,
                                   int32_t ring_len, int32_t pad) {
  if (j >= len) return pad;
  const int32_t r = first_row - slot_base + j;  // < 2R: one wrap at most
  return slot_base + (r >= ring_len ? r - ring_len : r);
}

// Row of the newest visible key (the token itself): the padding value of the
// "legal row" option.
SWA_HOST_DEVICE int32_t LastGatherRow(int32_t slot_base, int32_t first_row, int32_t len,
                                      int32_t ring_len) {
  const int32_t r = first_row - slot_base + len - 1;
  return slot_base + (r >= ring_len ? r - ring_len : r);
}

// Staged-path pivots of token j of sequence i ("Pivots"): rows [p0, p0 + p1)
// of section 1 and [p2, p2 + p3) of section 2.
struct Pivots {
  int32_t p0, p1, p2, p3;
};

SWA_HOST_DEVICE Pivots StagedPivots(int32_t seq_index, int32_t q_start, int32_t j,
                                    int32_t valid_start, int32_t window, int32_t sec2_first) {
  const int32_t p = q_start + j;
  const int32_t lo = WindowLo(p, valid_start, window);
  const int32_t start = (lo < q_start ? lo : q_start) - (q_start - window);
  const int32_t k0 = lo > q_start ? lo - q_start : 0;
  Pivots out;
  out.p0 = seq_index * window + start;
  out.p1 = window - start;
  out.p2 = sec2_first + k0;
  out.p3 = j - k0 + 1;
  return out;
}

// Zero rows at the start of a sequence's history section ("Load plan"):
// clamp(valid_start - (q_start - W), 0, W); also covers positions below 0.
SWA_HOST_DEVICE int32_t HistoryPad(int32_t q_start, int32_t valid_start, int32_t window) {
  const int32_t hb = q_start - window;
  int32_t pad = (valid_start > 0 ? valid_start : 0) - hb;
  if (pad < 0) pad = 0;
  if (pad > window) pad = window;
  return pad;
}

// First position a step stores into the ring ("Store plan"):
// max(q_start, seqlen_k - R).
SWA_HOST_DEVICE int32_t FirstStoredPos(int32_t q_start, int32_t seqlen_k, int32_t ring_len) {
  const int32_t a = seqlen_k - ring_len;
  return a > q_start ? a : q_start;
}

}  // namespace swa::plan
