// Rotating a vector's rotary dims by a position (docs/semantics.md, "RoPE
// inside the step"): the one home of the pairing and of the rotation formula,
// for the CPU step and the CUDA kernels. FP32 throughout; written without
// fused multiply-adds on purpose, so that a caller who rotates with the same
// FP32 formula gets the same bits.
#pragma once

#include <math.h>
#include <stdint.h>

#include "common/host_device.h"
#include "common/records.h"

namespace swa {

// The two dims (within a head) of frequency i of an n-dim rotary slice.
SWA_HOST_DEVICE void RopePair(RopeStyle style, uint32_t first, uint32_t n, uint32_t i,
                              uint32_t* a, uint32_t* b) {
  if (style == RopeStyle::kGptj) {
    *a = first + 2 * i;
    *b = first + 2 * i + 1;
  } else {
    *a = first + i;
    *b = first + i + n / 2;
  }
}

// The inverse of RopePair: the frequency i of dim e of a head and whether e
// is the pair's first member (x). False when e is not a rotary dim.
SWA_HOST_DEVICE bool RopeFreqOf(RopeStyle style, uint32_t first, uint32_t n, uint32_t e,
                                uint32_t* i, bool* is_first) {
  if (style == RopeStyle::kNone || e < first || e >= first + n) return false;
  const uint32_t off = e - first;
  if (style == RopeStyle::kGptj) {
    *i = off / 2;
    *is_first = (off & 1u) == 0;
  } else {
    *is_first = off < n / 2;
    *i = *is_first ? off : off - n / 2;
  }
  return true;
}

// cos and sin of frequency i at `pos`: angle = fl(pos * inv_freq), precise
// cosf/sinf. The CUDA step computes these once per token into a table
// (kernels/step/rope_apply.h) and scales them with RopeScaled where used.
SWA_HOST_DEVICE void RopeCosSin(float pos, float inv_freq, float* c, float* s) {
#if defined(__CUDA_ARCH__)
  const float angle = __fmul_rn(pos, inv_freq);
#else
  const float angle = pos * inv_freq;
#endif
  *c = cosf(angle);
  *s = sinf(angle);
}

// RopeCosSin's (c0, s0) times the attention factor.
SWA_HOST_DEVICE void RopeScaled(float c0, float s0, float factor, float* c, float* s) {
#if defined(__CUDA_ARCH__)
  *c = __fmul_rn(c0, factor);
  *s = __fmul_rn(s0, factor);
#else
  *c = c0 * factor;
  *s = s0 * factor;
#endif
}

// cos and sin of frequency i at `pos`, times the attention factor.
SWA_HOST_DEVICE void RopeAngle(float pos, float inv_freq, float factor, float* c, float* s) {
  float c0, s0;
  RopeCosSin(pos, inv_freq, &c0, &s0);
  RopeScaled(c0, s0, factor, c, s);
}

// (x, y) -> (x c - y s, y c + x s). With -s, the inverse rotation.
SWA_HOST_DEVICE void RotatePair(float* x, float* y, float c, float s) {
  const float x0 = *x, y0 = *y;
#if defined(__CUDA_ARCH__)
  // nvcc contracts a * b - c * d into an FMA by default: round every step.
  *x = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(y0, s));
  *y = __fadd_rn(__fmul_rn(y0, c), __fmul_rn(x0, s));
#else
  const float xc = x0 * c, ys = y0 * s, yc = y0 * c, xs = x0 * s;
  *x = xc - ys;
  *y = yc + xs;
#endif
}

// Rotates the rotary dims of one head vector `v` with per-frequency cos/sin
// (`sign` -1 rotates back).
SWA_HOST_DEVICE void RotateHead(float* v, RopeStyle style, uint32_t first, uint32_t n,
                                const float* cos_f, const float* sin_f, float sign) {
  for (uint32_t i = 0; i < n / 2; ++i) {
    uint32_t a, b;
    RopePair(style, first, n, i, &a, &b);
    RotatePair(&v[a], &v[b], cos_f[i], sign * sin_f[i]);
  }
}

}  // namespace swa
