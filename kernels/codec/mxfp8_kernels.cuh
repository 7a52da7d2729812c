// MXFP8 kernel templates. Eight threads per 32-element block, four
// consecutive elements per thread; the block's amax is reduced with shuffles
// inside each 8-lane group.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

#include "codec/mxfp8_math.h"
#include "kernels/codec/mxfp8_kernels.h"

namespace swa::kernels {

constexpr int kCodecThreads = 256;
constexpr int kLanesPerBlock = 8;

template <typename T>
__device__ __forceinline__ uint32_t LoadBits(const T* p);
template <>
__device__ __forceinline__ uint32_t LoadBits<float>(const float* p) {
  return __float_as_uint(*p);
}
template <>
__device__ __forceinline__ uint32_t LoadBits<uint16_t>(const uint16_t* p) {
  return static_cast<uint32_t>(*p) << 16;
}

// Two scaled values -> two codes, low byte = first. sm_89+ has a conversion
// instruction with exactly the reference rounding (nearest even, saturating
// to +-448; NaN never occurs here); older devices use the reference math.
__device__ __forceinline__ uint32_t EncodePair(uint32_t a_bits, uint32_t b_bits, int k, bool hw) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if (hw) {
    const float scale = codec::Pow2(k);  // normal: k >= -120 for finite blocks
    const float2 y = make_float2(__uint_as_float(a_bits) * scale, __uint_as_float(b_bits) * scale);
    return __nv_cvt_float2_to_fp8x2(y, __NV_SATFINITE, __NV_E4M3);
  }
#endif
  return codec::E4m3EncodeScaled(a_bits, k) | (codec::E4m3EncodeScaled(b_bits, k) << 8);
}

template <typename SrcT>
__global__ void __launch_bounds__(kCodecThreads) Mxfp8EncodeKernel(Mxfp8EncodeParams p) {
  const int64_t blocks_per_vec = p.dim / 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t block = t / kLanesPerBlock;
  const int lane = static_cast<int>(t % kLanesPerBlock);
  const bool active = block < p.n_vectors * blocks_per_vec;
  const int64_t vec = active ? block / blocks_per_vec : 0;
  const int64_t in_vec = active ? block % blocks_per_vec : 0;
  uint32_t bits[4] = {0, 0, 0, 0};
  if (active) {
    const SrcT* src = static_cast<const SrcT*>(p.src) + vec * p.src_stride + in_vec * 32 + lane * 4;
    for (int j = 0; j < 4; ++j) bits[j] = LoadBits(src + j);
  }
  uint32_t amax = 0;
  for (int j = 0; j < 4; ++j) amax = max(amax, bits[j] & 0x7FFFFFFFu);
  for (int off = kLanesPerBlock / 2; off > 0; off /= 2)
    amax = max(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, off, kLanesPerBlock));
  if (!active) return;
  const int64_t offset = codec::VectorOffset(p.dst_rows, vec);
  if (offset < 0) return;
  uint8_t* row = p.dst + offset;
  const uint8_t scale = codec::E8m0ForAmax(amax, p.ceil != 0);
  uint32_t codes;
  if (scale == codec::kE8m0Nan) {
    codes = 0x7F7F7F7Fu;
  } else {
    const int k = 127 - static_cast<int>(scale);
    const bool hw = p.force_software == 0;
    codes = EncodePair(bits[0], bits[1], k, hw) | (EncodePair(bits[2], bits[3], k, hw) << 16);
  }
  uint8_t* out = row + in_vec * 32 + lane * 4;
  for (int j = 0; j < 4; ++j) out[j] = static_cast<uint8_t>(codes >> (8 * j));
  if (lane == 0) {
    row[p.dim + in_vec] = scale;
    if (scale == codec::kE8m0Nan && p.nonfinite_blocks != nullptr)
      atomicAdd(p.nonfinite_blocks, 1ull);
  }
}

template <typename DstT>
__device__ __forceinline__ void StoreValue(DstT* p, float v);
template <>
__device__ __forceinline__ void StoreValue<float>(float* p, float v) { *p = v; }
template <>
__device__ __forceinline__ void StoreValue<uint16_t>(uint16_t* p, float v) {
  *p = codec::Bf16FromFloat(v);
}

template <typename DstT>
__global__ void __launch_bounds__(kCodecThreads) Mxfp8DecodeKernel(Mxfp8DecodeParams p) {
  const int64_t blocks_per_vec = p.dim / 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t block = t / kLanesPerBlock;
  const int lane = static_cast<int>(t % kLanesPerBlock);
  if (block >= p.n_vectors * blocks_per_vec) return;
  const int64_t vec = block / blocks_per_vec;
  const int64_t in_vec = block % blocks_per_vec;
  DstT* out = static_cast<DstT*>(p.dst) + vec * p.dst_stride + in_vec * 32 + lane * 4;
  const int64_t offset = codec::VectorOffset(p.src_rows, vec);
  if (offset < 0) {  // padding row: zeros
    for (int j = 0; j < 4; ++j) StoreValue(out + j, 0.0f);
    return;
  }
  const uint8_t* row = p.src + offset;
  const uint8_t scale = row[p.dim + in_vec];
  const uint8_t* codes = row + in_vec * 32 + lane * 4;
  for (int j = 0; j < 4; ++j) StoreValue(out + j, codec::DecodeElement(codes[j], scale));
  if (lane == 0 && scale == codec::kE8m0Nan && p.nonfinite_blocks != nullptr)
    atomicAdd(p.nonfinite_blocks, 1ull);
}

}  // namespace swa::kernels
