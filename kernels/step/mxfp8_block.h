// One 32-element MXFP8 block encoded from FP32 bit patterns (docs/semantics.md, "MXFP8"),
// host+device so that the device encoder is unit-tested on the CPU. Built on
// the exact scalar math of common/mxfp8_math.h; the byte results equal the CPU
// codec's (NaN/Inf block: scale 0xFF, every code the NaN code).
#pragma once

#include <stdint.h>

#include "common/mxfp8_math.h"
#include "common/host_device.h"
#include "kernels/step/unroll.h"

namespace swa::kernels {

// Encodes bits[0..31]; writes 32 codes and one scale byte. Returns 1 when the
// block held a NaN or Inf, else 0.
SWA_HOST_DEVICE uint32_t EncodeMxfp8Block(const uint32_t* bits, bool ceil, uint8_t* codes,
                                          uint8_t* scale) {
  uint32_t amax = 0;
  SWA_DEVICE_UNROLL  // bits[] and codes[] stay in registers (no stack frame)
  for (int j = 0; j < codec::kBlock; ++j) {
    const uint32_t mag = bits[j] & 0x7FFFFFFFu;  // integer order == magnitude order
    amax = mag > amax ? mag : amax;
  }
  const uint8_t s = codec::E8m0ForAmax(amax, ceil);
  *scale = s;
  if (s == codec::kE8m0Nan) {
    SWA_DEVICE_UNROLL
    for (int j = 0; j < codec::kBlock; ++j) codes[j] = codec::kE4m3NanCode;
    return 1;
  }
  const int k = 127 - static_cast<int>(s);
  SWA_DEVICE_UNROLL
  for (int j = 0; j < codec::kBlock; ++j) codes[j] = codec::E4m3EncodeScaled(bits[j], k);
  return 0;
}

// Non-finite test of a plain-format block (BF16/FP32 storage): any NaN or Inf.
SWA_HOST_DEVICE uint32_t BlockIsNonFinite(const uint32_t* bits) {
  bool bad = false;
  SWA_DEVICE_UNROLL
  for (int j = 0; j < codec::kBlock; ++j) bad |= codec::IsNonFiniteBits(bits[j]);
  return bad ? 1u : 0u;
}

}  // namespace swa::kernels
