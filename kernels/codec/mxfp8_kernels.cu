// Launchers for the MXFP8 kernels (kernels/codec/mxfp8_kernels.cuh).
#include "kernels/codec/mxfp8_kernels.cuh"

namespace swa::kernels {
namespace {

unsigned GridFor(int64_t n_vectors, int32_t dim) {
  const int64_t threads = n_vectors * (dim / 32) * kLanesPerBlock;
  return static_cast<unsigned>((threads + kCodecThreads - 1) / kCodecThreads);
}

bool BadShape(int64_t n_vectors, int32_t dim) {
  return dim <= 0 || dim % 32 != 0 || n_vectors < 0 ||
         n_vectors * (dim / 32) * kLanesPerBlock / kCodecThreads >= (int64_t{1} << 31);
}

}  // namespace

cudaError_t LaunchMxfp8Encode(const Mxfp8EncodeParams& p, cudaStream_t stream) {
  if (BadShape(p.n_vectors, p.dim) || p.src_stride < p.dim) return cudaErrorInvalidValue;
  if (p.n_vectors == 0) return cudaSuccess;
  if (p.src == nullptr || p.dst == nullptr) return cudaErrorInvalidValue;
  const unsigned grid = GridFor(p.n_vectors, p.dim);
  if (p.src_bf16 != 0)
    Mxfp8EncodeKernel<uint16_t><<<grid, kCodecThreads, 0, stream>>>(p);
  else
    Mxfp8EncodeKernel<float><<<grid, kCodecThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t LaunchMxfp8Decode(const Mxfp8DecodeParams& p, cudaStream_t stream) {
  if (BadShape(p.n_vectors, p.dim) || p.dst_stride < p.dim) return cudaErrorInvalidValue;
  if (p.n_vectors == 0) return cudaSuccess;
  if (p.src == nullptr || p.dst == nullptr) return cudaErrorInvalidValue;
  const unsigned grid = GridFor(p.n_vectors, p.dim);
  if (p.dst_bf16 != 0)
    Mxfp8DecodeKernel<uint16_t><<<grid, kCodecThreads, 0, stream>>>(p);
  else
    Mxfp8DecodeKernel<float><<<grid, kCodecThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace swa::kernels
