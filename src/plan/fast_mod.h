// x mod d for a fixed divisor without a division instruction (Lemire, Kaser,
// Kurz, "Faster remainder by direct computation", 2019): exact for every
// 32-bit x and d >= 1. The planner takes one remainder per sequence; with
// 1024-sequence decode batches the divide latency was a visible share.
#pragma once

#include <cstdint>

namespace swa::plan {

class FastMod {
 public:
  explicit FastMod(uint32_t d) : d_(d), m_(UINT64_C(0xFFFFFFFFFFFFFFFF) / d + 1) {}
  uint32_t operator()(uint32_t x) const {
    const uint64_t low = m_ * x;
    return static_cast<uint32_t>((static_cast<__uint128_t>(low) * d_) >> 64);
  }

 private:
  uint32_t d_;
  uint64_t m_;
};

}  // namespace swa::plan
