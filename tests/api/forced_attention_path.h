// Test binaries registered once per forced attention path (tests/CMakeLists.txt:
// SWACACHE_ATTENTION=portable|avx2|avx512|bf16|amx) skip every test, with the
// reason, when this CPU lacks the forced path's instructions (the library
// would silently fall back to a lower path and the run would test nothing
// new), and when the forced path is the best one this CPU has: the library
// chooses it unforced too, so the binary's plain run (no SWACACHE_ATTENTION)
// already ran exactly these kernels (docs/cpu_attention.md, "Paths").
// Binaries registered once per AVX-512 register tiling (SWACACHE_ATTENTION=
// avx512 with SWACACHE_AVX512_TILES=16|32) skip likewise without AVX-512 F,
// and when the forced tiling is this CPU's default one (Mx32 on Intel, Mx16
// elsewhere: Avx512WideTiles() in src/backend/cpu/attention.cc), which the
// binary's runs without SWACACHE_AVX512_TILES already took; the other tiling
// runs even where AVX-512 is the best path.
#pragma once

#include <cstdlib>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif

#include "gtest/gtest.h"

namespace swa_test {

// AMX-BF16 usable by this process: cpuid amx_bf16 and amx_tile, the tile
// state enabled in XCR0, and Linux grants XTILEDATA (the library asks the
// same way; asking twice is harmless).
inline bool CpuHasUsableAmxBf16() {
#if defined(__x86_64__) && defined(__linux__)
  unsigned a, b, c, d;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  if ((d & (1u << 22)) == 0 || (d & (1u << 24)) == 0) return false;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0 || (c & (1u << 27)) == 0) return false;
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & (3u << 17)) != (3u << 17)) return false;
  return syscall(SYS_arch_prctl, 0x1023, 18) == 0;  // ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA
#else
  return false;
#endif
}

// Empty when the forced path (if any) runs here and adds to the unforced run,
// else why not.
inline std::string ForcedAttentionPathMissing() {
  const char* env = std::getenv("SWACACHE_ATTENTION");
  const std::string want = env != nullptr ? env : "";
  if (want.empty()) return "";
#if defined(__x86_64__)
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const bool bf16 = avx512 && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                    __builtin_cpu_supports("avx512bf16");
  if (want == "avx2" && !avx2) return "SWACACHE_ATTENTION=avx2 but this CPU has no AVX2/FMA";
  if (want == "avx512" && !avx512) return "SWACACHE_ATTENTION=avx512 but this CPU has no AVX-512 F";
  if (want == "bf16" && !bf16) return "SWACACHE_ATTENTION=bf16 but this CPU has no AVX512-BF16 (avx512_bf16)";
  const bool amx = bf16 && CpuHasUsableAmxBf16();
  if (want == "amx" && !amx)
    return "SWACACHE_ATTENTION=amx but this CPU/OS has no usable AMX-BF16 (amx_bf16, amx_tile, "
           "XTILEDATA granted by arch_prctl)";
  // Without AMX an Intel CPU runs BF16 queries on the FP32 AVX-512 kernels
  // (vdpbf16ps is half the FMA rate there): bf16 is not its default.
  unsigned a = 0, b = 0, c = 0, d = 0;
  const bool intel = __get_cpuid(0, &a, &b, &c, &d) != 0 && b == 0x756e6547u &&
                     d == 0x49656e69u && c == 0x6c65746eu;
  // A forced register tiling of the FP32 AVX-512 kernels (the library reads
  // only "16" and "32"; anything else leaves its default).
  const char* tiles_env = std::getenv("SWACACHE_AVX512_TILES");
  const std::string tiles = tiles_env != nullptr ? tiles_env : "";
  if (tiles == "16" || tiles == "32") {
    if (!avx512) return "SWACACHE_AVX512_TILES=" + tiles + " but this CPU has no AVX-512 F";
    const std::string default_tiles = intel ? "32" : "16";
    if (tiles == default_tiles)
      return "SWACACHE_AVX512_TILES=" + tiles + " is this CPU's default AVX-512 tiling, which the runs "
             "of this binary without SWACACHE_AVX512_TILES tested";
    return "";  // the other tiling: no other run of the binary takes it
  }
  const std::string best = amx                ? "amx"
                           : bf16 && !intel   ? "bf16"
                           : avx512           ? "avx512"
                           : avx2             ? "avx2"
                                              : "portable";
  if (want == best)
    return "SWACACHE_ATTENTION=" + want + " is this CPU's best path, which the unforced run of this binary tested";
  return "";
#else
  if (want == "portable") return "SWACACHE_ATTENTION=portable is the only path off x86-64, which the unforced run tested";
  return "SWACACHE_ATTENTION=" + want + " names an x86-64 path; this is not x86-64";
#endif
}

class ForcedAttentionPathEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string why = ForcedAttentionPathMissing();
    if (!why.empty()) GTEST_SKIP() << why;
  }
};

// Registered once per binary that includes this header.
inline ::testing::Environment* const kForcedAttentionPathEnvironment =
    ::testing::AddGlobalTestEnvironment(new ForcedAttentionPathEnvironment);

}  // namespace swa_test
