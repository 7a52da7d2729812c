// Staged path (prefill, chunked prefill, mixed batches): keys from section 1
// (loaded history) and section 2 (the step's new vectors) of the staging buffer.
#include "kernels/attention/attention_dispatch.cuh"

namespace swa::kernels {

cudaError_t LaunchPrefillAttention(const AttentionParams& p, cudaStream_t stream) {
  return LaunchAttention<true>(p, stream);
}

}  // namespace swa::kernels
