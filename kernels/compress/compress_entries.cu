#include "kernels/compress/compress_entries.h"

#include <math.h>

#include "common/compress_entry.h"
#include "common/mxfp8_math.h"
#include "common/rope.h"
#include "kernels/common/launch.cuh"

namespace swa::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kStoreThreads = 256;


// Where slot j of window `w` reads its kv and gate values; kv == nullptr: a
// missing slot (zero weight). The order of the slots is the CPU backend's.
__device__ __forceinline__ CompressSlotSrc SlotOf(const CompressEntriesParams& p,
                                                  const CompressWindowDev& w, int32_t j) {
  CompressSlotSrc s{nullptr, nullptr, false, false};
  if (j < w.n_missing) return s;
  if (j < w.n_missing + w.n_ring) {
    const int32_t row = (w.ring_row + (j - w.n_missing)) % p.geometry.ring_len;
    const uint8_t* r = p.ring_base + uint64_t(w.slot) * p.slot_bytes + uint64_t(row) * p.row_bytes;
    s.kv = r;
    s.gate = r + size_t(p.row_values) * (p.ring_bf16 ? 2 : 4);
    s.bf16 = p.ring_bf16;
    return s;
  }
  const int64_t t = int64_t(w.new_row) + (j - w.n_missing - w.n_ring);
  const size_t in_row = size_t(p.row_values) * (p.in_bf16 ? 2 : 4);
  s.kv = static_cast<const uint8_t*>(p.kv) + t * in_row;
  s.gate = static_cast<const uint8_t*>(p.gate) + t * in_row;
  s.bf16 = p.in_bf16;
  s.round_bf16 = p.ring_bf16 && !p.in_bf16;  // as the ring would keep the row
  return s;
}

__device__ __forceinline__ float SlotLogit(const CompressEntriesParams& p,
                                           const CompressSlotSrc& s, int32_t j, uint32_t f) {
  uint32_t vi;
  int32_t br;
  CompressSlotIndex(p.geometry, uint32_t(p.entry_dim), j, f, &vi, &br);
  return __fadd_rn(CompressSlotValue(s, s.gate, vi),
                   p.position_bias[size_t(br) * uint32_t(p.row_values) + vi]);
}

// Feature f of the pooled entry in the CPU's three passes (max, sum of the
// exponentials, weighted sum), each slot's source recomputed per pass: a
// window has up to 2 * 65536 slots, more than a block could stage.
__device__ float PoolFeature(const CompressEntriesParams& p, const CompressWindowDev& w,
                             uint32_t f) {
  const int32_t n = CompressWindowSlots(p.geometry);
  float mx = -INFINITY;
  for (int32_t j = w.n_missing; j < n; ++j) {
    const float l = SlotLogit(p, SlotOf(p, w, j), j, f);
    mx = l > mx ? l : mx;
  }
  float sum = 0.0f;
  for (int32_t j = w.n_missing; j < n; ++j)
    sum = __fadd_rn(sum, expf(__fsub_rn(SlotLogit(p, SlotOf(p, w, j), j, f), mx)));
  float acc = 0.0f;
  for (int32_t j = w.n_missing; j < n; ++j) {
    const CompressSlotSrc s = SlotOf(p, w, j);
    uint32_t vi;
    int32_t br;
    CompressSlotIndex(p.geometry, uint32_t(p.entry_dim), j, f, &vi, &br);
    const float wgt = __fdiv_rn(expf(__fsub_rn(SlotLogit(p, s, j, f), mx)), sum);
    acc = __fadd_rn(acc, __fmul_rn(CompressSlotValue(s, s.kv, vi), wgt));
  }
  return acc;
}

