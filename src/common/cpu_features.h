// CPU feature checks the compilers disagree on: GCC's __builtin_cpu_supports
// knows "f16c", clang 14's does not, so F16C is read from CPUID directly.
#pragma once

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace swa {

// F16C (half <-> single conversions): CPUID leaf 1, ECX bit 29.
inline bool CpuHasF16c() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
  return (c & (1u << 29)) != 0;
#else
  return false;
#endif
}

// The CPU's vendor string (CPUID leaf 0) is "GenuineIntel".
inline bool CpuIsIntel() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d) == 0) return false;
  return b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu;  // "Genu" "ineI" "ntel"
#else
  return false;
#endif
}

}  // namespace swa
