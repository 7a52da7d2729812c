// Scalar reference kernels, written for clarity: one element at a time
// through the exact math of mxfp8_math.h.
#include "codec/codec.h"
#include "common/mxfp8_math.h"

namespace swa::codec {

// One MXFP8 block from FP32 bit patterns. Returns 1 for a non-finite block.
uint32_t EncodeBlockScalar(const uint32_t* bits, bool ceil, uint8_t* codes, uint8_t* scale) {
  uint32_t amax = 0;
  for (int j = 0; j < kBlock; ++j) {
    const uint32_t mag = bits[j] & 0x7FFFFFFFu;  // integer order == magnitude order
    if (mag > amax) amax = mag;
  }
  *scale = E8m0ForAmax(amax, ceil);
  if (*scale == kE8m0Nan) {
    for (int j = 0; j < kBlock; ++j) codes[j] = kE4m3NanCode;
    return 1;
  }
  const int k = 127 - static_cast<int>(*scale);  // x * 2^k
  for (int j = 0; j < kBlock; ++j) codes[j] = E4m3EncodeScaled(bits[j], k);
  return 0;
}

namespace {

uint32_t EncodeF32(const float* src, uint32_t dim, bool ceil, uint8_t* dst) {
  uint32_t bad = 0;
  uint32_t bits[kBlock];
  for (uint32_t b = 0; b < dim / kBlock; ++b) {
    for (int j = 0; j < kBlock; ++j) bits[j] = FloatBits(src[b * kBlock + j]);
    bad += EncodeBlockScalar(bits, ceil, dst + b * kBlock, dst + dim + b);
  }
  return bad;
}

uint32_t EncodeBf16(const uint16_t* src, uint32_t dim, bool ceil, uint8_t* dst) {
  uint32_t bad = 0;
  uint32_t bits[kBlock];
  for (uint32_t b = 0; b < dim / kBlock; ++b) {
    for (int j = 0; j < kBlock; ++j) bits[j] = static_cast<uint32_t>(src[b * kBlock + j]) << 16;
    bad += EncodeBlockScalar(bits, ceil, dst + b * kBlock, dst + dim + b);
  }
  return bad;
}

uint32_t DecodeF32(const uint8_t* src, uint32_t dim, float* dst) {
  uint32_t bad = 0;
  for (uint32_t b = 0; b < dim / kBlock; ++b)
    bad += DecodeBlockScalarF32(src + b * kBlock, src[dim + b], dst + b * kBlock);
  return bad;
}

uint32_t DecodeBf16(const uint8_t* src, uint32_t dim, uint16_t* dst) {
  uint32_t bad = 0;
  for (uint32_t b = 0; b < dim / kBlock; ++b)
    bad += DecodeBlockScalarBf16(src + b * kBlock, src[dim + b], dst + b * kBlock);
  return bad;
}

// Plain formats: every element converted on its own; a block is non-finite
// when any of its 32 elements is NaN or Inf. `bits` gives an element's value
// as FP32 bits, `convert` the stored element.
template <typename Src, typename Dst, typename Bits, typename Convert>
uint32_t ConvertPlain(const Src* src, uint32_t dim, Dst* dst, Bits bits, Convert convert) {
  uint32_t bad = 0;
  for (uint32_t b = 0; b < dim / kBlock; ++b) {
    bool block_bad = false;
    for (int j = 0; j < kBlock; ++j) {
      const Src v = src[b * kBlock + j];
      block_bad |= IsNonFiniteBits(bits(v));
      dst[b * kBlock + j] = convert(v);
    }
    bad += block_bad ? 1 : 0;
  }
  return bad;
}

uint32_t F32Bits(float v) { return FloatBits(v); }
uint32_t Bf16Bits(uint16_t h) { return static_cast<uint32_t>(h) << 16; }

uint32_t F32ToF32(const float* src, uint32_t dim, float* dst) {
  return ConvertPlain(src, dim, dst, F32Bits, [](float v) { return v; });
}
uint32_t F32ToBf16(const float* src, uint32_t dim, uint16_t* dst) {
  return ConvertPlain(src, dim, dst, F32Bits, Bf16FromFloat);
}
uint32_t Bf16ToF32(const uint16_t* src, uint32_t dim, float* dst) {
  return ConvertPlain(src, dim, dst, Bf16Bits, Bf16ToFloat);
}
uint32_t Bf16ToBf16(const uint16_t* src, uint32_t dim, uint16_t* dst) {
  return ConvertPlain(src, dim, dst, Bf16Bits, [](uint16_t h) { return h; });
}

}  // namespace

uint32_t DecodeBlockScalarF32(const uint8_t* codes, uint8_t scale, float* dst) {
  for (int j = 0; j < kBlock; ++j) dst[j] = DecodeElement(codes[j], scale);
  return scale == kE8m0Nan ? 1 : 0;
}

uint32_t DecodeBlockScalarBf16(const uint8_t* codes, uint8_t scale, uint16_t* dst) {
  for (int j = 0; j < kBlock; ++j) dst[j] = Bf16FromFloat(DecodeElement(codes[j], scale));
  return scale == kE8m0Nan ? 1 : 0;
}

const RowKernels& ScalarKernels() {
  static const RowKernels kernels = {
      "scalar",   EncodeF32, EncodeBf16, DecodeF32, DecodeBf16,
      F32ToF32,   F32ToBf16, Bf16ToF32,  Bf16ToBf16,
      nullptr,    nullptr,   nullptr,    nullptr,
      nullptr,    nullptr,   nullptr,    nullptr,
  };
  return kernels;
}

}  // namespace swa::codec
