// RoPE in the CUDA kernels (docs/semantics.md, "RoPE inside the step"): the
// layer's rotary slice as plain kernel parameters, the per-token cos/sin table
// the kernels read, and the rotation of one dim of a head vector, built on
// common/rope.h (the one home of the pairing and of the formula).
// Host+device, so that it is unit-tested on the CPU against the CPU step's
// RopeAngle and RotateHead (tests/unit/cuda_rope_math_test.cc).
//
// cos and sin are computed once per step and layer, one entry per (token,
// frequency), by LaunchRopeCosSin (rope_cos_sin.h): the attention and encode
// kernels only read them, so no sinf/cosf is inlined into them. A kernel thread
// that owns some dims of a vector rotates each of them on its own: it reads
// the pair partner through `load` (which may lie in another 32-value block, or
// another lane's dims, for NEOX) and the pair's entry from the token's row.
// The result equals RotateHead's bit for bit, given the same cosf/sinf.
#pragma once

#include <stdint.h>

#include "common/mxfp8_math.h"
#include "common/host_device.h"
#include "common/records.h"
#include "common/rope.h"
#include "kernels/step/unroll.h"

namespace swa::kernels {

// One table entry: cos and sin of a frequency at a token's position, without
// the attention factor (de-rotation uses them unscaled).
struct alignas(8) RopeCs {
  float c;
  float s;
};

// The entry of frequency `inv_freq` at position `pos`: exactly RopeCosSin's
// values (angle fl(pos * inv_freq), precise cosf/sinf), as the CPU step's
// RopeAngle computes them before the factor.
SWA_HOST_DEVICE RopeCs RopeTableEntry(float pos, float inv_freq) {
  RopeCs e;
  RopeCosSin(pos, inv_freq, &e.c, &e.s);
  return e;
}

struct RopeParams {
  RopeStyle style = RopeStyle::kNone;  // kNone: nothing rotates
  int32_t first_dim = 0;
  int32_t dims = 0;                    // n (even)
  float attention_factor = 1.0f;       // multiplies cos and sin of q and k
  bool derotate_output = false;        // attention: output rotated back (no factor)
  // [T, n / 2] device memory: token t's entries, row t (the step's token
  // index, token_offset + j), written by LaunchRopeCosSin before the kernels
  // that read it.
  const RopeCs* cos_sin = nullptr;

  SWA_HOST_DEVICE bool on() const { return style != RopeStyle::kNone; }
  SWA_HOST_DEVICE const RopeCs* TokenRow(int64_t t) const { return cos_sin + t * (dims / 2); }
};

// Dim e of a head vector rotated by the position of table row `row` (sign -1:
// rotated back), cos and sin times `factor`; load(d) returns dim d of the
// unrotated vector in FP32.
template <typename Load>
SWA_HOST_DEVICE float RopeRotatedDim(const RopeParams& r, uint32_t e, const RopeCs* row,
                                     float factor, float sign, Load load) {
  uint32_t i, a, b;
  bool first;
  if (!RopeFreqOf(r.style, uint32_t(r.first_dim), uint32_t(r.dims), e, &i, &first))
    return load(e);
  RopePair(r.style, uint32_t(r.first_dim), uint32_t(r.dims), i, &a, &b);
  float x = load(a), y = load(b), c, s;
  const RopeCs cs = row[i];
  RopeScaled(cs.c, cs.s, factor, &c, &s);
  RotatePair(&x, &y, c, sign * s);
  return first ? x : y;
}

// The FP32 bit patterns of block `blk` (dims 32 blk ... 32 blk + 31) of a new
// key vector rotated by the position of table row `row` with the attention
// factor, ready for the block encoders of mxfp8_block.h (the encode kernel's
// path for K under RoPE).
template <typename Load>
SWA_HOST_DEVICE void RotatedBlockBits(const RopeParams& r, uint32_t blk, const RopeCs* row,
                                      Load load, uint32_t* bits) {
  SWA_DEVICE_UNROLL
  for (uint32_t j = 0; j < 32; ++j)
    bits[j] = codec::FloatBits(RopeRotatedDim(r, 32 * blk + j, row, r.attention_factor, 1.0f, load));
}

// The sequence whose new tokens include step token `t`, or -1 when none does
// (padding rows of a device-planned step). `seqs[].token_offset` is
// non-decreasing (the tokens of the sequences before each one).
SWA_HOST_DEVICE int32_t TokenSeq(const PlannedSeq* seqs, int32_t n_seqs, int64_t t) {
  int32_t lo = 0, hi = n_seqs;  // the last seq with token_offset <= t is in [lo, hi)
  if (n_seqs <= 0 || t < seqs[0].token_offset) return -1;
  while (hi - lo > 1) {
    const int32_t mid = lo + (hi - lo) / 2;
    if (seqs[mid].token_offset <= t)
      lo = mid;
    else
      hi = mid;
  }
  return t - seqs[lo].token_offset < seqs[lo].seqlen_q ? lo : -1;
}

}  // namespace swa::kernels
