// The CUDA step encoder (kernels/step/kv_rows.h) against the CPU codec, byte
// for byte: every storage format, FP32 and BF16 inputs, both scale modes,
// into ring rows named by a row list with skipped (-1) entries, K and V
// vectors of two heads per token, and the non-finite block count.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "codec/codec.h"
#include "common/records.h"
#include "kernels/step/kv_rows.h"
#include "unit/codec_inputs.h"

namespace swa {
namespace {

bool HaveDevice() {
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  cudaGetLastError();
  return ok;
}

template <typename T>
T* ToDevice(const std::vector<T>& v) {
  T* d = nullptr;
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), v.size() * sizeof(T) + 1), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return d;
}

TEST(CodecGpu, StepEncoderMatchesCpuCodec) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device on this machine";
  constexpr int kSlots = 6, kR = 10, kHeads = 2;
  const uint32_t dim = 512;
  std::mt19937 rng(1);
  const std::vector<int32_t> rows = {3, 17, -1, 59, 0, 42, 25, -1, 11, 38, 50, 9};
  const size_t tokens = rows.size(), n = tokens * kHeads;  // K of each head, then V
  std::vector<float> x = test::RandomVectors(rng, n * 2, dim);
  x[7 * dim + 7] = std::nanf("");  // one non-finite block (token 3, head 1, K)
  const std::vector<uint16_t> h = test::ToBf16Bits(x);
  int32_t* d_rows = ToDevice(rows);
  float* d_x = ToDevice(x);
  uint16_t* d_h = ToDevice(h);
  unsigned long long* d_bad = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_bad), sizeof(unsigned long long)), cudaSuccess);
  for (Format format : {Format::kMxfp8, Format::kBf16, Format::kFp32}) {
    const uint32_t vb = VectorBytes(format, dim);
    const uint32_t bpt = 2 * kHeads * vb;
    const uint64_t slot_bytes = (uint64_t{kR} * bpt + 63) / 64 * 64;
    const size_t pool_bytes = kSlots * slot_bytes;
    uint8_t* d_pool = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_pool), pool_bytes), cudaSuccess);
    for (int variant = 0; variant < 4; ++variant) {
      const bool ceil = variant & 1, bf16 = variant & 2;
      ASSERT_EQ(cudaMemset(d_pool, 0xA5, pool_bytes), cudaSuccess);
      ASSERT_EQ(cudaMemset(d_bad, 0, sizeof(unsigned long long)), cudaSuccess);
      const void* src = bf16 ? static_cast<const void*>(d_h) : d_x;
      const size_t half = n * dim * (bf16 ? 2 : 4);  // K, then V
      kernels::EncodeParams p;
      p.k_new = src;
      p.v_new = static_cast<const uint8_t*>(src) + half;
      p.src_dtype = bf16 ? Dtype::kBf16 : Dtype::kFp32;
      p.n_tokens = int32_t(tokens);
      p.kv_heads = kHeads;
      p.head_dim = int32_t(dim);
      p.format = format;
      p.ceil = ceil;
      p.vec_bytes = vb;
      p.bytes_per_token = bpt;
      p.store_rows = d_rows;
      p.ring = RingRows{d_pool, slot_bytes, bpt, kR};
      p.nonfinite = d_bad;
      ASSERT_EQ(kernels::LaunchEncodeKv(p, nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<uint8_t> got(pool_bytes), want(pool_bytes, 0xA5);
      ASSERT_EQ(cudaMemcpy(got.data(), d_pool, pool_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
      // Expected: the CPU codec into a host copy of the same ring.
      const RingRows host_ring{want.data(), slot_bytes, bpt, kR};
      uint64_t want_bad = 0;
      for (size_t t = 0; t < tokens; ++t) {
        if (rows[t] < 0) continue;
        uint8_t* row = host_ring.Row(rows[t]);
        for (int kv = 0; kv < 2; ++kv) {
          const size_t first = kv * n + t * kHeads;  // vector index of (kv, t, head 0)
          const codec::ConstVectors in = {
              bf16 ? static_cast<const void*>(&h[first * dim]) : &x[first * dim],
              bf16 ? Dtype::kBf16 : Dtype::kFp32, dim};
          want_bad += codec::EncodeRowsWith(
              codec::ScalarKernels(), format, ceil ? ScaleMode::kCeil : ScaleMode::kFloor, dim,
              kHeads, in, {.base = row + size_t(kv) * kHeads * vb, .stride = vb});
        }
      }
      ASSERT_EQ(got, want) << "format " << int(format) << " ceil " << ceil << " bf16 " << bf16;
      unsigned long long bad = 0;
      ASSERT_EQ(cudaMemcpy(&bad, d_bad, sizeof bad, cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(bad, want_bad);
    }
    cudaFree(d_pool);
  }
  cudaFree(d_rows), cudaFree(d_x), cudaFree(d_h), cudaFree(d_bad);
}

TEST(CodecGpu, StepEncoderRejectsBadShapes) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device on this machine";
  kernels::EncodeParams p;
  p.head_dim = 48, p.kv_heads = 1, p.n_tokens = 1;
  EXPECT_EQ(kernels::LaunchEncodeKv(p, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace swa
