#include "kernels/step/rope_rotate.h"

#include "common/mxfp8_math.h"
#include "common/rope.h"
#include "kernels/common/launch.cuh"

namespace swa::kernels {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float LoadElem(const RopeRotateParams& p, int64_t i) {
  return p.dtype == Dtype::kFp32 ? static_cast<const float*>(p.x)[i]
                                 : codec::Bf16ToFloat(static_cast<const uint16_t*>(p.x)[i]);
}

__device__ __forceinline__ void StoreElem(const RopeRotateParams& p, int64_t i, float v) {
  if (p.dtype == Dtype::kFp32)
    static_cast<float*>(p.x)[i] = v;
  else
    static_cast<uint16_t*>(p.x)[i] = codec::Bf16FromFloat(v);
}

__global__ void __launch_bounds__(kThreads) RopeRotateKernel(RopeRotateParams p) {
  const int32_t pairs = p.rope.dims / 2;
  const int64_t per_token = int64_t(p.heads) * pairs;
  const int64_t total = p.tokens * per_token;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / per_token;
    const int64_t rem = i - t * per_token;
    const int32_t h = static_cast<int32_t>(rem / pairs);
    const uint32_t f = static_cast<uint32_t>(rem - int64_t(h) * pairs);
    uint32_t a, b;
    RopePair(p.rope.style, uint32_t(p.rope.first_dim), uint32_t(p.rope.dims), f, &a, &b);
    const int64_t base = (t * p.heads + h) * int64_t(p.head_dim);
    float x = LoadElem(p, base + a), y = LoadElem(p, base + b), c, s;
    const RopeCs cs = p.rope.TokenRow(t)[f];
    RopeScaled(cs.c, cs.s, p.factor, &c, &s);
    RotatePair(&x, &y, c, p.sign * s);
    StoreElem(p, base + a, x);
    StoreElem(p, base + b, y);
  }
}

}  // namespace

cudaError_t LaunchRopeRotate(const RopeRotateParams& p, cudaStream_t stream) {
  if (p.tokens < 0 || p.heads <= 0 || p.head_dim <= 0 || p.rope.dims <= 0 ||
      (p.tokens > 0 && (p.x == nullptr || p.rope.cos_sin == nullptr)))
    return cudaErrorInvalidValue;
  const int64_t total = p.tokens * p.heads * (p.rope.dims / 2);
  if (total == 0) return cudaSuccess;
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  return Launch(RopeRotateKernel, dim3(static_cast<unsigned>(blocks < 4096 ? blocks : 4096)),
                dim3(kThreads), 0, stream, p);
}

}  // namespace swa::kernels
