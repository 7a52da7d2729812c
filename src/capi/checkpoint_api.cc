// Checkpoints (docs/semantics.md, "Checkpoints"): swa_slot_checkpoint_range,
// swa_slot_save_at.
#include <memory>
#include <string_view>

#include "absl/strings/str_format.h"
#include "cache/slot_io.h"
#include "capi/error.h"
#include "capi/handles.h"
#include "common/status_macros.h"
#include "store/blob_store.h"

using swa::capi::Guard;

extern "C" {

SWA_API swa_status_t swa_slot_checkpoint_range(const swa_cache_t* cache, uint32_t slot,
                                               int32_t* lo, int32_t* hi) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_ASSIGN_OR_RETURN(swa::SlotState s, cache->impl->slots().Get(slot));
    if (!s.allocated)
      return absl::FailedPreconditionError(absl::StrFormat("slot %u is not allocated", slot));
    if (s.device_advanced)
      return absl::FailedPreconditionError(absl::StrFormat(
          "slot %u was advanced by a graph decode; its lengths are known after "
          "swa_slot_set_lengths()",
          slot));
    const swa::CheckpointRange r = swa::CheckpointRangeOf(cache->impl->slot_io(), s);
    if (lo != nullptr) *lo = r.lo;
    if (hi != nullptr) *hi = r.hi;
    return absl::OkStatus();
  });
}

SWA_API swa_status_t swa_slot_save_at(swa_cache_t* cache, uint32_t slot, int32_t position,
                                      const uint8_t* key, size_t key_len) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    if (key == nullptr) return swa::capi::NullArg("key");
    const std::string_view k(reinterpret_cast<const char*>(key), key_len);
    SWA_RETURN_IF_ERROR(swa::BlobStore::CheckKey(k));
    SWA_ASSIGN_OR_RETURN(std::shared_ptr<swa::BlobStore> store, cache->impl->store());
    return swa::SaveSlotAt(cache->impl->slot_io(), *store, slot, position, k);
  });
}

}  // extern "C"
