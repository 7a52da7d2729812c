#include "cache/slot_io.h"

#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "common/status_macros.h"
#include "store/blob.h"
#include "store/stream_copy.h"

namespace swa {

absl::Status SaveSlot(const SlotIo& io, BlobStore& store, uint32_t slot, std::string_view key) {
  SWA_RETURN_IF_ERROR(BlobStore::CheckKey(key));
  BlobHeader header;
  header.fingerprint = io.layout->fingerprint();
  header.payload_bytes = io.layout->stored_bytes();
  // Busy from here: the slot cannot be freed, reset or written by a restore
  // while its bytes are read.
  SWA_ASSIGN_OR_RETURN(SlotState state, io.slots->BeginRead(slot));
  absl::Cleanup end_read = [&] { io.slots->EndRead(slot); };
  header.written_end = state.written_end;
  header.valid_start = state.valid_start;
  header.ring_high = state.ring_high;
  // The stored region is bytes [0, stored_bytes) of the slot.
  if (io.backend->HostAddressable()) return store.WriteBlob(key, header, io.slot_base(slot));
  StagingPool::Lease staging = io.staging->Acquire(header.payload_bytes);
  SWA_RETURN_IF_ERROR(
      io.backend->CopyToHost(staging.data(), io.slot_base(slot), header.payload_bytes));
  std::move(end_read).Invoke();  // the put reads the staging copy, not the slot
  return store.WriteBlob(key, header, staging.data());
}

absl::Status RestoreSlot(const SlotIo& io, BlobStore& store, uint32_t slot, std::string_view key) {
  SWA_RETURN_IF_ERROR(BlobStore::CheckKey(key));
  // Fails before any store I/O; the generation tells, after the get, whether
  // the slot still belongs to the caller.
  SWA_ASSIGN_OR_RETURN(const uint32_t generation, io.slots->Generation(slot));
  const BlobExpectation expect{io.layout->fingerprint(), io.layout->stored_bytes()};
  StagingPool::Lease staging = io.staging->Acquire(kBlobHeaderBytes + expect.payload_bytes);
  uint8_t* header = staging.data();
  uint8_t* payload = header + kBlobHeaderBytes;
  // A reused buffer may hold an earlier valid blob: clear its header so that a
  // store that returns OK without writing cannot pass the old blob off.
  std::memset(header, 0, kBlobHeaderBytes);
  SWA_ASSIGN_OR_RETURN(BlobHeader blob, store.ReadBlob(key, expect, header, payload));

  // Verified: only now is the slot touched, marked busy and outside the lock.
  SWA_RETURN_IF_ERROR(io.slots->BeginWrite(slot, generation));
  absl::Status copied;
  if (io.backend->HostAddressable())
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
