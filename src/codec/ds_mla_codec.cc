// Scalar kernels of the fp8_ds_mla record (common/ds_mla_math.h,
// docs/codec.md "fp8_ds_mla"), one 512-dim vector at a time: the reference,
// and the scalar set's kernels. The AVX2 and AVX-512 sets encode with
// mxfp8_encode_avx2.cc's Avx2DsMlaEncode* and decode with codec_avx2.cc's
// DsMlaDecode*Avx2 (the same bytes, values and counts:
// tests/unit/ds_mla_codec_test.cc).
#include <cstring>

#include "codec/codec.h"
#include "common/ds_mla_math.h"

namespace swa::codec {
namespace {

void PutBf16(uint8_t* dst, uint16_t h) { std::memcpy(dst, &h, sizeof h); }
uint16_t GetBf16(const uint8_t* src) {
  uint16_t h;
  std::memcpy(&h, src, sizeof h);
  return h;
}

// `bits`: the vector's 512 values as FP32 bits; `rope_bf16`: the RoPE dims'
// BF16 values (a BF16 source is kept as is, payloads included).
uint32_t EncodeBits(const uint32_t* bits, const uint16_t* rope_bf16, uint8_t* dst) {
  uint32_t bad = 0;
  for (uint32_t g = 0; g < kDsMlaGroups; ++g) {
    const uint32_t* x = bits + g * kDsMlaGroup;
    const uint8_t scale = DsMlaScaleForAmax(AmaxBits(x, kDsMlaGroup));
    DsMlaCodes(x, kDsMlaGroup, scale, dst + g * kDsMlaGroup);
    dst[kDsMlaScaleOffset + g] = scale;
    bad += scale == kE8m0Nan ? 1 : 0;
  }
  dst[kDsMlaBytes - 1] = 0;
  for (uint32_t half = 0; half < kDsMlaRopeDims / kBlock; ++half) {
    bool half_bad = false;
    for (uint32_t j = 0; j < uint32_t(kBlock); ++j) {
      const uint32_t d = half * kBlock + j;
      half_bad |= IsNonFiniteBits(bits[kDsMlaNopeDims + d]);
      PutBf16(dst + kDsMlaRopeOffset + 2 * d, rope_bf16[d]);
    }
    bad += half_bad ? 1 : 0;
  }
  return bad;
}

}  // namespace

uint32_t DsMlaEncodeF32(const float* src, uint8_t* dst) {
  uint32_t bits[kDsMlaDim];
  uint16_t rope[kDsMlaRopeDims];
  for (uint32_t d = 0; d < kDsMlaDim; ++d) bits[d] = FloatBits(src[d]);
  for (uint32_t d = 0; d < kDsMlaRopeDims; ++d) rope[d] = Bf16FromFloat(src[kDsMlaNopeDims + d]);
  return EncodeBits(bits, rope, dst);
}

uint32_t DsMlaEncodeBf16(const uint16_t* src, uint8_t* dst) {
  uint32_t bits[kDsMlaDim];
  for (uint32_t d = 0; d < kDsMlaDim; ++d) bits[d] = static_cast<uint32_t>(src[d]) << 16;
  return EncodeBits(bits, src + kDsMlaNopeDims, dst);
}

// Decode: a NoPE group counts when its scale is 0xFF, a 32-dim half of the
// RoPE part when it holds a NaN or Inf.
uint32_t DsMlaDecodeF32(const uint8_t* src, float* dst) {
  uint32_t bad = 0;
  for (uint32_t g = 0; g < kDsMlaGroups; ++g) {
    const uint8_t scale = src[kDsMlaScaleOffset + g];
    for (uint32_t j = 0; j < kDsMlaGroup; ++j)
      dst[g * kDsMlaGroup + j] = DecodeElement(src[g * kDsMlaGroup + j], scale);
    bad += scale == kE8m0Nan ? 1 : 0;
  }
  for (uint32_t half = 0; half < kDsMlaRopeDims / kBlock; ++half) {
    bool half_bad = false;
    for (uint32_t j = 0; j < uint32_t(kBlock); ++j) {
      const uint32_t d = half * kBlock + j;
      const uint16_t h = GetBf16(src + kDsMlaRopeOffset + 2 * d);
      half_bad |= IsNonFiniteBits(static_cast<uint32_t>(h) << 16);
      dst[kDsMlaNopeDims + d] = Bf16ToFloat(h);
    }
    bad += half_bad ? 1 : 0;
  }
  return bad;
}

uint32_t DsMlaDecodeBf16(const uint8_t* src, uint16_t* dst) {
  float f[kDsMlaDim];
  const uint32_t bad = DsMlaDecodeF32(src, f);
  for (uint32_t d = 0; d < kDsMlaNopeDims; ++d) dst[d] = Bf16FromFloat(f[d]);  // exact
  for (uint32_t d = 0; d < kDsMlaRopeDims; ++d)
    dst[kDsMlaNopeDims + d] = GetBf16(src + kDsMlaRopeOffset + 2 * d);  // as stored
  return bad;
}

}  // namespace swa::codec
