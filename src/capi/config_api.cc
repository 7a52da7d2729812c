// The Configuration section: swa_layer_desc_init, swa_config_init, and the
// conversion of a swa_config_t that swa_layout_compute and swa_cache_create share.
#include "capi/config_api.h"

#include <cstddef>
#include <cstring>
#include <string_view>
#include <vector>

#include "capi/enums.h"
#include "capi/error.h"
#include "capi/struct_versions.h"
#include "store/blob_auth.h"
#include "common/status_macros.h"

namespace swa::capi {
namespace {

static_assert(SWA_BACKEND_CPU == static_cast<int>(BackendKind::kCpu) &&
              SWA_BACKEND_CUDA == static_cast<int>(BackendKind::kCuda));

absl::Status ConvertRope(const swa_layer_desc_t& d, uint32_t i, RopeSpec* r) {
  SWA_ASSIGN_OR_RETURN(r->style,
                       ConvertRopeStyle(d.rope_style, absl::StrFormat("layers[%u].rope_style", i)));
  if (d.rope_yarn_truncate > 1 || d.rope_derotate_output > 1)
    return absl::InvalidArgumentError(absl::StrFormat(
        "layers[%u]: rope_yarn_truncate = %u and rope_derotate_output = %u must be 0 or 1", i,
        d.rope_yarn_truncate, d.rope_derotate_output));
  r->first_dim = d.rope_first_dim;
  r->dims = d.rope_dims;
  r->theta = d.rope_theta;
  r->yarn_factor = d.rope_yarn_factor;
  r->yarn_original_max_positions = d.rope_yarn_original_max_positions;
  r->yarn_beta_fast = d.rope_yarn_beta_fast;
  r->yarn_beta_slow = d.rope_yarn_beta_slow;
  r->yarn_truncate = d.rope_yarn_truncate != 0;
  r->attention_factor = d.rope_attention_factor;
  r->derotate_output = d.rope_derotate_output != 0;
  return absl::OkStatus();
}

absl::Status ConvertLayer(const swa_layer_desc_t& d, uint32_t i, LayerSpec* out) {
  SWA_ASSIGN_OR_RETURN(out->role, ConvertRole(d.role, absl::StrFormat("layers[%u].role", i)));
  SWA_ASSIGN_OR_RETURN(out->format,
                       ConvertFormat(d.kv_format, absl::StrFormat("layers[%u].kv_format", i)));
  if (d.shared_kv > 1 || d.has_sinks > 1)
    return absl::InvalidArgumentError(absl::StrFormat(
        "layers[%u]: shared_kv = %u and has_sinks = %u must be 0 or 1", i, d.shared_kv,
        d.has_sinks));
  out->q_heads = d.q_heads;
  out->kv_heads = d.kv_heads;
  out->head_dim = d.head_dim;
  out->shared_kv = d.shared_kv != 0;
  out->compress_ratio = d.compress_ratio;
  out->compress_entry_bytes = d.compress_entry_bytes;
  out->has_sinks = d.has_sinks != 0;
  out->logit_softcap = d.logit_softcap;
  out->softmax_scale = d.softmax_scale;
  if (d.reserved != 0)
    return absl::InvalidArgumentError(
        absl::StrFormat("layers[%u].reserved = %u must be 0", i, d.reserved));
  SWA_ASSIGN_OR_RETURN(out->compress_kind,
                       ConvertCompressKind(d.compress_kind,
                                           absl::StrFormat("layers[%u].compress_kind", i)));
  SWA_ASSIGN_OR_RETURN(out->compress_row_format,
                       ConvertFormat(d.compress_row_format,
                                     absl::StrFormat("layers[%u].compress_row_format", i)));
  out->compress_head_dim = d.compress_head_dim;
  out->compress_rope_dims = d.compress_rope_dims;
  out->index_head_dim = d.index_head_dim;
  if (d.compress_reserved != 0)
    return absl::InvalidArgumentError(absl::StrFormat(
        "layers[%u].compress_reserved = %u must be 0", i, d.compress_reserved));
  SWA_RETURN_IF_ERROR(ConvertRope(d, i, &out->rope));
  return absl::OkStatus();
}

}  // namespace

absl::Status ConvertConfig(const swa_config_t* config, ModelSpec* spec, CacheOptions* options) {
  SWA_ASSIGN_OR_RETURN(const swa_config_t c, ReadStruct(config, "config"));
  if (c.num_layers == 0)
    return absl::InvalidArgumentError("num_layers = 0: a cache needs at least one layer");
  if (c.num_layers > kMaxLayers)
    return absl::InvalidArgumentError(
        absl::StrFormat("num_layers = %u exceeds %u", c.num_layers, kMaxLayers));
  if (c.layers == nullptr)
    return absl::InvalidArgumentError(
        absl::StrFormat("layers is NULL but num_layers = %u", c.num_layers));
  SWA_ASSIGN_OR_RETURN(spec->scale_mode, ConvertScaleMode(c.scale_mode, "scale_mode"));
  SWA_ASSIGN_OR_RETURN(const swa_backend_t backend, CheckBackend(c.backend, "backend"));
  if (c.device < 0)
    return absl::InvalidArgumentError(absl::StrFormat("device = %d is negative", c.device));
  if ((c.pool == nullptr) != (c.pool_bytes == 0))
    return absl::InvalidArgumentError(absl::StrFormat(
        "pool = %p with pool_bytes = %u: give both or neither", c.pool, c.pool_bytes));

  SWA_ASSIGN_OR_RETURN(const std::vector<swa_layer_desc_t> layers,
                       ReadStructArray(c.layers, c.num_layers, "layers"));
  spec->layers.resize(c.num_layers);
  for (uint32_t i = 0; i < c.num_layers; ++i)
    SWA_RETURN_IF_ERROR(ConvertLayer(layers[i], i, &spec->layers[i]));
  spec->window = c.window;
  spec->draft_tokens = c.draft_tokens;
  spec->ring_len = c.ring_len;
  spec->alignment = c.alignment;
  spec->max_slots = c.max_slots;

  // AUTO picks CUDA only in a CUDA build on a machine with a device.
  options->backend = backend == SWA_BACKEND_CUDA ? BackendKind::kCuda : BackendKind::kCpu;
  if (backend == SWA_BACKEND_AUTO && CudaDeviceAvailable()) options->backend = BackendKind::kCuda;
  options->device = c.device;
  options->num_threads = c.num_threads;
  options->pool = c.pool;
  options->pool_bytes = c.pool_bytes;

  // Authenticated blobs and tenant namespace (docs/store.md, "Threat model").
  if ((c.store_secret == nullptr) != (c.store_secret_len == 0))
    return absl::InvalidArgumentError(absl::StrFormat(
        "store_secret = %p with store_secret_len = %u: give both or neither", c.store_secret,
        c.store_secret_len));
  if (c.store_secret != nullptr) {
    SWA_ASSIGN_OR_RETURN(options->store_security.secret,
                         BlobSecret::Create(absl::MakeConstSpan(c.store_secret, c.store_secret_len),
                                            "store_secret"));
  }
  if ((c.store_namespace == nullptr) != (c.store_namespace_len == 0))
    return absl::InvalidArgumentError(absl::StrFormat(
        "store_namespace = %p with store_namespace_len = %u: give both or neither",
        c.store_namespace, c.store_namespace_len));
  if (c.store_namespace != nullptr) {
    const std::string_view ns(reinterpret_cast<const char*>(c.store_namespace),
                              c.store_namespace_len);
    SWA_RETURN_IF_ERROR(CheckStoreNamespace(ns, "store_namespace"));
    options->store_security.name_space.assign(ns.data(), ns.size());
  }
  return absl::OkStatus();
}

}  // namespace swa::capi

