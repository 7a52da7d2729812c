// Two kernels: a one-block scan of seqlen_q (validating every sequence), then
// one warp per index row. The per-token arithmetic is src/common/index_math.h,
// the same code the host planner runs.
#include "kernels/plan/decode_plan.h"

#include <limits.h>

#include "common/index_math.h"
#include "kernels/common/launch.cuh"

namespace swa::kernels {
namespace {

constexpr int kScanThreads = 1024;
constexpr int kRowThreads = 256;  // 8 warps, one index row each
constexpr unsigned kFullMask = 0xffffffffu;

__device__ bool SeqIsValid(const DecodePlanParams& p, int i) {
  const int32_t q = p.batch.seqlen_q[i];
  const int32_t k = p.batch.seqlen_k[i];
  const int32_t v = p.batch.valid_start != nullptr ? p.batch.valid_start[i] : 0;
  return q >= 0 && q <= k && q <= p.ring_len - p.window + 1 && v >= 0 && v <= k - q &&
         p.batch.slot[i] < static_cast<uint32_t>(p.max_slots);
}

__global__ void ScanKernel(DecodePlanParams p) {
  __shared__ int32_t warp_sums[kScanThreads / 32];
  __shared__ int32_t carry;
  __shared__ int32_t first_bad;
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  if (tid == 0) {
    carry = 0;
    first_bad = INT_MAX;
  }
  __syncthreads();
  for (int base = 0; base < p.batch.n_seqs; base += kScanThreads) {
    const int i = base + tid;
    int32_t q = 0;
    if (i < p.batch.n_seqs) {
      if (SeqIsValid(p, i))
        q = p.batch.seqlen_q[i];
      else
        atomicMin(&first_bad, i);
    }
    int32_t x = q;  // inclusive scan within the warp
    for (int off = 1; off < 32; off <<= 1) {
      const int32_t y = __shfl_up_sync(kFullMask, x, off);
      if (lane >= off) x += y;
    }
    if (lane == 31) warp_sums[warp] = x;
    __syncthreads();
    if (warp == 0) {
      int32_t s = warp_sums[lane];
      for (int off = 1; off < 32; off <<= 1) {
        const int32_t y = __shfl_up_sync(kFullMask, s, off);
        if (lane >= off) s += y;
      }
      warp_sums[lane] = s;  // inclusive over warps
    }
    __syncthreads();
    const int32_t before = (warp > 0 ? warp_sums[warp - 1] : 0) + carry;
    if (i < p.batch.n_seqs) p.cu_seqlens[i] = before + x - q;
    __syncthreads();
    if (tid == kScanThreads - 1) carry = before + x;
    __syncthreads();
  }
  if (tid == 0) {
    p.cu_seqlens[p.batch.n_seqs] = carry;
    int32_t err = kDecodePlanOk;
    if (first_bad != INT_MAX)
      err = first_bad + 1;
    else if (carry > p.max_tokens)
      err = kDecodePlanTooManyTokens;
    *p.error = err;
  }
}

__global__ void RowKernel(DecodePlanParams p) {
  const int lane = threadIdx.x & 31;
  const int32_t t = blockIdx.x * (kRowThreads / 32) + (threadIdx.x >> 5);
  if (t >= p.max_tokens) return;
  const int32_t n_tokens = *p.error == kDecodePlanOk ? p.cu_seqlens[p.batch.n_seqs] : 0;
  int32_t* row = p.index != nullptr ? p.index + static_cast<int64_t>(t) * p.window : nullptr;
  if (t >= n_tokens) {
    if (lane == 0) {
      p.offset_len[2 * t] = 0;
      p.offset_len[2 * t + 1] = 0;
    }
    const int32_t pad = p.pad_last_row ? 0 : -1;  // row 0 always exists
    if (row != nullptr)
      for (int j = lane; j < p.window; j += 32) row[j] = pad;
    return;
  }
  // Last sequence whose first token is <= t (it has t among its tokens).
  int lo = 0, hi = p.batch.n_seqs;  // invariant: cu[lo] <= t < cu[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (p.cu_seqlens[mid] <= t)
      lo = mid;
    else
      hi = mid;
  }
  const int i = lo;
  const uint32_t slot = p.batch.slot[i];
  const int32_t q_start = p.batch.seqlen_k[i] - p.batch.seqlen_q[i];
  const int32_t v = p.batch.valid_start != nullptr ? p.batch.valid_start[i] : 0;
  const int32_t pos = q_start + (t - p.cu_seqlens[i]);
  const plan::TokenGather g = plan::DecodeGather(slot, pos, v, p.window, p.ring_len);
  const int32_t slot_base = static_cast<int32_t>(slot) * p.ring_len;
  if (lane == 0) {
    p.offset_len[2 * t] = g.first_row;
    p.offset_len[2 * t + 1] = g.len;
  }
  if (row == nullptr) return;
  const int32_t pad =
      p.pad_last_row ? plan::LastGatherRow(slot_base, g.first_row, g.len, p.ring_len) : -1;
  for (int j = lane; j < p.window; j += 32)
    row[j] = plan::IndexEntry(slot_base, g.first_row, g.len, j, p.ring_len, pad);
}

}  // namespace

cudaError_t LaunchDecodePlan(const DecodePlanParams& p, cudaStream_t stream) {
  const bool has_seqs = p.batch.n_seqs == 0 || (p.batch.slot != nullptr && p.batch.seqlen_q != nullptr &&
                                          p.batch.seqlen_k != nullptr);
  if (p.batch.n_seqs < 0 || p.max_tokens < 0 || p.window < 1 || p.ring_len < p.window ||
      p.max_slots < 1 || !has_seqs || p.cu_seqlens == nullptr || p.error == nullptr ||
      (p.offset_len == nullptr && p.max_tokens > 0) ||
      static_cast<int64_t>(p.max_slots) * p.ring_len > INT_MAX ||
      static_cast<int64_t>(p.max_tokens) * p.window > INT_MAX)
    return cudaErrorInvalidValue;
  cudaError_t e = Launch(ScanKernel, dim3(1), dim3(kScanThreads), 0, stream, p);
  if (e == cudaSuccess && p.max_tokens > 0) {
    const int rows_per_block = kRowThreads / 32;
    const int blocks = (p.max_tokens + rows_per_block - 1) / rows_per_block;
    e = Launch(RowKernel, dim3(blocks), dim3(kRowThreads), 0, stream, p);
  }
  return e;
}

}  // namespace swa::kernels
