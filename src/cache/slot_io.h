// Save and restore of one slot's stored region (docs/semantics.md, "Store blob"): the blob
// header from the slot's metadata, the payload from or into the pool. The
// slot table's lock is held only to check and mark the slot, never during a
// store call or a payload copy; the slot is marked busy meanwhile.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "backend/backend.h"
#include "cache/slot_table.h"
#include "layout/layout.h"
#include "store/blob_store.h"
#include "cache/staging_pool.h"

namespace swa {

// What save and restore need of a cache; every pointer is borrowed.
struct SlotIo {
  const Layout* layout = nullptr;
  SlotTable* slots = nullptr;
  Backend* backend = nullptr;
  uint8_t* pool = nullptr;  // the slot pool (backend memory)
  StagingPool* staging = nullptr;
  // Blobs carry the compression section (the typed compressor rings of the
  // stored layers after the stored region; docs/store.md, "Compression
  // section"): swa_cache_set_save_compression, and the layout has such rings.
  bool compression = false;

  uint8_t* slot_base(uint32_t slot) const { return pool + layout->SlotOffset(slot); }
};

// Persists the slot's stored region under `key`. A host pool is handed to the
// store in place; a device pool goes through a staging copy.
absl::Status SaveSlot(const SlotIo& io, BlobStore& store, uint32_t slot, std::string_view key);

// The checkpoint positions of a slot in `state` (docs/semantics.md,
// "Checkpoints"): with high = max(written_end, ring_high), lo = max(0,
// valid_start) while high - R <= that, else high - (R - W + 1); hi =
// written_end; lo > hi when nothing can be saved. Exactly the c for which a
// step at q_start = c passes the rewind rule.
struct CheckpointRange {
  int32_t lo = 0;
  int32_t hi = 0;
};
CheckpointRange CheckpointRangeOf(const SlotState& state, uint32_t window, uint32_t ring_len);

// The range swa_slot_checkpoint_range() reports for `io`'s cache: the one
// above, with lo raised until every typed compressor ring (every layer's,
// whether the compression section is saved or not: swa_plan_build applies
// their rewind rule to the restored slot too) holds the window open at each
// c >= lo (common/compress_math.h, CompressRewindOk). SaveSlotAt accepts
// exactly the c in lo ... hi.
CheckpointRange CheckpointRangeOf(const SlotIo& io, const SlotState& state);

// SaveSlot of the slot as it stood at `position` (a checkpoint): the blob
// records written_end = position and ring_high = max(written_end, ring_high).
// OUT_OF_RANGE naming the reachable range when `position` is outside it;
// nothing is written then.
absl::Status SaveSlotAt(const SlotIo& io, BlobStore& store, uint32_t slot, int32_t position,
                        std::string_view key);

// Reads and verifies the blob (also that it was saved under `key`: BlobStore
// binds blobs to their keys), then overwrites the stored region and
// written_end / valid_start / ring_high. Any failure — also a slot freed (and
// perhaps allocated again) while the store was read — leaves the slot
// byte-for-byte unchanged.
absl::Status RestoreSlot(const SlotIo& io, BlobStore& store, uint32_t slot, std::string_view key);

}  // namespace swa
