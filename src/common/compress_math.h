// The compressor ring's arithmetic (docs/semantics.md, "Compression state"):
// which windows close in a step, which slots of a window come from the ring,
// from the step's new rows or from nowhere, and how deep a rewind the ring
// allows. Plain integer code, host and device, shared by the host planner
// (plan/compress_plan.cc) and any compressor kernel.
#pragma once

#include <stdint.h>

#include "common/host_device.h"

namespace swa {

// Values equal swa_compress_kind_t.
enum class CompressKind : uint32_t { kOpaque = 0, kHca = 1, kCsa = 2 };

// One typed compressor ring's geometry: rate c, ring rows L, window slots S.
struct CompressGeometry {
  CompressKind kind;
  int32_t rate;      // c >= 1
  int32_t ring_len;  // L: c + N (HCA), 2c + N (CSA)
};

// A typed compressor ring of a cache's layout and the first layer that has
// this geometry (for messages).
struct CompressRing {
  CompressGeometry geometry;
  uint32_t layer;
};

// One closing window (== swa_compress_window_t, field for field).
struct CompressWindow {
  uint32_t seq;
  uint32_t slot;
  int32_t entry;
  int32_t position;
  int32_t first_position;
  int32_t n_missing;
  int32_t n_ring;
  int32_t ring_row;
  int32_t n_new;
  int32_t new_row;
};
static_assert(sizeof(CompressWindow) == 40);

// Slots of one window: c (HCA), 2c (CSA: window w-1's Ca, then window w's Cb).
SWA_HOST_DEVICE int32_t CompressWindowSlots(CompressGeometry g) {
  return g.kind == CompressKind::kCsa ? 2 * g.rate : g.rate;
}

// Ring rows of a typed compressor: the rows of the window the step's first
// token may reopen (HCA: c - 1 of them at most; CSA: the previous window too),
// plus N for the drafts of a step, plus one, as the SWA ring's W + N + 1.
SWA_HOST_DEVICE int64_t CompressRingLen(CompressKind kind, int64_t rate, int64_t draft_tokens) {
  return (kind == CompressKind::kCsa ? 2 * rate : rate) + draft_tokens;
}

SWA_HOST_DEVICE int32_t FloorDiv(int32_t a, int32_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// First source position of entry w's window: w c (HCA), (w - 1) c (CSA).
SWA_HOST_DEVICE int32_t CompressWindowFirst(CompressGeometry g, int32_t entry) {
  return (g.kind == CompressKind::kCsa ? entry - 1 : entry) * g.rate;
}

// The oldest source position a step starting at q_start reads from the ring:
// the first slot of the first window that can close at or after q_start
// (entry floor(q_start / c)), but not below valid_start or 0. Rows in
// [that, q_start) come from the ring; none when it is >= q_start.
SWA_HOST_DEVICE int32_t CompressOldestNeeded(CompressGeometry g, int32_t q_start,
                                             int32_t valid_start) {
  int32_t lo = CompressWindowFirst(g, q_start / g.rate);
  if (lo < valid_start) lo = valid_start;
  if (lo < 0) lo = 0;
  return lo;
}

// The compressor ring's rewind rule, next to the SWA ring's (common/rewind_rule.h):
// every row the step reads from the ring, [oldest, q_start), must still be
// there: oldest >= high - L, high = max(written_end, ring_high) before the step.
SWA_HOST_DEVICE bool CompressRewindOk(CompressGeometry g, int32_t q_start, int32_t valid_start,
                                      int32_t high) {
  const int32_t oldest = CompressOldestNeeded(g, q_start, valid_start);
  if (oldest >= q_start) return true;
  return static_cast<int64_t>(oldest) >= static_cast<int64_t>(high) - g.ring_len;
}

// Entries that close in a step of one sequence: windows whose last source
// position lies in [q_start, seqlen_k), i.e. entries first .. first + count - 1.
struct ClosingEntries {
  int32_t first;
  int32_t count;
};

SWA_HOST_DEVICE ClosingEntries CompressClosing(CompressGeometry g, int32_t q_start,
                                               int32_t seqlen_k) {
  // Window w closes at position (w + 1) c - 1: q_start <= (w + 1) c - 1 < seqlen_k.
  ClosingEntries e;
  e.first = q_start / g.rate;       // smallest w with (w + 1) c > q_start
  const int32_t end = seqlen_k / g.rate;  // w < seqlen_k / c
  e.count = end > e.first ? end - e.first : 0;
  return e;
}

// The split of one closing window's S slots (swa_compress_window_t).
struct WindowSplit {
  int32_t first_position;
  int32_t n_missing;
  int32_t n_ring;
  int32_t ring_row;  // slot-relative ring row of the first ring slot
  int32_t n_new;
  int32_t new_row;   // batch row of the first new slot
};

// Entry `entry` of a sequence whose step starts at q_start with
// `token_offset` new rows before it in the batch and effective valid_start.
SWA_HOST_DEVICE WindowSplit CompressSplit(CompressGeometry g, int32_t entry, int32_t q_start,
                                          int32_t valid_start, int32_t token_offset) {
  WindowSplit s;
  const int32_t slots = CompressWindowSlots(g);
  const int32_t a = CompressWindowFirst(g, entry);
  const int32_t end = a + slots;
  int32_t lo = valid_start > 0 ? valid_start : 0;  // first position with a row
  if (lo < a) lo = a;
  if (lo > end) lo = end;
  s.first_position = a;
  s.n_missing = lo - a;
  const int32_t ring_end = q_start < end ? (q_start > lo ? q_start : lo) : end;
  s.n_ring = ring_end - lo;
  s.ring_row = s.n_ring > 0 ? lo % g.ring_len : 0;
  s.n_new = end - ring_end;
  s.new_row = s.n_new > 0 ? token_offset + (ring_end - q_start) : 0;
  return s;
}

}  // namespace swa
