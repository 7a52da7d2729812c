// Encode / load / store row kernels (kernels/step/kv_rows.h).
#include "kernels/step/kv_rows.h"

#include "common/mxfp8_math.h"
#include "kernels/step/ds_mla_block.h"
#include "kernels/step/mxfp8_block.h"
#include "kernels/common/launch.cuh"

namespace swa::kernels {
namespace {

constexpr int kThreads = 256;

// Copies (or zeroes, src == nullptr) n bytes with the threads of one CTA
// slice; 16-byte accesses when both ends allow them.
__device__ void CopyBytes(uint8_t* dst, const uint8_t* src, int64_t n, int64_t tid,
                          int64_t stride) {
  const bool wide = ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src) |
                      static_cast<uintptr_t>(n)) & 15) == 0;
  if (wide) {
    uint4* d = reinterpret_cast<uint4*>(dst);
    const uint4* s = reinterpret_cast<const uint4*>(src);
    for (int64_t i = tid; i < n / 16; i += stride) d[i] = s != nullptr ? s[i] : make_uint4(0, 0, 0, 0);
  } else {
    for (int64_t i = tid; i < n; i += stride) dst[i] = src != nullptr ? src[i] : 0;
  }
}

__device__ __forceinline__ void WriteCodes(uint8_t* dst, const uint8_t* codes) {
  if ((reinterpret_cast<uintptr_t>(dst) & 3) == 0) {
    uint32_t* d = reinterpret_cast<uint32_t*>(dst);
#pragma unroll
    for (int w = 0; w < 8; ++w)
      d[w] = uint32_t(codes[4 * w]) | (uint32_t(codes[4 * w + 1]) << 8) |
             (uint32_t(codes[4 * w + 2]) << 16) | (uint32_t(codes[4 * w + 3]) << 24);
  } else {
#pragma unroll
    for (int j = 0; j < 32; ++j) dst[j] = codes[j];
  }
}

// One thread per 32-element block of one stored vector.
__global__ void __launch_bounds__(kThreads) EncodeKernel(EncodeParams p) {
  const int blocks_per_vec = p.head_dim / 32;
  const int heads_per_token = p.kv_heads * (p.v_new != nullptr ? 2 : 1);
  const int64_t per_token = static_cast<int64_t>(heads_per_token) * blocks_per_vec;
  const int64_t total = static_cast<int64_t>(p.n_tokens) * per_token;
  const int32_t limit =
      p.n_tokens_dev != nullptr ? min(*p.n_tokens_dev, p.n_tokens) : p.n_tokens;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int32_t t = static_cast<int32_t>(i / per_token);
    if (t >= limit) break;
    const int rem = static_cast<int>(i % per_token);
    const int hv = rem / blocks_per_vec;
    const int b = rem % blocks_per_vec;
    const bool is_v = hv >= p.kv_heads;
    const int head = is_v ? hv - p.kv_heads : hv;
    const int64_t elem0 = (int64_t(t) * p.kv_heads + head) * p.head_dim + int64_t(b) * 32;

    uint8_t* row;
    if (p.store_rows != nullptr) {
      const int32_t r = p.store_rows[t];
      if (r < 0) continue;
      row = p.ring.Row(r);
    } else {
      row = p.staging + int64_t(t) * p.bytes_per_token;
    }
    uint8_t* vec = row + int64_t(hv) * p.vec_bytes;

    uint32_t bits[32];
    const void* src = is_v ? p.v_new : p.k_new;
    // A rotated key is FP32 from here on, whatever its source dtype (as on the CPU).
    const bool rotate = !is_v && p.rope.on();
    const int64_t head0 = elem0 - int64_t(b) * 32;
    // The FP32 bits of block `blk` of this vector.
    auto block_bits = [&](int blk, uint32_t* out) {
      if (rotate) {
        // The whole block is rotated first (the NEOX partner of a dim may lie in
        // another block of the vector: it is read from the source), so the
        // block's scale comes from the rotated values.
        const bool fp32 = p.src_dtype == Dtype::kFp32;
        auto load = [&](uint32_t d) -> float {
          return fp32 ? static_cast<const float*>(src)[head0 + d]
                      : codec::Bf16ToFloat(static_cast<const uint16_t*>(src)[head0 + d]);
        };
        RotatedBlockBits(p.rope, uint32_t(blk), p.rope.TokenRow(t), load, out);
      } else if (p.src_dtype == Dtype::kFp32) {
        const float* s = static_cast<const float*>(src) + head0 + int64_t(blk) * 32;
#pragma unroll
        for (int j = 0; j < 32; ++j) out[j] = __float_as_uint(s[j]);
      } else {
        const uint16_t* s = static_cast<const uint16_t*>(src) + head0 + int64_t(blk) * 32;
#pragma unroll
        for (int j = 0; j < 32; ++j) out[j] = uint32_t(s[j]) << 16;
      }
    };
    block_bits(b, bits);

    uint32_t bad;
    if (p.format == Format::kFp8DsMla) {
      // Blocks 0..13 are halves of the 7 NoPE groups: the group's scale needs
      // the other half's amax too (read again here, not shared between
      // threads). Blocks 14 and 15 are the BF16 RoPE part.
      const bool bf16_copy = p.src_dtype == Dtype::kBf16 && !rotate;
      bad = EncodeDsMlaBlock(b, bits, bf16_copy, vec, [&](uint32_t* partner) {
        block_bits(b ^ 1, partner);
      });
    } else if (p.format == Format::kMxfp8) {
      uint8_t codes[32];
      uint8_t scale;
      bad = EncodeMxfp8Block(bits, p.ceil, codes, &scale);
      WriteCodes(vec + b * 32, codes);
      vec[p.head_dim + b] = scale;
    } else if (p.format == Format::kBf16) {
      bad = BlockIsNonFinite(bits);
      uint16_t* d = reinterpret_cast<uint16_t*>(vec) + b * 32;
#pragma unroll
      for (int j = 0; j < 32; ++j)  // a BF16 source is copied as is (NaN payloads kept)
        d[j] = p.src_dtype == Dtype::kBf16 && !rotate ? uint16_t(bits[j] >> 16)
                                         : codec::Bf16FromFloat(__uint_as_float(bits[j]));
    } else {
      bad = BlockIsNonFinite(bits);
      uint32_t* d = reinterpret_cast<uint32_t*>(vec) + b * 32;
#pragma unroll
      for (int j = 0; j < 32; ++j) d[j] = bits[j];
    }
    if (bad != 0 && p.nonfinite != nullptr) atomicAdd(p.nonfinite, 1ull);
  }
}

