// The C boundary: absl::Status -> swa_status_t + the thread-local message,
// and exceptions stopped before they can cross into C.
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
// the enumeration must be checked before the argument is used as the enum.
template <typename E>
int32_t RawEnum(const E& value) {
  static_assert(sizeof(E) == sizeof(int32_t), "C enums are int-sized on supported ABIs");
  int32_t raw;
  std::memcpy(&raw, &value, sizeof raw);
  return raw;
}

// Zeroes *s and sets its struct_size to this library's: the start of every
// *_init function and of every call that fills a caller's struct.
template <typename T>
void ResetStruct(T* s) {
  std::memset(s, 0, sizeof *s);
  s->struct_size = sizeof *s;
}

inline absl::Status NullArg(const char* name) {
  return absl::InvalidArgumentError(absl::StrFormat("%s is NULL", name));
}

// A caller's struct_size must be one this library knows. There is only one
// version of every struct so far; older sizes join the list when fields are
// appended.
inline absl::Status CheckStructSize(size_t got, size_t expected, const char* type) {
  if (got != expected)
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s.struct_size = %u is not a size this library knows (expected %u = sizeof(%s))", type,
        got, expected, type));
  return absl::OkStatus();
}

// A struct that gained fields: its size in 0.1 (up to `first_new_field`) is
// accepted too, and the caller's bytes are read over this library's defaults.
inline absl::Status CheckStructSize2(size_t got, size_t v1, size_t current, const char* type) {
  if (got == v1) return absl::OkStatus();
  return CheckStructSize(got, current, type);
}

#define SWA_CHECK_NOT_NULL(ptr) \
  do {                          \
    if ((ptr) == nullptr) return ::swa::capi::NullArg(#ptr); \
  } while (0)

#define SWA_CHECK_STRUCT(ptr, type)                                                 \
  do {                                                                              \
    SWA_CHECK_NOT_NULL(ptr);                                                        \
    SWA_RETURN_IF_ERROR(::swa::capi::CheckStructSize((ptr)->struct_size, sizeof(type), #type)); \
  } while (0)

}  // namespace swa::capi
