// Score and row-statistic arithmetic of the attention kernels, host+device so
// that it is unit-tested on the CPU (tests/unit/cuda_rope_math_test.cc):
// docs/semantics.md "Logit soft-cap" and "Softmax statistics (LSE)".
#pragma once

#include <math.h>

#include "common/host_device.h"

namespace swa::kernels {

// A scaled score after the logit soft-cap `cap` > 0 (inv_cap = 1 / cap), as
// the CPU backend computes it: cap * tanh(z * (1 / cap)). Sinks are not capped.
SWA_HOST_DEVICE float SoftCapScore(float z, float cap, float inv_cap) {
  return cap * tanhf(z * inv_cap);
}

// ln of a row's softmax denominator from the online softmax's running max m
// and sum l = sum exp(z - m) (the sink's term included): m + ln l, or -inf for
// a row with no key and no sink (l == 0).
SWA_HOST_DEVICE float RowLse(float m, float l) {
  return l != 0.0f ? m + logf(l) : -__builtin_huge_valf();
}

}  // namespace swa::kernels
