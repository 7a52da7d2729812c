// C enum arguments -> internal enums: the raw integer is read and checked
// before it is converted, so an out-of-range value is refused, never loaded
// as an enum. One checker per C enum, shared by every section.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "capi/error.h"
#include "common/records.h"
#include "swacache.h"

namespace swa::capi {

inline absl::StatusOr<Dtype> ConvertDtype(const swa_dtype_t& value, const char* name) {
  const int32_t raw = RawEnum(value);
  if (raw != SWA_DTYPE_FP32 && raw != SWA_DTYPE_BF16)
    return absl::InvalidArgumentError(
        absl::StrFormat("%s = %d is not a swa_dtype_t value", name, raw));
  return static_cast<Dtype>(raw);
}

inline absl::StatusOr<Format> ConvertFormat(const swa_format_t& value, const char* name) {
  const int32_t raw = RawEnum(value);
  if (raw != SWA_FORMAT_MXFP8 && raw != SWA_FORMAT_BF16 && raw != SWA_FORMAT_FP32)
    return absl::InvalidArgumentError(
        absl::StrFormat("%s = %d is not a swa_format_t value", name, raw));
  return static_cast<Format>(raw);
}

inline absl::StatusOr<ScaleMode> ConvertScaleMode(const swa_scale_mode_t& value,
                                                  const char* name) {
  const int32_t raw = RawEnum(value);
  if (raw != SWA_SCALE_CEIL && raw != SWA_SCALE_FLOOR)
    return absl::InvalidArgumentError(
        absl::StrFormat("%s = %d is not a swa_scale_mode_t value", name, raw));
  return static_cast<ScaleMode>(raw);
}

}  // namespace swa::capi
