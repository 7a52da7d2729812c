// RoPE in the CUDA kernels (docs/semantics.md, "RoPE inside the step"): the
// layer's table as plain kernel parameters, and the rotation of one dim of a
// head vector, built on common/rope.h (the one home of the pairing and of the
// formula). Host+device, so that it is unit-tested on the CPU against the
// CPU step's RotateHead (tests/unit/cuda_rope_math_test.cc).
//
// A kernel thread that owns some dims of a vector rotates each of them on its
// own: it reads the pair partner through `load` (which may lie in another
// 32-value block, or another lane's dims, for NEOX) and computes the pair's
// angle itself. The result equals RotateHead's bit for bit, given the same
// cosf/sinf.
#pragma once

#include <stdint.h>

#include "codec/mxfp8_math.h"
#include "common/host_device.h"
#include "common/records.h"
#include "common/rope.h"

namespace swa::kernels {

struct RopeParams {
  RopeStyle style = RopeStyle::kNone;  // kNone: nothing rotates
  int32_t first_dim = 0;
  int32_t dims = 0;                    // n (even)
  float attention_factor = 1.0f;       // multiplies cos and sin of q and k
  bool derotate_output = false;        // attention: output rotated back (no factor)
  const float* inv_freq = nullptr;     // [n / 2], device memory in the kernels

  SWA_HOST_DEVICE bool on() const { return style != RopeStyle::kNone; }
};

// Dim e of a head vector rotated by `pos` (sign -1: rotated back), cos and sin
// times `factor`; load(d) returns dim d of the unrotated vector in FP32.
template <typename Load>
SWA_HOST_DEVICE float RopeRotatedDim(const RopeParams& r, uint32_t e, float pos, float factor,
                                     float sign, Load load) {
  uint32_t i, a, b;
  bool first;
  if (!RopeFreqOf(r.style, uint32_t(r.first_dim), uint32_t(r.dims), e, &i, &first))
    return load(e);
  RopePair(r.style, uint32_t(r.first_dim), uint32_t(r.dims), i, &a, &b);
  float x = load(a), y = load(b), c, s;
  RopeAngle(pos, r.inv_freq[i], factor, &c, &s);
  RotatePair(&x, &y, c, sign * s);
  return first ? x : y;
}

// The FP32 bit patterns of block `blk` (dims 32 blk ... 32 blk + 31) of a new
// key vector rotated by `pos` with the attention factor, ready for the block
// encoders of mxfp8_block.h (the encode kernel's path for K under RoPE).
template <typename Load>
SWA_HOST_DEVICE void RotatedBlockBits(const RopeParams& r, uint32_t blk, float pos, Load load,
                                      uint32_t* bits) {
  for (uint32_t j = 0; j < 32; ++j)
    bits[j] = codec::FloatBits(RopeRotatedDim(r, 32 * blk + j, pos, r.attention_factor, 1.0f, load));
}

// Absolute position of every new token of a plan, [T] (token t of sequence s
// is position q_start + t - token_offset), for the encode kernel.
SWA_HOST_DEVICE void TokenPositions(const PlannedSeq* seqs, uint32_t n_seqs, int32_t* positions) {
  for (uint32_t i = 0; i < n_seqs; ++i)
    for (int32_t j = 0; j < seqs[i].seqlen_q; ++j)
      positions[seqs[i].token_offset + j] = seqs[i].q_start + j;
}

}  // namespace swa::kernels
