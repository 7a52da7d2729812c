// swa_slot_set_valid_start, swa_slot_begin_replay (docs/semantics.md, bounded replay).
#include "capi/error.h"
#include "capi/handles.h"
#include "common/status_macros.h"
#include "plan/replay.h"

using swa::capi::Guard;

extern "C" {

SWA_API swa_status_t swa_slot_set_valid_start(swa_cache_t* cache, uint32_t slot,
                                              int32_t valid_start) {
  return Guard([&]() -> absl::Status {
    if (cache == nullptr || cache->impl == nullptr) return swa::capi::NullArg("cache");
    return swa::plan::SetValidStart(cache->impl->slots(), slot, valid_start);
  });
}

SWA_API swa_status_t swa_slot_begin_replay(swa_cache_t* cache, uint32_t slot, int32_t hit_len,
                                           int32_t* replay_start, int32_t* replay_len) {
  return Guard([&]() -> absl::Status {
    if (cache == nullptr || cache->impl == nullptr) return swa::capi::NullArg("cache");
    SWA_ASSIGN_OR_RETURN(
        swa::plan::ReplayRange r,
        swa::plan::BeginReplay(cache->impl->slots(), slot,
                               static_cast<int32_t>(cache->impl->layout().window()), hit_len));
    if (replay_start != nullptr) *replay_start = r.start;
    if (replay_len != nullptr) *replay_len = r.len;
    return absl::OkStatus();
  });
}

}  // extern "C"
