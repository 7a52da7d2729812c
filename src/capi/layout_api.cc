// The Layout section: swa_layout_compute.
#include "capi/layout_api.h"

#include "capi/config_api.h"
#include "capi/error.h"
#include "capi/struct_versions.h"
#include "common/status_macros.h"

namespace swa::capi {

swa_layout_t LayoutStruct(const Layout& l) {
  swa_layout_t v{};
  v.window = l.window();
  v.draft_tokens = l.draft_tokens();
  v.ring_len = l.ring_len();
  v.alignment = l.alignment();
  v.num_layers = l.num_layers();
  v.num_stored_layers = l.num_stored_layers();
  v.max_slots = l.max_slots();
  v.max_ring_tokens = l.max_ring_tokens();
  v.slot_bytes = l.slot_bytes();
  v.stored_offset = 0;
  v.stored_bytes = l.stored_bytes();
  v.pool_bytes = l.pool_bytes();
  v.fingerprint = l.fingerprint();
  v.compress_bytes = l.compress_bytes();
  v.compress_saved_bytes = l.compress_saved_bytes();
  return v;
}

}  // namespace swa::capi

using swa::capi::Guard;

extern "C" {

SWA_API swa_status_t swa_layout_compute(const swa_config_t* config, swa_layout_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_CHECK_STRUCT(out);
    swa::ModelSpec spec;
    swa::CacheOptions options;
    SWA_RETURN_IF_ERROR(swa::capi::ConvertConfig(config, &spec, &options));
    SWA_ASSIGN_OR_RETURN(swa::Layout layout, swa::Layout::Create(spec));
    swa::capi::WriteStruct(swa::capi::LayoutStruct(layout), out);
    return absl::OkStatus();
  });
}

}  // extern "C"