__device__ float BlockSum(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float t = 0.0f;
  if (warp == 0) {
    t = lane < int(blockDim.x >> 5) ? red[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
    if (lane == 0) red[0] = t;
  }
  __syncthreads();
  t = red[0];
  __syncthreads();  // red is reused by the next window
  return t;
}

__global__ void __launch_bounds__(kThreads) CompressEntriesKernel(CompressEntriesParams p) {
  extern __shared__ float x[];  // [entry_dim]
  __shared__ float red[kThreads / 32];
  const uint32_t d = uint32_t(p.entry_dim);
  for (int32_t k = blockIdx.x; k < p.n_windows; k += gridDim.x) {
    const CompressWindowDev w = p.windows[k];
    float ss = 0.0f;
    for (uint32_t f = threadIdx.x; f < d; f += blockDim.x) {
      const float v = PoolFeature(p, w, f);
      x[f] = v;
      ss = __fadd_rn(ss, __fmul_rn(v, v));
    }
    const float total = BlockSum(ss, red);  // also orders the x[] writes before the reads below
    const float r = 1.0f / sqrtf(__fadd_rn(__fdiv_rn(total, float(d)), p.norm_eps));
    for (uint32_t f = threadIdx.x; f < d; f += blockDim.x)
      x[f] = __fmul_rn(p.norm_weight[f], __fmul_rn(x[f], r));
    __syncthreads();
    if (p.rope_dims > 0) {
      const uint32_t first = d - uint32_t(p.rope_dims);
      for (int32_t i = threadIdx.x; i < p.rope_dims / 2; i += blockDim.x) {
        const RopeCs cs = p.rope_table[size_t(k) * uint32_t(p.rope_dims / 2) + i];
        float c, s;
        RopeScaled(cs.c, cs.s, p.attention_factor, &c, &s);
        RotatePair(&x[first + 2 * i], &x[first + 2 * i + 1], c, s);
      }
      __syncthreads();
    }
    const size_t base = size_t(k) * d;
    for (uint32_t f = threadIdx.x; f < d; f += blockDim.x) {
      if (p.out_bf16)
        static_cast<uint16_t*>(p.out)[base + f] = codec::Bf16FromFloat(x[f]);
      else
        static_cast<float*>(p.out)[base + f] = x[f];
    }
    __syncthreads();  // x[] is reused by the next window
  }
}

// One block per store segment: its rows' kv and gate values into the ring, in
// the ring's format (BF16 rounded to nearest even, as the CPU backend stores).
__global__ void __launch_bounds__(kStoreThreads) CompressStoreKernel(CompressEntriesParams p) {
  const RowSegment seg = p.store[blockIdx.x];
  const uint32_t L = uint32_t(p.geometry.ring_len), rv = uint32_t(p.row_values);
  const int64_t per_row = 2 * int64_t(rv);
  const int64_t total = int64_t(seg.count) * per_row;
  const size_t half = size_t(rv) * (p.ring_bf16 ? 2 : 4);
  for (int64_t i = threadIdx.x; i < total; i += blockDim.x) {
    const int32_t c = int32_t(i / per_row);
    const int64_t rem = i - int64_t(c) * per_row;
    const int h = rem >= rv ? 1 : 0;
    const uint32_t v = uint32_t(rem - int64_t(h) * rv);
    const uint32_t flat = uint32_t(seg.dst_row + c);
    uint8_t* dst = p.ring_base + uint64_t(flat / L) * p.slot_bytes +
                   uint64_t(flat % L) * p.row_bytes + size_t(h) * half;
    const int64_t t = int64_t(seg.src_row) + c;
    const uint8_t* src = static_cast<const uint8_t*>(h == 0 ? p.kv : p.gate) +
                         t * int64_t(rv) * (p.in_bf16 ? 2 : 4);
    if (p.ring_bf16 && p.in_bf16) {  // the same bits
      reinterpret_cast<uint16_t*>(dst)[v] = reinterpret_cast<const uint16_t*>(src)[v];
    } else if (p.ring_bf16) {  // FP32 in: rounded to nearest even
      reinterpret_cast<uint16_t*>(dst)[v] = codec::Bf16FromFloat(CompressLoad(src, false, v));
    } else {
      reinterpret_cast<float*>(dst)[v] = CompressLoad(src, p.in_bf16, v);
    }
  }
}

}  // namespace

cudaError_t LaunchCompressStep(const CompressEntriesParams& p, cudaStream_t stream) {
  if (p.entry_dim <= 0 || p.row_values <= 0 || p.geometry.ring_len <= 0 || p.geometry.rate <= 0 ||
      p.n_windows < 0 || p.n_store < 0 || p.rope_dims < 0 || p.rope_dims > p.entry_dim ||
      (p.n_windows > 0 && (p.windows == nullptr || p.out == nullptr || p.norm_weight == nullptr ||
                           p.position_bias == nullptr)) ||
      (p.n_windows > 0 && p.rope_dims > 0 && p.rope_table == nullptr) ||
      (p.n_store > 0 && (p.store == nullptr || p.kv == nullptr || p.gate == nullptr)) ||
      ((p.n_windows > 0 || p.n_store > 0) && p.ring_base == nullptr))
    return cudaErrorInvalidValue;
  if (p.n_windows > 0) {
    const int32_t blocks = p.n_windows < 65535 ? p.n_windows : 65535;
    const cudaError_t e = Launch(CompressEntriesKernel, dim3(unsigned(blocks)), dim3(kThreads),
                                 CompressEntriesSmem(p.entry_dim), stream, p);
    if (e != cudaSuccess) return e;
  }
  if (p.n_store > 0)
    return Launch(CompressStoreKernel, dim3(unsigned(p.n_store)), dim3(kStoreThreads), 0, stream,
                  p);
  return cudaSuccess;
}

}  // namespace swa::kernels
