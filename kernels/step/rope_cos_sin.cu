// The per-token RoPE table kernel (kernels/step/rope_cos_sin.h). The only
// kernel with sinf/cosf: its file is built without the local-memory check
// (CMakeLists.txt), since their slow path for huge angles keeps a small stack
// array (|angle| < 2^31 here, so it never runs in practice).
#include "kernels/step/rope_cos_sin.h"

#include "kernels/common/launch.cuh"

namespace swa::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) RopeCosSinKernel(RopeCosSinParams p) {
  const int64_t total = int64_t(p.n_tokens) * p.pairs;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / p.pairs;
    const int32_t f = static_cast<int32_t>(i % p.pairs);
    if (p.positions != nullptr) {
      p.table[i] = RopeTableEntry(static_cast<float>(p.positions[t]), p.inv_freq[f]);
      continue;
    }
    const int32_t s = TokenSeq(p.seqs, p.n_seqs, t);
    if (s < 0) continue;
    const PlannedSeq q = p.seqs[s];
    // The CPU step's position of the token (float of q_start + j).
    const int32_t pos = q.q_start + static_cast<int32_t>(t - q.token_offset);
    p.table[i] = RopeTableEntry(static_cast<float>(pos), p.inv_freq[f]);
  }
}

}  // namespace

cudaError_t LaunchRopeCosSin(const RopeCosSinParams& p, cudaStream_t stream) {
  if (p.n_tokens < 0 || p.n_seqs < 0 || p.pairs <= 0 ||
      (p.n_tokens > 0 && ((p.seqs == nullptr && p.positions == nullptr) ||
                          p.inv_freq == nullptr || p.table == nullptr)))
    return cudaErrorInvalidValue;
  const int64_t total = int64_t(p.n_tokens) * p.pairs;
  if (total == 0 || (p.n_seqs == 0 && p.positions == nullptr)) return cudaSuccess;
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  return Launch(RopeCosSinKernel, dim3(static_cast<unsigned>(blocks < 4096 ? blocks : 4096)),
                dim3(kThreads), 0, stream, p);
}

}  // namespace swa::kernels
