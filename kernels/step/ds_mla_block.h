// One 32-dim block of an fp8_ds_mla record encoded from FP32 bit patterns
// (common/ds_mla_math.h, docs/codec.md "fp8_ds_mla"), host+device so that
// the device encoder is unit-tested on the CPU against the CPU codec.
#pragma once

#include <stdint.h>

#include "common/ds_mla_math.h"
#include "common/host_device.h"
#include "common/mxfp8_math.h"
#include "common/records.h"
#include "kernels/step/unroll.h"

namespace swa::kernels {

// Block `b` (dims 32b .. 32b + 31) of a 512-dim vector whose record starts at
// `rec`. NoPE blocks (b < 14) write their 32 codes; the even one of a group's
// two blocks also writes the group's scale and counts a non-finite group
// (returns 1), so a group counts once. `partner(out)` fills out[0..31] with the
// other block of the group (b ^ 1). RoPE blocks (14, 15) write BF16 (a BF16
// source, `bf16_copy`, as is: payloads kept) and count a non-finite half;
// block 15 also zeroes the pad byte.
template <typename Partner>
SWA_HOST_DEVICE uint32_t EncodeDsMlaBlock(int b, const uint32_t* bits, bool bf16_copy,
                                          uint8_t* rec, Partner partner) {
  const uint32_t d0 = uint32_t(b) * 32;
  if (d0 < kDsMlaNopeDims) {
    // Fixed-count unrolled loops: both arrays stay in registers.
    uint32_t other[32];
    partner(other);
    uint32_t amax = 0;
    SWA_DEVICE_UNROLL
    for (int j = 0; j < 32; ++j) {
      const uint32_t x = bits[j] & 0x7FFFFFFFu, y = other[j] & 0x7FFFFFFFu;
      const uint32_t m = x > y ? x : y;
      amax = m > amax ? m : amax;
    }
    const uint8_t scale = codec::DsMlaScaleForAmax(amax);
    const int k = 127 - int(scale);
    SWA_DEVICE_UNROLL
    for (int j = 0; j < 32; ++j)
      rec[d0 + j] = scale == codec::kE8m0Nan ? codec::kE4m3NanCode
                                             : codec::E4m3EncodeScaled(bits[j], k);
    if ((b & 1) != 0) return 0;
    rec[kDsMlaScaleOffset + d0 / kDsMlaGroup] = scale;
    return scale == codec::kE8m0Nan ? 1u : 0u;
  }
  uint16_t* h = reinterpret_cast<uint16_t*>(rec + kDsMlaRopeOffset) + (d0 - kDsMlaNopeDims);
  bool bad = false;
  SWA_DEVICE_UNROLL
  for (int j = 0; j < 32; ++j) {
    bad |= codec::IsNonFiniteBits(bits[j]);
    h[j] = bf16_copy ? uint16_t(bits[j] >> 16) : codec::Bf16FromFloat(codec::BitsFloat(bits[j]));
  }
  if (d0 + 32 == kDsMlaDim) rec[kDsMlaBytes - 1] = 0;
  return bad ? 1u : 0u;
}

}  // namespace swa::kernels
