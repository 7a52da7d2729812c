// The Cache section: swa_cache_create, _destroy, _layout, _layer_layout,
// _layer_view.
#include <cstring>

#include "capi/config_api.h"
#include "capi/error.h"
#include "capi/handles.h"
#include "capi/layout_api.h"
#include "capi/struct_versions.h"
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
    SWA_CHECK_STRUCT(out);
    swa::capi::WriteStruct(swa::capi::LayoutStruct(cache->impl->layout()), out);
    return absl::OkStatus();
  });
}

SWA_API swa_status_t swa_cache_layer_layout(const swa_cache_t* cache, uint32_t layer,
                                            swa_layer_layout_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_CHECK_STRUCT(out);
    SWA_RETURN_IF_ERROR(swa::capi::CheckLayer(*cache->impl, layer));
    const swa::Layout& lay = cache->impl->layout();
    const swa::LayerLayout& l = lay.layer(layer);
    swa_layer_layout_t v{};
    v.role = static_cast<swa_layer_role_t>(l.role);
    v.kv_format = static_cast<swa_format_t>(l.format);
    v.heads_per_token = l.heads_per_token;
    v.vec_bytes = l.vec_bytes;
    v.bytes_per_token = l.bytes_per_token;
    v.ring_len = lay.ring_len();
    v.ring_offset = l.ring_offset;
    v.ring_bytes = l.ring_bytes;
    v.compress_len = l.compress_len;
    v.compress_entry_bytes = l.compress_entry_bytes;
    v.compress_offset = l.compress_offset;
    v.compress_bytes = l.compress_bytes;
    v.compress_kind = static_cast<swa_compress_kind_t>(l.compress_kind);
    v.compress_ratio = l.compress_ratio;
    v.compress_head_dim = l.compress_head_dim;
    v.index_head_dim = l.index_head_dim;
    v.index_row_bytes = l.index_row_bytes;
    v.compress_row_values = l.compress_row_values;
    v.index_offset = l.index_offset;
    v.index_bytes = l.index_bytes;
    swa::capi::WriteStruct(v, out);
    return absl::OkStatus();
  });
}

SWA_API swa_status_t swa_cache_layer_view(const swa_cache_t* cache, uint32_t layer,
                                          swa_tensor_view_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_CHECK_STRUCT(out);
    SWA_RETURN_IF_ERROR(swa::capi::CheckLayer(*cache->impl, layer));
    swa::Cache& c = *cache->impl;
    const swa::Layout& lay = c.layout();
    const swa::LayerLayout& l = lay.layer(layer);
    swa_tensor_view_t v{};
    v.data = c.pool() + l.ring_offset;
    v.backend = static_cast<swa_backend_t>(c.backend().kind());
    v.device = c.backend().device();
    v.ndim = 4;
    const int64_t shape[4] = {lay.max_slots(), lay.ring_len(), l.heads_per_token, l.vec_bytes};
    const int64_t strides[4] = {static_cast<int64_t>(lay.slot_bytes()), l.bytes_per_token,
                                l.vec_bytes, 1};
    std::memcpy(v.shape, shape, sizeof shape);
    std::memcpy(v.strides, strides, sizeof strides);
    swa::capi::WriteStruct(v, out);
    return absl::OkStatus();
  });
}

}  // extern "C"
