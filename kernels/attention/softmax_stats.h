// Score and row-statistic arithmetic of the attention kernels, host+device so
// that it is unit-tested on the CPU (tests/unit/cuda_rope_math_test.cc,
// tests/unit/cuda_host_checks_test.cc): docs/semantics.md "Logit soft-cap"
// and "Softmax statistics (LSE)", and the online softmax's per-key update.
#pragma once

#include <math.h>

#include "common/host_device.h"

namespace swa::kernels {

// A scaled score after the logit soft-cap `cap` > 0 (inv_cap = 1 / cap), as
// the CPU backend computes it: cap * tanh(z * (1 / cap)). Sinks are not capped.
SWA_HOST_DEVICE float SoftCapScore(float z, float cap, float inv_cap) {
  return cap * tanhf(z * inv_cap);
}

// One key's step of the online softmax over a row: the running max `m` and
// the key's (scaled, capped) score `z` give the new max, the factor that
// rescales the row's sum and outputs so far, exp(m - m_new), and the key's
// weight exp(z - m_new).
struct OnlineSoftmaxStep {
  float m;        // the new running max
  float rescale;  // exp(m_old - m_new); 1 while the max stays (also -inf)
  float p;        // exp(z - m_new)
};

SWA_HOST_DEVICE OnlineSoftmaxStep OnlineSoftmaxUpdate(float m, float z) {
  const float neg_inf = -__builtin_huge_valf();
  const float m_new = z > m ? z : m;
  // A -inf score weighs 0, also while the max is still -inf (no sink, no
  // finite key yet), where exp(z - m_new) would be exp(-inf + inf) = NaN and
  // poison the row. A NaN score is not -inf: it still makes the row NaN.
  const float p = z == neg_inf ? 0.0f : expf(z - m_new);
  const float rescale = m == m_new ? 1.0f : expf(m - m_new);
  return {m_new, rescale, p};
}

// The sum a row's online softmax starts with when its sink logit S is the
// running max: exp(S - S) = 1, but NaN for S = +inf (exp(inf - inf), as the
// formula of docs/semantics.md "Attention" gives), so that a +inf sink makes
// the row NaN instead of an output of 0 with LSE +inf, which a merge would
// take for an empty part. The CPU backend starts its rows the same way.
SWA_HOST_DEVICE float SinkStartSum(float sink) {
  return sink == __builtin_huge_valf() ? __builtin_nanf("") : 1.0f;
}

// ln of a row's softmax denominator from the online softmax's running max m
// and sum l = sum exp(z - m) (the sink's term included): m + ln l, or -inf for
// a row with no key and no sink (l == 0).
SWA_HOST_DEVICE float RowLse(float m, float l) {
  return l != 0.0f ? m + logf(l) : -__builtin_huge_valf();
}

}  // namespace swa::kernels
