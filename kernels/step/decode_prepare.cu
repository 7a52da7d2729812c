#include "kernels/step/decode_prepare.h"
#include "kernels/common/launch.cuh"

namespace swa::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void PrepareSeqs(DecodePrepareParams p) {
  const int i = blockIdx.x * kThreads + threadIdx.x;
  if (i >= p.batch.n_seqs) return;
  const bool ok = *p.error == 0;
  PlannedSeq s;
  s.slot = p.batch.slot[i];
  s.seqlen_k = p.batch.seqlen_k[i];
  s.seqlen_q = ok ? p.batch.seqlen_q[i] : 0;
  s.q_start = p.batch.seqlen_k[i] - p.batch.seqlen_q[i];
  s.valid_start = p.batch.valid_start != nullptr ? p.batch.valid_start[i] : 0;
  s.token_offset = ok ? p.cu_seqlens[i] : 0;
  p.seqs[i] = s;
}

__global__ void PrepareRows(DecodePrepareParams p) {
  const int32_t t = blockIdx.x * kThreads + threadIdx.x;
  if (t >= p.max_tokens) return;
  const int32_t n_tokens = *p.error == 0 ? p.cu_seqlens[p.batch.n_seqs] : 0;
  if (t >= n_tokens) {
    p.store_rows[t] = -1;
    return;
  }
  int lo = 0, hi = p.batch.n_seqs;  // cu[lo] <= t < cu[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (p.cu_seqlens[mid] <= t) lo = mid; else hi = mid;
  }
  const int32_t pos = p.batch.seqlen_k[lo] - p.batch.seqlen_q[lo] + (t - p.cu_seqlens[lo]);
  p.store_rows[t] = static_cast<int32_t>(p.batch.slot[lo]) * p.ring_len + pos % p.ring_len;
}

}  // namespace

cudaError_t LaunchDecodePrepare(const DecodePrepareParams& p, cudaStream_t stream) {
  if (p.batch.n_seqs < 0 || p.max_tokens < 0 || p.ring_len <= 0 || p.cu_seqlens == nullptr ||
      p.error == nullptr || (p.batch.n_seqs > 0 && (p.batch.slot == nullptr || p.batch.seqlen_q == nullptr ||
                                              p.batch.seqlen_k == nullptr || p.seqs == nullptr)) ||
      (p.max_tokens > 0 && p.store_rows == nullptr))
    return cudaErrorInvalidValue;
  cudaError_t e = cudaSuccess;
  if (p.batch.n_seqs > 0)
    e = Launch(PrepareSeqs, dim3((p.batch.n_seqs + kThreads - 1) / kThreads), dim3(kThreads), 0,
               stream, p);
  if (e == cudaSuccess && p.max_tokens > 0)
    e = Launch(PrepareRows, dim3((p.max_tokens + kThreads - 1) / kThreads), dim3(kThreads), 0,
               stream, p);
  return e;
}

}  // namespace swa::kernels
