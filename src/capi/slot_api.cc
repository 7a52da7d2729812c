// The Slots section: swa_slot_alloc, _free, _reset, _copy, _info.
#include <cstring>

#include "capi/error.h"
#include "capi/handles.h"
#include "capi/struct_versions.h"
#include "common/status_macros.h"

using swa::capi::Guard;

extern "C" {

SWA_API swa_status_t swa_slot_alloc(swa_cache_t* cache, uint32_t* slot) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_CHECK_NOT_NULL(slot);
    SWA_ASSIGN_OR_RETURN(*slot, cache->impl->slots().Alloc());
    return absl::OkStatus();
  });
}

SWA_API swa_status_t swa_slot_free(swa_cache_t* cache, uint32_t slot) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    return cache->impl->slots().Free(slot);
  });
}

SWA_API swa_status_t swa_slot_reset(swa_cache_t* cache, uint32_t slot) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    return cache->impl->slots().Reset(slot);
  });
}

SWA_API swa_status_t swa_slot_copy(swa_cache_t* cache, uint32_t src, uint32_t dst) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    return cache->impl->CopySlot(src, dst);
  });
}

SWA_API swa_status_t swa_slot_info(const swa_cache_t* cache, uint32_t slot, swa_slot_info_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_CHECK_STRUCT(out);
    SWA_ASSIGN_OR_RETURN(swa::SlotState s, cache->impl->slots().Get(slot));
    swa_slot_info_t v{};
    v.slot = slot;
    v.allocated = s.allocated ? 1 : 0;
    v.written_end = s.written_end;
    v.valid_start = s.valid_start;
    v.byte_offset = cache->impl->layout().SlotOffset(slot);
    swa::capi::WriteStruct(v, out);
    return absl::OkStatus();
  });
}

}  // extern "C"
