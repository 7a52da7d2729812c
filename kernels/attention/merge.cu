// Merge kernel (kernels/attention/merge.h).
#include "kernels/attention/merge.h"

#include "common/mxfp8_math.h"
#include "common/merge.h"
#include "kernels/common/launch.cuh"

namespace swa::kernels {
namespace {

constexpr int kThreads = 128;

__device__ __forceinline__ float LoadValue(const void* p, Dtype dtype, int64_t i) {
  if (dtype == Dtype::kFp32) return static_cast<const float*>(p)[i];
  return codec::Bf16ToFloat(static_cast<const uint16_t*>(p)[i]);
}

__device__ __forceinline__ void StoreValue(void* p, Dtype dtype, int64_t i, float v) {
  if (dtype == Dtype::kFp32)
    static_cast<float*>(p)[i] = v;
  else
    static_cast<uint16_t*>(p)[i] = codec::Bf16FromFloat(v);
}

__global__ void __launch_bounds__(kThreads) MergeKernel(MergeWork w) {
  for (int64_t r = blockIdx.x; r < w.rows; r += gridDim.x) {
    const MergeWeights mw = MergeOf(w.lse_a[r], w.lse_b[r]);
    const int64_t base = r * int64_t(w.dim);
    for (uint32_t d = threadIdx.x; d < w.dim; d += blockDim.x) {
      const float oa = LoadValue(w.out_a, w.dtype, base + d);
      const float ob = LoadValue(w.out_b, w.dtype, base + d);
      StoreValue(w.out, w.dtype, base + d, MergeValue(mw, oa, ob));
    }
    __syncthreads();  // every thread has read the row's LSEs
    if (threadIdx.x == 0 && w.lse != nullptr) w.lse[r] = mw.lse;
    __syncthreads();
  }
}

}  // namespace

cudaError_t LaunchMerge(const MergeWork& w, cudaStream_t stream) {
  if (w.rows < 0 || w.dim == 0 || w.out_a == nullptr || w.out_b == nullptr ||
      w.lse_a == nullptr || w.lse_b == nullptr || w.out == nullptr)
    return cudaErrorInvalidValue;
  if (w.rows == 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>(w.rows < 65535 * 16 ? w.rows : 65535 * 16);
  return Launch(MergeKernel, dim3(grid), dim3(kThreads), 0, stream, w);
}

}  // namespace swa::kernels
