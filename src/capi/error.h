// The C boundary: absl::Status -> swa_status_t + the thread-local message,
// and exceptions stopped before they can cross into C. Struct sizes:
// capi/struct_versions.h; enum arguments: capi/enums.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "swacache.h"

namespace swa::capi {

// Records `status` as this thread's last error (when not OK) and returns its code.
swa_status_t Report(const absl::Status& status);

// Runs `fn` (returning absl::Status) and converts the result; no exception escapes.
template <typename Fn>
swa_status_t Guard(Fn&& fn) noexcept {
  try {
    return Report(std::forward<Fn>(fn)());
  } catch (const std::bad_alloc&) {
    return Report(absl::ResourceExhaustedError("out of host memory"));
  } catch (const std::exception& e) {
    return Report(absl::InternalError(absl::StrFormat("unexpected exception: %s", e.what())));
  } catch (...) {
    return Report(absl::InternalError("unexpected exception"));
  }
}

// The integer behind a C enum argument, read from its bytes: a value outside
// the enumeration must be checked (capi/enums.h) before it is used as the enum.
template <typename E>
int32_t RawEnum(const E& value) {
  static_assert(sizeof(E) == sizeof(int32_t), "C enums are int-sized on supported ABIs");
  int32_t raw;
  std::memcpy(&raw, &value, sizeof raw);
  return raw;
}

inline absl::Status NullArg(const char* name) {
  return absl::InvalidArgumentError(absl::StrFormat("%s is NULL", name));
}

#define SWA_CHECK_NOT_NULL(ptr) \
  do {                          \
    if ((ptr) == nullptr) return ::swa::capi::NullArg(#ptr); \
  } while (0)

}  // namespace swa::capi
