// Exact math of DeepSeek-V4's fp8_ds_mla record (docs/codec.md, "fp8_ds_mla"),
// host and device: the CPU codec and the CUDA encode/attention kernels use
// these and nothing else, so their bytes and values agree.
//
// A record holds one 512-dim vector in 584 bytes (offsets in common/records.h):
//   [0, 448)    E4M3 codes of the NoPE dims 0..447
//   [448, 576)  the RoPE dims 448..511 as BF16 (little-endian)
//   [576, 583)  7 UE8M0 scales, scale g for NoPE dims 64g .. 64g + 63
//   583         pad, written 0, ignored on read
// A group's scale is 2^ceil(log2(max(amax / 448, 1e-4))), the rule of
// FlashMLA's reference quantizer: with 448 = 1.75 * 2^8 that is the MXFP8
// ceil rule on the amax bits (mxfp8_math.h, E8m0ForAmax), floored at 2^-13
// (byte 114), since 1e-4 lies in (2^-14, 2^-13]. Codes are x / scale rounded to
// nearest even; the ceil rule keeps every |x / scale| <= 448.
#pragma once

#include <stdint.h>

#include "common/host_device.h"
#include "common/mxfp8_math.h"
#include "common/records.h"

namespace swa::codec {

// UE8M0 byte of the smallest scale FlashMLA writes: 2^ceil(log2(1e-4)) = 2^-13.
inline constexpr uint8_t kDsMlaMinScale = 127 - 13;

// Largest magnitude's FP32 bits among n bit patterns (sign ignored; NaN and
// Inf sort above every finite value).
SWA_HOST_DEVICE uint32_t AmaxBits(const uint32_t* bits, int n) {
  uint32_t amax = 0;
  for (int j = 0; j < n; ++j) {
    const uint32_t mag = bits[j] & 0x7FFFFFFFu;
    amax = mag > amax ? mag : amax;
  }
  return amax;
}

// Scale byte of a NoPE group whose largest magnitude has FP32 bits
// `amax_bits`; 0xFF for a group holding a NaN or Inf.
SWA_HOST_DEVICE uint8_t DsMlaScaleForAmax(uint32_t amax_bits) {
  amax_bits &= 0x7FFFFFFFu;
  if (amax_bits >= 0x7F800000u) return kE8m0Nan;
  const uint8_t b = E8m0ForAmax(amax_bits, /*ceil=*/true);
  return b < kDsMlaMinScale ? kDsMlaMinScale : b;
}

// E4M3 codes of n values (FP32 bits) under scale byte `scale` (0xFF: every
// code the NaN code).
SWA_HOST_DEVICE void DsMlaCodes(const uint32_t* bits, int n, uint8_t scale, uint8_t* codes) {
  const int k = 127 - static_cast<int>(scale);
  for (int j = 0; j < n; ++j)
    codes[j] = scale == kE8m0Nan ? kE4m3NanCode : E4m3EncodeScaled(bits[j], k);
}

}  // namespace swa::codec
