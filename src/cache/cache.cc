#include "cache/cache.h"

#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "store/blob.h"
#include "store/store_adaptor.h"
#include "store/stream_copy.h"

namespace swa {

Cache::Cache(Layout layout, std::unique_ptr<Backend> backend)
    : layout_(std::move(layout)), backend_(std::move(backend)), slots_(layout_.max_slots()) {}

Cache::~Cache() {
  if (owns_pool_) backend_->Free(pool_, layout_.pool_bytes());
}

absl::StatusOr<std::unique_ptr<Cache>> Cache::Create(const ModelSpec& spec,
                                                     const CacheOptions& options) {
  SWA_ASSIGN_OR_RETURN(Layout layout, Layout::Create(spec));
  SWA_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                       MakeBackend(options.backend, options.device, options.num_threads));
  for (uint32_t i = 0; i < layout.num_layers(); ++i)
    if (absl::Status st = backend->Supports(spec.layers[i]); !st.ok())
      return absl::Status(st.code(), absl::StrFormat("layers[%u]: %s", i, st.message()));

  std::unique_ptr<Cache> cache(new Cache(std::move(layout), std::move(backend)));
  const Layout& lay = cache->layout_;
  if (options.pool != nullptr) {
    const auto addr = reinterpret_cast<uintptr_t>(options.pool);
    if (addr % lay.alignment() != 0)
      return absl::InvalidArgumentError(absl::StrFormat(
          "pool = %p is not aligned to alignment = %u bytes", options.pool, lay.alignment()));
    if (options.pool_bytes < lay.pool_bytes())
      return absl::InvalidArgumentError(absl::StrFormat(
          "pool_bytes = %u is smaller than max_slots * slot_bytes = %u * %u = %u",
          options.pool_bytes, lay.max_slots(), lay.slot_bytes(), lay.pool_bytes()));
    cache->pool_ = static_cast<uint8_t*>(options.pool);
  } else {
    SWA_ASSIGN_OR_RETURN(void* pool, cache->backend_->Allocate(lay.pool_bytes(), lay.alignment()));
    cache->pool_ = static_cast<uint8_t*>(pool);
    cache->owns_pool_ = true;
  }
  return cache;
}

absl::Status Cache::CopySlot(uint32_t src, uint32_t dst) {
  absl::MutexLock lock(&slots_.mu());
  SWA_RETURN_IF_ERROR(slots_.CheckAllocatedLocked(src));
  SWA_RETURN_IF_ERROR(slots_.CheckAllocatedLocked(dst));
  if (src == dst) return absl::OkStatus();
  SWA_RETURN_IF_ERROR(backend_->Copy(slot_base(dst), slot_base(src), layout_.slot_bytes()));
  slots_.StateLocked(dst) = slots_.StateLocked(src);
  return absl::OkStatus();
}

// ---- External KV store (docs/semantics.md, "Store blob"; owned by src/store/) ---

void Cache::SetStore(std::shared_ptr<StoreAdaptor> store) {
  std::shared_ptr<StoreAdaptor> old;
  {
    absl::MutexLock lock(&store_mu_);
    old = std::exchange(store_, std::move(store));
  }
  // `old` is released here, outside the lock (its release callback may call us).
}

std::shared_ptr<StoreAdaptor> Cache::store() const {
  absl::MutexLock lock(&store_mu_);
  return store_;
}

absl::StatusOr<std::shared_ptr<StoreAdaptor>> Cache::RequireStore() const {
  std::shared_ptr<StoreAdaptor> s = store();
  if (s == nullptr)
    return absl::FailedPreconditionError(
        "no external KV store is attached to this cache (see swa_cache_set_store)");
  return s;
}

absl::Status Cache::SaveSlot(uint32_t slot, std::string_view key) {
  SWA_RETURN_IF_ERROR(StoreAdaptor::CheckKey(key));
  SWA_ASSIGN_OR_RETURN(std::shared_ptr<StoreAdaptor> store, RequireStore());
  BlobHeader header;
  header.fingerprint = layout_.fingerprint();
  header.payload_bytes = layout_.stored_bytes();
  {
    absl::MutexLock lock(&slots_.mu());
    SWA_RETURN_IF_ERROR(slots_.CheckAllocatedLocked(slot));
    header.written_end = slots_.StateLocked(slot).written_end;
    header.valid_start = slots_.StateLocked(slot).valid_start;
    header.ring_high = slots_.StateLocked(slot).ring_high;
  }
  // The stored region is bytes [0, stored_bytes) of the slot: a host pool is
  // handed to the store in place, a device pool goes through a host copy.
  if (backend_->kind() == BackendKind::kCpu)
    return store->WriteBlob(key, header, slot_base(slot));
  StagingPool::Lease staging = store_staging_.Acquire(header.payload_bytes);
  SWA_RETURN_IF_ERROR(backend_->CopyToHost(staging.data(), slot_base(slot), header.payload_bytes));
  return store->WriteBlob(key, header, staging.data());
}

absl::Status Cache::RestoreSlot(uint32_t slot, std::string_view key) {
  SWA_RETURN_IF_ERROR(StoreAdaptor::CheckKey(key));
  SWA_ASSIGN_OR_RETURN(std::shared_ptr<StoreAdaptor> store, RequireStore());
  {
    absl::MutexLock lock(&slots_.mu());
    SWA_RETURN_IF_ERROR(slots_.CheckAllocatedLocked(slot));  // fail before any store I/O
  }
  const BlobExpectation expect{layout_.fingerprint(), layout_.stored_bytes()};
  StagingPool::Lease staging = store_staging_.Acquire(kBlobHeaderBytes + expect.payload_bytes);
  uint8_t* header = staging.data();
  uint8_t* payload = header + kBlobHeaderBytes;
  // A reused buffer may hold an earlier valid blob: clear its header so that a
  // store that returns OK without writing cannot pass the old blob off.
  std::memset(header, 0, kBlobHeaderBytes);
  SWA_ASSIGN_OR_RETURN(BlobHeader blob, store->ReadBlob(key, expect, header, payload));
  // Verified: only now is the slot touched. The slot lock is held for the copy
  // so that the slot cannot be freed and reused under it.
  absl::MutexLock lock(&slots_.mu());
  SWA_RETURN_IF_ERROR(slots_.CheckAllocatedLocked(slot));
  if (backend_->kind() == BackendKind::kCpu)
    StreamCopy(slot_base(slot), payload, expect.payload_bytes);  // no read-for-ownership
  else
    SWA_RETURN_IF_ERROR(backend_->CopyFromHost(slot_base(slot), payload, expect.payload_bytes));
  SlotState& state = slots_.StateLocked(slot);
  state.written_end = blob.written_end;
  state.valid_start = blob.valid_start;
  state.ring_high = blob.ring_high;  // rejected drafts in the saved rings count too
  return absl::OkStatus();
}

// ---- end of the external KV store block ---------------------------------------

}  // namespace swa
