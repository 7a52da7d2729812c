// The RoPE section: swa_rope_table, swa_rope_args_init, swa_rope_apply
// (docs/semantics.md, "RoPE as a service"). A layer description becomes the
// same RopeTable a cache builds for it (MakeRopeTable), and the rotation runs
// through the step's own code (backend/cpu/rope_cpu.h, the CUDA step's
// cos/sin kernel), so the bits are the step's.
#include <cstring>

#include "absl/strings/str_format.h"
#include "backend/backend.h"
#include "capi/config_api.h"
#include "capi/enums.h"
#include "capi/error.h"
#include "capi/struct_versions.h"
#include "common/byte_overlap.h"
#include "common/checked_math.h"
#include "common/status_macros.h"
#include "layout/layout.h"
#include "layout/rope_table.h"
#include "step/step_tensors.h"

using swa::capi::Guard;

namespace swa::capi {
namespace {

// The layer, validated as swa_cache_create validates it (as layers[0] of a
// one-layer cache with the default window), and its table.
absl::StatusOr<RopeTable> TableOf(const swa_layer_desc_t* layer, uint32_t* head_dim) {
  if (layer == nullptr) return NullArg("layer");
  swa_config_t c;
  swa_config_init(&c);
  c.backend = SWA_BACKEND_CPU;
  c.num_layers = 1;
  c.layers = layer;
  ModelSpec spec;
  CacheOptions options;
  SWA_RETURN_IF_ERROR(ConvertConfig(&c, &spec, &options));
  SWA_RETURN_IF_ERROR(Layout::Create(spec).status());
  if (head_dim != nullptr) *head_dim = spec.layers[0].head_dim;
  return MakeRopeTable(spec.layers[0].rope);
}

}  // namespace
}  // namespace swa::capi

extern "C" {

SWA_API swa_status_t swa_rope_table(const swa_layer_desc_t* layer, float* inv_freq,
                                    uint32_t capacity, swa_rope_info_t* info) {
  return Guard([&]() -> absl::Status {
    if (info != nullptr) SWA_CHECK_STRUCT(info);
    SWA_ASSIGN_OR_RETURN(const swa::RopeTable t, swa::capi::TableOf(layer, nullptr));
    const uint32_t pairs = t.on() ? t.dims / 2 : 0;
    if (capacity > 0 && inv_freq == nullptr)
      return absl::InvalidArgumentError(
          absl::StrFormat("inv_freq is NULL but capacity = %u", capacity));
    if (capacity > 0 && capacity < pairs)
      return absl::InvalidArgumentError(absl::StrFormat(
          "capacity = %u is below the layer's %u frequencies (rope_dims / 2)", capacity, pairs));
    if (capacity > 0 && pairs > 0) std::memcpy(inv_freq, t.inv_freq.data(), pairs * sizeof(float));
    if (info != nullptr) {
      swa_rope_info_t v{};
      v.style = static_cast<swa_rope_style_t>(t.style);
      v.first_dim = t.on() ? t.first_dim : 0;
      v.dims = t.on() ? t.dims : 0;
      v.attention_factor = t.on() ? t.attention_factor : 1.0f;
      v.derotate_output = t.on() && t.derotate_output ? 1 : 0;
      swa::capi::WriteStruct(v, info);
    }
    return absl::OkStatus();
  });
}

SWA_API void swa_rope_args_init(swa_rope_args_t* args) {
  if (args == nullptr) return;
  swa::capi::InitStruct(args);
  args->dtype = SWA_DTYPE_FP32;
  args->heads = 1;
  args->device = -1;
}

SWA_API swa_status_t swa_rope_apply(const swa_rope_args_t* args) {
  return Guard([&]() -> absl::Status {
    SWA_ASSIGN_OR_RETURN(const swa_rope_args_t a, swa::capi::ReadStruct(args, "args"));
    uint32_t head_dim = 0;
    SWA_ASSIGN_OR_RETURN(const swa::RopeTable table, swa::capi::TableOf(a.layer, &head_dim));
    swa::RopeWork w;
    SWA_ASSIGN_OR_RETURN(w.dtype, swa::capi::ConvertDtype(a.dtype, "dtype"));
    if (a.tokens < 0)
      return absl::InvalidArgumentError(absl::StrFormat("tokens = %d is negative", a.tokens));
    if (a.heads == 0) return absl::InvalidArgumentError("heads = 0");
    if (a.inverse > 1)
      return absl::InvalidArgumentError(absl::StrFormat("inverse = %u must be 0 or 1", a.inverse));
    if (a.device < -1)
      return absl::InvalidArgumentError(absl::StrFormat(
          "device = %d is not a device: -1 (host memory) or a CUDA ordinal >= 0", a.device));
    SWA_RETURN_IF_ERROR(swa::CheckedProduct("x", {{"tokens", uint64_t(a.tokens)},
                                                  {"heads", a.heads},
                                                  {"head_dim", head_dim}})
                            .status());
    if (a.tokens > INT32_MAX)
      return absl::InvalidArgumentError(
          absl::StrFormat("tokens = %d exceeds %d", a.tokens, INT32_MAX));
    if (a.tokens > 0) {
      if (a.x == nullptr) return swa::capi::NullArg("x");
      if (a.positions == nullptr) return swa::capi::NullArg("positions");
      // x is rotated in place while positions are read: apart (host x only;
      // positions are host memory, a device x is compared with nothing).
      const uint64_t x_bytes = uint64_t(a.tokens) * a.heads * head_dim *
                               (w.dtype == swa::Dtype::kBf16 ? 2 : 4);
      if (a.device == -1)
        SWA_RETURN_IF_ERROR(swa::CheckApart(
            swa::RangeOf("x", a.x, x_bytes),
            swa::RangeOf("positions", a.positions, uint64_t(a.tokens) * sizeof(int32_t))));
    }
    SWA_RETURN_IF_ERROR(swa::CheckPositions(a.positions, a.tokens));
    if (a.tokens == 0 || !table.on()) {
      if (a.device >= 0) return swa::RopeApply(a.device, w);  // checks the device exists
      return absl::OkStatus();
    }
    w.table = &table;
    w.x = a.x;
    w.tokens = a.tokens;
    w.heads = a.heads;
    w.head_dim = head_dim;
    w.positions = a.positions;
    w.inverse = a.inverse != 0;
    w.stream = a.stream;
    return swa::RopeApply(a.device, w);
  });
}

}  // extern "C"
