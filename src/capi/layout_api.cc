// The Layout section: swa_layout_compute.
#include "capi/layout_api.h"

#include <cstring>

#include "capi/config_api.h"
#include "capi/error.h"
#include "common/status_macros.h"

namespace swa::capi {

void FillLayout(const Layout& l, swa_layout_t* out) {
  const size_t size = out->struct_size;
  std::memset(out, 0, sizeof *out);
  out->struct_size = size;
  out->window = l.window();
  out->draft_tokens = l.draft_tokens();
  out->ring_len = l.ring_len();
  out->alignment = l.alignment();
  out->num_layers = l.num_layers();
  out->num_stored_layers = l.num_stored_layers();
  out->max_slots = l.max_slots();
  out->max_ring_tokens = l.max_ring_tokens();
  out->slot_bytes = l.slot_bytes();
  out->stored_offset = 0;
  out->stored_bytes = l.stored_bytes();
  out->pool_bytes = l.pool_bytes();
  out->fingerprint = l.fingerprint();
}

}  // namespace swa::capi

using swa::capi::Guard;

extern "C" {

SWA_API swa_status_t swa_layout_compute(const swa_config_t* config, swa_layout_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_CHECK_STRUCT(out, swa_layout_t);
    swa::ModelSpec spec;
    swa::CacheOptions options;
    SWA_RETURN_IF_ERROR(swa::capi::ConvertConfig(config, &spec, &options));
    SWA_ASSIGN_OR_RETURN(swa::Layout layout, swa::Layout::Create(spec));
    swa::capi::FillLayout(layout, out);
    return absl::OkStatus();
  });
}

}  // extern "C"
