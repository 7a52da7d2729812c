// Overflow-checked integer helpers shared by layout, planner and store.
#pragma once

#include <cstdint>
#include <optional>

#include "common/host_device.h"

namespace swa {

SWA_HOST_DEVICE constexpr uint64_t RoundUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

SWA_HOST_DEVICE constexpr bool IsPowerOfTwo(uint64_t value) {
  return value != 0 && (value & (value - 1)) == 0;
}

// Non-negative modulo for positions (p mod R with p >= 0 in practice).
SWA_HOST_DEVICE constexpr int64_t PosMod(int64_t p, int64_t r) {
  const int64_t m = p % r;
  return m < 0 ? m + r : m;
}

inline std::optional<uint64_t> CheckedMul(uint64_t a, uint64_t b) {
  uint64_t out;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

inline std::optional<uint64_t> CheckedAdd(uint64_t a, uint64_t b) {
  uint64_t out;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

}  // namespace swa
