// Ring-only path (decode, speculative verify): keys read straight from the ring.
#include "kernels/attention/attention_dispatch.cuh"

namespace swa::kernels {

cudaError_t LaunchDecodeAttention(const AttentionParams& p, cudaStream_t stream) {
  return LaunchAttention<false>(p, stream);
}

}  // namespace swa::kernels