// grid (n_segments, slices): each segment is contiguous on both sides (the
// planner splits where the ring wraps), so it is one byte range copy.
__global__ void __launch_bounds__(kThreads) LoadKernel(LoadParams p) {
  const RowSegment seg = p.segments[blockIdx.x];
  const int64_t bpt = p.ring.bytes_per_token;
  uint8_t* dst = p.staging + int64_t(seg.dst_row) * bpt;
  const uint8_t* src = seg.src_row >= 0 ? p.ring.Row(seg.src_row) : nullptr;
  CopyBytes(dst, src, int64_t(seg.count) * bpt, int64_t(blockIdx.y) * blockDim.x + threadIdx.x,
            int64_t(gridDim.y) * blockDim.x);
}

__global__ void __launch_bounds__(kThreads) StoreKernel(StoreParams p) {
  const int32_t t = blockIdx.x;
  const int32_t row = p.store_rows[t];
  if (row < 0) return;
  const int64_t bpt = p.ring.bytes_per_token;
  CopyBytes(p.ring.Row(row), p.staged + int64_t(t) * bpt, bpt, threadIdx.x,
            blockDim.x);
}

}  // namespace

cudaError_t LaunchEncodeKv(const EncodeParams& p, cudaStream_t stream) {
  if (p.n_tokens < 0 || p.kv_heads <= 0 || p.head_dim <= 0 || p.head_dim % 32 != 0 ||
      p.k_new == nullptr || uint32_t(p.format) > uint32_t(Format::kFp8DsMla) ||
      (p.format == Format::kFp8DsMla && p.head_dim != int32_t(kDsMlaDim)) ||
      uint32_t(p.src_dtype) > uint32_t(Dtype::kBf16) ||
      (p.store_rows == nullptr && p.staging == nullptr) ||
      (p.store_rows != nullptr && (p.ring.base == nullptr || p.ring.ring_len <= 0)) ||
      (p.rope.on() && (p.rope.cos_sin == nullptr ||
                       p.rope.dims <= 0 || p.rope.dims % 2 != 0 || p.rope.first_dim < 0 ||
                       p.rope.first_dim + p.rope.dims > p.head_dim)))
    return cudaErrorInvalidValue;
  if (p.n_tokens == 0) return cudaSuccess;
  const int64_t heads = int64_t(p.kv_heads) * (p.v_new != nullptr ? 2 : 1);
  const int64_t total = int64_t(p.n_tokens) * heads * (p.head_dim / 32);
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  return Launch(EncodeKernel, dim3(static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16)),
                dim3(kThreads), 0, stream, p);
}

cudaError_t LaunchLoadSection1(const LoadParams& p, cudaStream_t stream) {
  if (p.n_segments < 0 || (p.n_segments > 0 && (p.segments == nullptr || p.staging == nullptr ||
                                                p.ring.ring_len <= 0)))
    return cudaErrorInvalidValue;
  if (p.n_segments == 0) return cudaSuccess;
  return Launch(LoadKernel, dim3(static_cast<unsigned>(p.n_segments), 4), dim3(kThreads), 0, stream,
                p);
}

cudaError_t LaunchStoreRows(const StoreParams& p, cudaStream_t stream) {
  if (p.n_tokens < 0 ||
      (p.n_tokens > 0 && (p.staged == nullptr || p.store_rows == nullptr || p.ring.ring_len <= 0)))
    return cudaErrorInvalidValue;
  if (p.n_tokens == 0) return cudaSuccess;
  return Launch(StoreKernel, dim3(static_cast<unsigned>(p.n_tokens)), dim3(128), 0, stream, p);
}

}  // namespace swa::kernels
