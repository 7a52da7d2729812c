// The "Slot valid_start and bounded replay" section: swa_slot_set_valid_start,
// swa_slot_begin_replay, swa_slot_begin_replay_exact.
#include "capi/error.h"
#include "capi/handles.h"
#include "cache/slot_table.h"
#include "common/status_macros.h"

using swa::capi::Guard;

extern "C" {

SWA_API swa_status_t swa_slot_set_valid_start(swa_cache_t* cache, uint32_t slot,
                                              int32_t valid_start) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    return cache->impl->slots().SetValidStart(slot, valid_start);
  });
}

SWA_API swa_status_t swa_slot_begin_replay(swa_cache_t* cache, uint32_t slot, int32_t hit_len,
                                           int32_t* replay_start, int32_t* replay_len) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_ASSIGN_OR_RETURN(
        swa::ReplayRange r,
        cache->impl->slots().BeginReplay(
            slot, static_cast<int32_t>(cache->impl->layout().window()), hit_len));
    if (replay_start != nullptr) *replay_start = r.start;
    if (replay_len != nullptr) *replay_len = r.len;
    return absl::OkStatus();
  });
}

SWA_API swa_status_t swa_slot_begin_replay_exact(swa_cache_t* cache, uint32_t slot,
                                                 int32_t hit_len, uint32_t sliding_layers,
                                                 int32_t need_last_output, int32_t* replay_start,
                                                 int32_t* replay_len) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    const swa::Layout& layout = cache->impl->layout();
    const uint32_t layers = sliding_layers != 0 ? sliding_layers : layout.num_layers();
    const int32_t span = swa::ExactReplaySpan(layout.window(), layers, need_last_output != 0);
    SWA_ASSIGN_OR_RETURN(swa::ReplayRange r,
                         cache->impl->slots().BeginReplay(slot, span, hit_len));
    if (replay_start != nullptr) *replay_start = r.start;
    if (replay_len != nullptr) *replay_len = r.len;
    return absl::OkStatus();
  });
}

}  // extern "C"