extern "C" {

SWA_API void swa_layer_desc_init(swa_layer_desc_t* desc) {
  if (desc == nullptr) return;
  swa::capi::InitStruct(desc);
  const swa::LayerSpec d;
  desc->role = SWA_LAYER_STORED;
  desc->q_heads = d.q_heads;
  desc->kv_heads = d.kv_heads;
  desc->head_dim = d.head_dim;
  desc->shared_kv = d.shared_kv ? 1 : 0;
  desc->kv_format = SWA_FORMAT_MXFP8;
  desc->compress_ratio = 0;
  desc->compress_entry_bytes = 0;
  desc->rope_theta = d.rope.theta;
  desc->rope_dims = 0;
  desc->has_sinks = 0;
  desc->rope_style = SWA_ROPE_NONE;
  desc->rope_first_dim = 0;
  desc->rope_yarn_factor = d.rope.yarn_factor;
  desc->rope_yarn_original_max_positions = d.rope.yarn_original_max_positions;
  desc->rope_yarn_beta_fast = d.rope.yarn_beta_fast;
  desc->rope_yarn_beta_slow = d.rope.yarn_beta_slow;
  desc->rope_yarn_truncate = d.rope.yarn_truncate ? 1 : 0;
  desc->rope_attention_factor = d.rope.attention_factor;
  desc->rope_derotate_output = 0;
  desc->logit_softcap = d.logit_softcap;
  desc->softmax_scale = d.softmax_scale;
  desc->reserved = 0;
  desc->compress_kind = SWA_COMPRESS_OPAQUE;
  desc->compress_head_dim = 0;
  desc->compress_rope_dims = 0;
  desc->compress_row_format = SWA_FORMAT_FP32;
  desc->index_head_dim = 0;
  desc->compress_reserved = 0;
}

SWA_API void swa_config_init(swa_config_t* config) {
  if (config == nullptr) return;
  swa::capi::InitStruct(config);
  const swa::ModelSpec d;
  config->window = d.window;
  config->draft_tokens = d.draft_tokens;
  config->ring_len = 0;
  config->alignment = d.alignment;
  config->max_slots = d.max_slots;
  config->backend = SWA_BACKEND_AUTO;
  config->device = 0;
  config->scale_mode = SWA_SCALE_CEIL;
  config->num_threads = 0;
}

}  // extern "C"
