// Where vector i of a batch lives in a ring (docs/semantics.md, "Slot layout"), host+device.
// Row r = slot * R + (p mod R) sits at (r / R) * slot_bytes + (r mod R) *
// row_bytes; a token's heads follow each other every vec_bytes.
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace swa::codec {

struct RowAddress {
  const int32_t* rows = nullptr;  // ring row per token; nullptr: token t is row t
  int32_t vecs_per_row = 1;       // vectors (heads) per token
  int32_t ring_len = 1;           // R (only with rows)
  int64_t slot_bytes = 0;         // only with rows
  int64_t row_bytes = 0;          // bytes per token
  int64_t vec_bytes = 0;          // bytes per vector
};

// Byte offset of vector i, or -1 when its row entry is negative (padding).
SWA_HOST_DEVICE int64_t VectorOffset(const RowAddress& a, int64_t i) {
  const int64_t token = i / a.vecs_per_row;
  const int64_t head = i - token * a.vecs_per_row;
  if (a.rows == nullptr) return token * a.row_bytes + head * a.vec_bytes;
  const int64_t r = a.rows[token];
  if (r < 0) return -1;
  return (r / a.ring_len) * a.slot_bytes + (r % a.ring_len) * a.row_bytes + head * a.vec_bytes;
}

}  // namespace swa::codec
