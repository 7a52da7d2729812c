// Sizes computed from a caller's numbers (element counts, byte sizes): every
// product and sum is checked, and a refusal is INVALID_ARGUMENT naming each
// value, as the header promises for sizes that overflow. The C API computes
// every such size through these two functions (built on math.h's CheckedMul
// and CheckedAdd, the one overflow primitive).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "common/math.h"

namespace swa {

// The most elements (or bytes) one tensor of a call may have. Far beyond any
// real buffer, and small enough that its byte size (at most 8 bytes an
// element) and every offset into it fit int64_t, ptrdiff_t and size_t, so the
// backends' index arithmetic on an accepted size cannot wrap.
inline constexpr uint64_t kMaxTensorSize = uint64_t{1} << 60;

// One caller number that enters a size, with its name for the message.
struct SizeTerm {
  const char* name;
  uint64_t value;
};

namespace checked_math_internal {

inline std::string Describe(std::initializer_list<SizeTerm> terms, const char* op) {
  std::string s;
  for (const SizeTerm& t : terms) {
    if (!s.empty()) s += op;
    absl::StrAppendFormat(&s, "%s = %u", t.name, t.value);
  }
  return s;
}

inline absl::Status TooLarge(const char* what, std::initializer_list<SizeTerm> terms,
                             const char* op, bool wrapped, uint64_t limit) {
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: %s overflows (%s)", what, Describe(terms, op),
                      wrapped ? "wraps 64 bits" : absl::StrFormat("exceeds the limit %u", limit)));
}

}  // namespace checked_math_internal

// The product of `factors`, or INVALID_ARGUMENT when it wraps 64 bits or
// exceeds `limit`; the message names `what` (the tensor) and every factor.
inline absl::StatusOr<uint64_t> CheckedProduct(const char* what,
                                               std::initializer_list<SizeTerm> factors,
                                               uint64_t limit = kMaxTensorSize) {
  uint64_t p = 1;
  for (const SizeTerm& f : factors) {
    const std::optional<uint64_t> next = CheckedMul(p, f.value);
    if (!next) return checked_math_internal::TooLarge(what, factors, " * ", true, limit);
    p = *next;
  }
  if (p > limit) return checked_math_internal::TooLarge(what, factors, " * ", false, limit);
  return p;
}

// The sum of `terms`, checked the same way.
inline absl::StatusOr<uint64_t> CheckedSum(const char* what, std::initializer_list<SizeTerm> terms,
                                           uint64_t limit = kMaxTensorSize) {
  uint64_t s = 0;
  for (const SizeTerm& t : terms) {
    const std::optional<uint64_t> next = CheckedAdd(s, t.value);
    if (!next) return checked_math_internal::TooLarge(what, terms, " + ", true, limit);
    s = *next;
  }
  if (s > limit) return checked_math_internal::TooLarge(what, terms, " + ", false, limit);
  return s;
}

}  // namespace swa
