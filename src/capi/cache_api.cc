// The Cache section: swa_cache_create, _destroy, _layout, _layer_layout,
// _layer_view.
#include <cstring>

#include "capi/config_api.h"
#include "capi/error.h"
#include "capi/handles.h"
#include "capi/layout_api.h"
#include "common/status_macros.h"

namespace swa::capi {
namespace {

absl::Status CheckLayer(const Cache& cache, uint32_t layer) {
  if (layer >= cache.layout().num_layers())
    return absl::OutOfRangeError(absl::StrFormat("layer = %u is out of range: the cache has %u layers",
                                                 layer, cache.layout().num_layers()));
  return absl::OkStatus();
}

}  // namespace
}  // namespace swa::capi

using swa::capi::Guard;

extern "C" {

SWA_API swa_status_t swa_cache_create(const swa_config_t* config, swa_cache_t** out) {
  return Guard([&]() -> absl::Status {
    SWA_CHECK_NOT_NULL(out);
    swa::ModelSpec spec;
    swa::CacheOptions options;
    SWA_RETURN_IF_ERROR(swa::capi::ConvertConfig(config, &spec, &options));
    SWA_ASSIGN_OR_RETURN(std::unique_ptr<swa::Cache> impl, swa::Cache::Create(spec, options));
    *out = new swa_cache{std::move(impl)};
    return absl::OkStatus();
  });
}

SWA_API void swa_cache_destroy(swa_cache_t* cache) { delete cache; }

SWA_API swa_status_t swa_cache_layout(const swa_cache_t* cache, swa_layout_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_CHECK_STRUCT(out, swa_layout_t);
    swa::capi::FillLayout(cache->impl->layout(), out);
    return absl::OkStatus();
  });
}

SWA_API swa_status_t swa_cache_layer_layout(const swa_cache_t* cache, uint32_t layer,
                                            swa_layer_layout_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_CHECK_STRUCT(out, swa_layer_layout_t);
    SWA_RETURN_IF_ERROR(swa::capi::CheckLayer(*cache->impl, layer));
    const swa::Layout& lay = cache->impl->layout();
    const swa::LayerLayout& l = lay.layer(layer);
    swa::capi::ResetStruct(out);
    out->role = static_cast<swa_layer_role_t>(l.role);
    out->kv_format = static_cast<swa_format_t>(l.format);
    out->heads_per_token = l.heads_per_token;
    out->vec_bytes = l.vec_bytes;
    out->bytes_per_token = l.bytes_per_token;
    out->ring_len = lay.ring_len();
    out->ring_offset = l.ring_offset;
    out->ring_bytes = l.ring_bytes;
    out->compress_len = l.compress_len;
    out->compress_entry_bytes = l.compress_entry_bytes;
    out->compress_offset = l.compress_offset;
    out->compress_bytes = l.compress_bytes;
    return absl::OkStatus();
  });
}

SWA_API swa_status_t swa_cache_layer_view(const swa_cache_t* cache, uint32_t layer,
                                          swa_tensor_view_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_CHECK_STRUCT(out, swa_tensor_view_t);
    SWA_RETURN_IF_ERROR(swa::capi::CheckLayer(*cache->impl, layer));
    swa::Cache& c = *cache->impl;
    const swa::Layout& lay = c.layout();
    const swa::LayerLayout& l = lay.layer(layer);
    swa::capi::ResetStruct(out);
    out->data = c.pool() + l.ring_offset;
    out->backend = static_cast<swa_backend_t>(c.backend().kind());
    out->device = c.backend().device();
    out->ndim = 4;
    const int64_t shape[4] = {lay.max_slots(), lay.ring_len(), l.heads_per_token, l.vec_bytes};
    const int64_t strides[4] = {static_cast<int64_t>(lay.slot_bytes()), l.bytes_per_token,
                                l.vec_bytes, 1};
    std::memcpy(out->shape, shape, sizeof shape);
    std::memcpy(out->strides, strides, sizeof strides);
    return absl::OkStatus();
  });
}

}  // extern "C"
