#include "cache/slot_io.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_format.h"
#include "common/compress_math.h"
#include "common/rewind_rule.h"
#include "common/status_macros.h"
#include "store/blob.h"
#include "store/stream_copy.h"

namespace swa {

namespace {

// The compression section's pieces: (offset in the slot, bytes), the typed
// compressor rings of the stored layers in layer order, main then indexer.
struct Piece {
  uint64_t offset;
  uint64_t bytes;
};

std::vector<Piece> CompressionPieces(const Layout& layout) {
  std::vector<Piece> pieces;
  for (uint32_t i = 0; i < layout.num_layers(); ++i) {
    const LayerLayout& l = layout.layer(i);
    if (!l.typed_compressor() || l.role != Role::kStored) continue;
    pieces.push_back({l.compress_offset, uint64_t{l.compress_len} * l.compress_entry_bytes});
    if (l.index_row_bytes != 0)
      pieces.push_back({l.index_offset, uint64_t{l.compress_len} * l.index_row_bytes});
  }
  return pieces;
}

// Copies between a slot and a host payload of stored bytes + section.
absl::Status GatherPayload(const SlotIo& io, uint32_t slot, uint8_t* dst) {
  const uint8_t* base = io.slot_base(slot);
  const uint64_t stored = io.layout->stored_bytes();
  const bool host = io.backend->HostAddressable();
  auto copy = [&](uint8_t* d, const uint8_t* s, uint64_t n) -> absl::Status {
    if (host) {
      std::memcpy(d, s, n);
      return absl::OkStatus();
    }
    return io.backend->CopyToHost(d, s, n);
  };
  SWA_RETURN_IF_ERROR(copy(dst, base, stored));
  uint64_t at = stored;
  for (const Piece& p : CompressionPieces(*io.layout)) {
    SWA_RETURN_IF_ERROR(copy(dst + at, base + p.offset, p.bytes));
    at += p.bytes;
  }
  return absl::OkStatus();
}

absl::Status ScatterPayload(const SlotIo& io, uint32_t slot, const uint8_t* src) {
  uint8_t* base = io.slot_base(slot);
  const uint64_t stored = io.layout->stored_bytes();
  const bool host = io.backend->HostAddressable();
  auto copy = [&](uint8_t* d, const uint8_t* s, uint64_t n) -> absl::Status {
    if (host) {
      StreamCopy(d, s, n);
      return absl::OkStatus();
    }
    return io.backend->CopyFromHost(d, s, n);
  };
  SWA_RETURN_IF_ERROR(copy(base, src, stored));
  uint64_t at = stored;
  for (const Piece& p : CompressionPieces(*io.layout)) {
    SWA_RETURN_IF_ERROR(copy(base + p.offset, src + at, p.bytes));
    at += p.bytes;
  }
  return absl::OkStatus();
}

// The checkpoint range of `state` with the typed compressor rings (every
// layer's: swa_plan_build checks the rewind rule of each of them, saved in
// the compression section or not, on the restored slot as on this one): lo
// raised until every ring holds the window open at each c >= lo
// (common/compress_math.h, CompressRewindOk). *limit: the layer whose ring
// raised lo above the SWA ring's bound, -1 for none.
CheckpointRange RangeWithCompressors(const Layout& layout, const SlotState& state,
                                     int64_t* limit) {
  CheckpointRange r = CheckpointRangeOf(state, layout.window(), layout.ring_len());
  *limit = -1;
  const int64_t high = plan::RingContentEnd(state.written_end, state.ring_high);
  const int64_t floor = std::max<int64_t>(0, state.valid_start);
  int64_t lo = r.lo;
  for (uint32_t i = 0; i < layout.num_layers(); ++i) {
    const LayerLayout& l = layout.layer(i);
    if (!l.typed_compressor()) continue;
    const CompressGeometry g = l.compress_geometry();
    // HCA at rate 1: the window open at c is c alone, no ring row is read.
    if (g.kind == CompressKind::kHca && g.rate == 1) continue;
    // Every c passes while the ring holds max(0, v); otherwise c needs the
    // first position of its open window, entry floor(c / rate), >= high - L.
    const int64_t need = high - g.ring_len;
    if (floor >= need) continue;
    const int64_t rate = g.rate;
    int64_t entry = (need + rate - 1) / rate;  // need > 0: the first entry starting at >= need
    if (g.kind == CompressKind::kCsa) ++entry;  // a CSA window starts one stride earlier
    int64_t lo_i = entry * rate;
    if (floor == lo_i - 1) lo_i = floor;  // c = max(0, v) reads no ring row
    if (lo_i > lo) {
      lo = lo_i;
      *limit = i;
    }
  }
  // lo > hi (nothing saveable) stays so; positions are int32.
  r.lo = static_cast<int32_t>(std::min<int64_t>(lo, std::numeric_limits<int32_t>::max()));
  return r;
}

// nullopt: save the slot as it is; a value: a checkpoint at that position.
absl::Status SaveSlotImpl(const SlotIo& io, BlobStore& store, uint32_t slot,
                          std::optional<int32_t> position, std::string_view key) {
  SWA_RETURN_IF_ERROR(BlobStore::CheckKey(key));
  BlobHeader header;
  header.fingerprint = io.layout->fingerprint();
  header.payload_bytes = io.layout->stored_bytes();
  if (io.compression) {
    header.version = kBlobCompressionVersion;
    header.flags = kBlobFlagCompression;
    header.payload_bytes += io.layout->compress_saved_bytes();
  }
  // Busy from here: the slot cannot be freed, reset or written by a restore
  // while its bytes are read.
  SWA_ASSIGN_OR_RETURN(SlotState state, io.slots->BeginRead(slot));
  absl::Cleanup end_read = [&] { io.slots->EndRead(slot); };
  header.written_end = state.written_end;
  header.valid_start = state.valid_start;
  header.ring_high = state.ring_high;
  if (position.has_value()) {
    // Exactly the range swa_slot_checkpoint_range() reports.
    int64_t limit = -1;
    const CheckpointRange range = RangeWithCompressors(*io.layout, state, &limit);
    if (*position < range.lo || *position > range.hi) {
      if (range.lo > range.hi)
        return absl::OutOfRangeError(absl::StrFormat(
            "checkpoint position %d of slot %u: the slot has no checkpoint position now "
            "(written_end = %d, valid_start = %d, reachable range %d ... %d)",
            *position, slot, state.written_end, state.valid_start, range.lo, range.hi));
      if (limit >= 0 && *position < range.lo) {
        const LayerLayout& l = io.layout->layer(static_cast<uint32_t>(limit));
        const int32_t high = plan::RingContentEnd(state.written_end, state.ring_high);
        return absl::OutOfRangeError(absl::StrFormat(
            "checkpoint position %d of slot %u is outside the reachable range %d ... %d: the "
            "compressor ring of layer %d (%u rows, rate %u) holds positions >= %d only "
            "(highest written %d), and the window open at each c >= %d starts there or later",
            *position, slot, range.lo, range.hi, limit, l.compress_len, l.compress_ratio,
            high - static_cast<int32_t>(l.compress_len), high, range.lo));
      }
      return absl::OutOfRangeError(absl::StrFormat(
          "checkpoint position %d of slot %u is outside the reachable range %d ... %d "
          "(written_end = %d, valid_start = %d, ring_high = %d, W = %u, R = %u: the ring must "
          "still hold positions c - W + 1 ... c - 1)",
          *position, slot, range.lo, range.hi, state.written_end, state.valid_start,
          state.ring_high, io.layout->window(), io.layout->ring_len()));
    }
    // Positions position ... written_end - 1 stay in the rings like rejected
    // drafts: ring_high keeps them from being counted on after a restore.
    header.ring_high = std::max(state.written_end, state.ring_high);
    header.written_end = *position;
  }
  // The stored region is bytes [0, stored_bytes) of the slot.
  if (io.compression) {  // stored bytes and the section, gathered into one payload
    StagingPool::Lease staging = io.staging->Acquire(header.payload_bytes);
    SWA_RETURN_IF_ERROR(GatherPayload(io, slot, staging.data()));
    std::move(end_read).Invoke();
    return store.WriteBlob(key, header, staging.data());
  }
  if (io.backend->HostAddressable()) return store.WriteBlob(key, header, io.slot_base(slot));
  StagingPool::Lease staging = io.staging->Acquire(header.payload_bytes);
  SWA_RETURN_IF_ERROR(
      io.backend->CopyToHost(staging.data(), io.slot_base(slot), header.payload_bytes));
  std::move(end_read).Invoke();  // the put reads the staging copy, not the slot
  return store.WriteBlob(key, header, staging.data());
}

}  // namespace

CheckpointRange CheckpointRangeOf(const SlotState& state, uint32_t window, uint32_t ring_len) {
  // The rewind rule (common/rewind_rule.h) for a step at q_start = c:
  // max(0, v, c - W + 1) >= high - R. While the ring still holds position
  // max(0, v), every c >= v passes; otherwise c - W + 1 >= high - R decides.
  const int64_t high = plan::RingContentEnd(state.written_end, state.ring_high);
  const int64_t floor = std::max<int64_t>(0, state.valid_start);
  const int64_t lo = high - int64_t{ring_len} <= floor
                         ? floor
                         : high - int64_t{ring_len} + int64_t{window} - 1;
  CheckpointRange r;
  r.lo = static_cast<int32_t>(lo);  // <= max(valid_start, high): fits
  r.hi = state.written_end;
  return r;
}

CheckpointRange CheckpointRangeOf(const SlotIo& io, const SlotState& state) {
  int64_t limit = -1;
  return RangeWithCompressors(*io.layout, state, &limit);
}

absl::Status SaveSlot(const SlotIo& io, BlobStore& store, uint32_t slot, std::string_view key) {
  return SaveSlotImpl(io, store, slot, std::nullopt, key);
}

absl::Status SaveSlotAt(const SlotIo& io, BlobStore& store, uint32_t slot, int32_t position,
                        std::string_view key) {
  return SaveSlotImpl(io, store, slot, position, key);
}

absl::Status RestoreSlot(const SlotIo& io, BlobStore& store, uint32_t slot, std::string_view key) {
  SWA_RETURN_IF_ERROR(BlobStore::CheckKey(key));
  // Fails before any store I/O; the generation tells, after the get, whether
  // the slot still belongs to the caller.
  SWA_ASSIGN_OR_RETURN(const uint32_t generation, io.slots->Generation(slot));
  BlobExpectation expect{io.layout->fingerprint(), io.layout->stored_bytes()};
  if (io.compression) {
    expect.payload_bytes += io.layout->compress_saved_bytes();
    expect.compression = true;
  }
  StagingPool::Lease staging = io.staging->Acquire(store.BlobBytes(expect.payload_bytes));
  uint8_t* header = staging.data();
  uint8_t* payload = header + kBlobHeaderBytes;
  uint8_t* tag = store.tagged() ? payload + expect.payload_bytes : nullptr;
  // A reused buffer may hold an earlier valid blob: clear its header so that a
  // store that returns OK without writing cannot pass the old blob off.
  std::memset(header, 0, kBlobHeaderBytes);
  SWA_ASSIGN_OR_RETURN(BlobHeader blob, store.ReadBlob(key, expect, header, payload, tag));

  // Verified (and authenticated when the store has a secret): only now is the
  // slot touched, marked busy and outside the lock.
  SWA_RETURN_IF_ERROR(io.slots->BeginWrite(slot, generation));
  absl::Status copied;
  if (io.compression)
    copied = ScatterPayload(io, slot, payload);
  else if (io.backend->HostAddressable())
    StreamCopy(io.slot_base(slot), payload, expect.payload_bytes);  // no read-for-ownership
  else
    copied = io.backend->CopyFromHost(io.slot_base(slot), payload, expect.payload_bytes);
  SlotState restored;
  restored.written_end = blob.written_end;
  restored.valid_start = blob.valid_start;
  restored.ring_high = blob.ring_high;  // rejected drafts in the saved rings count too
  io.slots->EndWrite(slot, copied.ok() ? &restored : nullptr);
  return copied;
}

}  // namespace swa
