// Ring-only path (decode, speculative verify): keys read straight from the ring.
#include "kernels/attention/attention_dispatch.cuh"

namespace swa::kernels {

bool AttentionHeadDimSupported(int head_dim) {
  return head_dim == 64 || head_dim == 128 || head_dim == 256 || head_dim == 512;
}

cudaError_t LaunchDecodeAttention(const AttentionParams& p, cudaStream_t stream) {
  return LaunchAttention<false>(p, stream);
}

}  // namespace swa::kernels
