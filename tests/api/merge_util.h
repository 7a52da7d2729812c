// Helpers of the swa_attention_merge tests (merge_test.cc, merge_special_test.cc).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "gtest/gtest.h"
#include "swacache.h"

namespace swa_test {

// A CPU cache with `num_threads` threads (0: the machine's); the merge uses
// only its backend.
inline swa_cache_t* MergeCache(uint32_t num_threads = 0) {
  swa_layer_desc_t l;
  swa_layer_desc_init(&l);
  swa_config_t c;
  swa_config_init(&c);
  c.window = 8, c.max_slots = 1, c.backend = SWA_BACKEND_CPU, c.num_layers = 1, c.layers = &l;
  c.num_threads = num_threads;
  swa_cache_t* cache = nullptr;
  EXPECT_EQ(swa_cache_create(&c, &cache), SWA_OK) << swa_last_error();
  return cache;
}

inline swa_status_t RunMerge(swa_cache_t* cache, int64_t rows, uint32_t dim, swa_dtype_t dtype,
                             const void* out_a, const float* lse_a, const void* out_b,
                             const float* lse_b, void* out, float* lse) {
  swa_merge_args_t m;
  swa_merge_args_init(&m);
  m.rows = rows, m.head_dim = dim, m.dtype = dtype;
  m.out_a = out_a, m.lse_a = lse_a, m.out_b = out_b, m.lse_b = lse_b, m.out = out, m.lse = lse;
  return swa_attention_merge(cache, &m);
}

inline float Bf16Value(uint16_t h) {
  const uint32_t u = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A BF16 pattern's value with an unbounded exponent: the pattern past the
// largest finite one (+-Inf) counts as +-2^128, as IEEE rounding does.
inline double Bf16Unbounded(uint16_t h) {
  if ((h & 0x7FFF) == 0x7F80) return (h & 0x8000) ? -std::ldexp(1.0, 128) : std::ldexp(1.0, 128);
  return Bf16Value(h);
}

// Round to nearest, ties to even, decided from the distances to the two BF16
// neighbours (in FP64, exact) rather than with a bit trick, so that it checks
// the library's rounding independently. NaN gives a quiet NaN.
inline uint16_t RoundToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x0040);
  const uint16_t toward_zero = static_cast<uint16_t>(u >> 16);
  if ((u & 0xFFFFu) == 0) return toward_zero;                    // exact (zeros and infinities too)
  const uint16_t away = static_cast<uint16_t>(toward_zero + 1);  // next magnitude, same sign
  const double d0 = std::fabs(double(f) - Bf16Unbounded(toward_zero));
  const double d1 = std::fabs(double(f) - Bf16Unbounded(away));
  if (d0 != d1) return d0 < d1 ? toward_zero : away;
  return (toward_zero & 1) ? away : toward_zero;
}

}  // namespace swa_test
