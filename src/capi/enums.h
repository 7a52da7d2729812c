// C enum arguments -> internal enums: the raw integer is read and checked
// before it is converted, so an out-of-range value is refused, never loaded
// as an enum. One checker per C enum, shared by every section; the layers
// below the C boundary take the typed values as valid and do not check again.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "capi/error.h"
#include "common/records.h"
#include "common/status_macros.h"
#include "layout/model_spec.h"
#include "swacache.h"

namespace swa::capi {

// The internal enums share the C values, so a checked value converts by cast.
static_assert(SWA_FORMAT_MXFP8 == static_cast<int>(Format::kMxfp8) &&
              SWA_FORMAT_BF16 == static_cast<int>(Format::kBf16) &&
              SWA_FORMAT_FP32 == static_cast<int>(Format::kFp32) &&
              SWA_FORMAT_FP8_DS_MLA == static_cast<int>(Format::kFp8DsMla));
static_assert(SWA_SCALE_CEIL == static_cast<int>(ScaleMode::kCeil) &&
              SWA_SCALE_FLOOR == static_cast<int>(ScaleMode::kFloor));
static_assert(SWA_LAYER_STORED == static_cast<int>(Role::kStored) &&
              SWA_LAYER_DROPPED == static_cast<int>(Role::kDropped));
static_assert(SWA_ROPE_NONE == static_cast<int>(RopeStyle::kNone) &&
              SWA_ROPE_NEOX == static_cast<int>(RopeStyle::kNeox) &&
              SWA_ROPE_GPTJ == static_cast<int>(RopeStyle::kGptj));
static_assert(SWA_DTYPE_FP32 == static_cast<int>(Dtype::kFp32) &&
              SWA_DTYPE_BF16 == static_cast<int>(Dtype::kBf16));

// The raw integer of `value` when it is one of `values`; otherwise
// INVALID_ARGUMENT "<name> = <raw> is not a <type> value".
template <typename C>
absl::StatusOr<int32_t> CheckEnum(const C& value, std::initializer_list<C> values,
                                  const char* type, std::string_view name) {
  const int32_t raw = RawEnum(value);
  for (C v : values)
    if (raw == static_cast<int32_t>(v)) return raw;
  return absl::InvalidArgumentError(
      absl::StrFormat("%s = %d is not a %s value", name, raw, type));
}

inline absl::StatusOr<Dtype> ConvertDtype(const swa_dtype_t& value, std::string_view name) {
  SWA_ASSIGN_OR_RETURN(int32_t raw,
                       CheckEnum(value, {SWA_DTYPE_FP32, SWA_DTYPE_BF16}, "swa_dtype_t", name));
  return static_cast<Dtype>(raw);
}

inline absl::StatusOr<Format> ConvertFormat(const swa_format_t& value, std::string_view name) {
  SWA_ASSIGN_OR_RETURN(
      int32_t raw,
      CheckEnum(value, {SWA_FORMAT_MXFP8, SWA_FORMAT_BF16, SWA_FORMAT_FP32, SWA_FORMAT_FP8_DS_MLA},
                "swa_format_t", name));
  return static_cast<Format>(raw);
}

inline absl::StatusOr<ScaleMode> ConvertScaleMode(const swa_scale_mode_t& value,
                                                  std::string_view name) {
  SWA_ASSIGN_OR_RETURN(int32_t raw, CheckEnum(value, {SWA_SCALE_CEIL, SWA_SCALE_FLOOR},
                                              "swa_scale_mode_t", name));
  return static_cast<ScaleMode>(raw);
}

inline absl::StatusOr<Role> ConvertRole(const swa_layer_role_t& value, std::string_view name) {
  SWA_ASSIGN_OR_RETURN(int32_t raw, CheckEnum(value, {SWA_LAYER_STORED, SWA_LAYER_DROPPED},
                                              "swa_layer_role_t", name));
  return static_cast<Role>(raw);
}

inline absl::StatusOr<RopeStyle> ConvertRopeStyle(const swa_rope_style_t& value,
                                                  std::string_view name) {
  SWA_ASSIGN_OR_RETURN(int32_t raw, CheckEnum(value, {SWA_ROPE_NONE, SWA_ROPE_NEOX, SWA_ROPE_GPTJ},
                                              "swa_rope_style_t", name));
  return static_cast<RopeStyle>(raw);
}

inline absl::StatusOr<CompressKind> ConvertCompressKind(const swa_compress_kind_t& value,
                                                        std::string_view name) {
  SWA_ASSIGN_OR_RETURN(int32_t raw,
                       CheckEnum(value, {SWA_COMPRESS_OPAQUE, SWA_COMPRESS_HCA, SWA_COMPRESS_CSA},
                                 "swa_compress_kind_t", name));
  return static_cast<CompressKind>(raw);
}

// swa_backend_t stays a C value: AUTO has no internal counterpart (the
// configuration resolves it).
inline absl::StatusOr<swa_backend_t> CheckBackend(const swa_backend_t& value,
                                                  std::string_view name) {
  SWA_ASSIGN_OR_RETURN(
      int32_t raw,
      CheckEnum(value, {SWA_BACKEND_AUTO, SWA_BACKEND_CPU, SWA_BACKEND_CUDA}, "swa_backend_t", name));
  return static_cast<swa_backend_t>(raw);
}

}  // namespace swa::capi
