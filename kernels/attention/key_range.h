// Per-sequence key numbering shared by the attention kernels (host+device, so
// that it is unit-tested on the CPU).
//
// Every sequence's keys are numbered k = 0, 1, ... in position order, so that
// each new token sees one contiguous range [begin, end) of them:
//  - ring-only path: key k is position base + k, base = the first new token's
//    oldest visible position (q_start - len_0 + 1); its row is slot*R + (base+k) mod R.
//  - staged path: keys 0..W-1 are section-1 rows seq*W + k (positions
//    q_start - W + k), keys W.. are section-2 rows sec2_first + (k - W).
#pragma once

#include <stdint.h>

#include "common/host_device.h"

namespace swa::kernels {

struct KeyRange {
  int32_t begin;
  int32_t end;  // exclusive
};

// ---- Ring-only path ("Decode index": offset_len[t] = (row of lo, len)) ----

SWA_HOST_DEVICE int32_t RingKeyBase(int32_t q_start, int32_t first_len) {
  return q_start - first_len + 1;
}

// Token j of the sequence, whose offset_len length is `len`.
SWA_HOST_DEVICE KeyRange RingTokenKeys(int32_t q_start, int32_t j, int32_t len, int32_t base) {
  const int32_t p = q_start + j;
  return {p - len + 1 - base, p + 1 - base};
}

SWA_HOST_DEVICE int32_t RingKeyCount(int32_t q_start, int32_t seqlen_q, int32_t base) {
  return q_start + seqlen_q - base;
}

SWA_HOST_DEVICE int64_t RingKeyRow(uint32_t slot, int32_t base, int32_t k, int32_t ring_len) {
  return static_cast<int64_t>(slot) * ring_len + (base + k) % ring_len;
}

// ---- Staged path ("Pivots": (p0, p1) in section 1, (p2, p3) in section 2) ----

SWA_HOST_DEVICE KeyRange StagedTokenKeys(const int32_t* pivot, int32_t seq, int32_t window,
                                         int32_t sec2_first) {
  const int32_t new_begin = window + (pivot[2] - sec2_first);
  const int32_t begin = pivot[1] > 0 ? pivot[0] - seq * window : new_begin;
  return {begin, new_begin + pivot[3]};
}

SWA_HOST_DEVICE int32_t StagedKeyCount(int32_t window, int32_t seqlen_q) {
  return window + seqlen_q;
}

SWA_HOST_DEVICE int64_t StagedKeyRow(int32_t seq, int32_t k, int32_t window, int32_t sec2_first) {
  return k < window ? static_cast<int64_t>(seq) * window + k
                    : static_cast<int64_t>(sec2_first) + (k - window);
}

// ---- Query rows: token-major within one KV head's group of G query heads ----
// Row r of (sequence, kv head g) is token r / G, query head g*G + r % G, so a
// tile of consecutive rows covers consecutive tokens and a narrow key band.

struct QueryRow {
  int32_t token;  // within the sequence
  int32_t head;   // query head
};

SWA_HOST_DEVICE QueryRow QueryRowOf(int32_t r, int32_t group, int32_t kv_head) {
  return {r / group, kv_head * group + r % group};
}

}  // namespace swa::kernels
