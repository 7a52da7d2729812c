// CUDA MXFP8 kernels against the CPU scalar reference, byte for byte: encode
// into ring rows through a row list (with padding rows), both scale modes,
// FP32 and BF16 inputs, hardware and software conversion; decode to FP32 and
// BF16 through the same row list.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "codec/codec.h"
#include "codec/ring_address.h"
#include "kernels/codec/mxfp8_kernels.h"
#include "unit/codec_inputs.h"

namespace swa {
namespace {

bool HaveDevice() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

template <typename T>
T* ToDevice(const std::vector<T>& v) {
  T* d = nullptr;
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), v.size() * sizeof(T) + 1), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return d;
}

template <typename T>
std::vector<T> ToHost(const T* d, size_t n) {
  std::vector<T> v(n);
  EXPECT_EQ(cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

struct Ring {  // a toy ring: 6 slots of R = 10 rows of 2 heads
  static constexpr int kSlots = 6, kR = 10, kHeads = 2;
  uint32_t dim;
  int64_t vec_bytes, row_bytes, slot_bytes;
  explicit Ring(uint32_t d)
      : dim(d), vec_bytes(d + d / 32), row_bytes(kHeads * vec_bytes),
        slot_bytes((kR * row_bytes + 63) / 64 * 64) {}
  codec::RowAddress Address(const int32_t* rows) const {
    codec::RowAddress a;
    a.rows = rows, a.vecs_per_row = kHeads, a.ring_len = kR;
    a.slot_bytes = slot_bytes, a.row_bytes = row_bytes, a.vec_bytes = vec_bytes;
    return a;
  }
};

TEST(CodecGpu, EncodeIntoRingRowsMatchesCpu) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(1);
  const Ring ring(512);
  // Tokens land on scattered ring rows; some entries are -1 (skipped).
  std::vector<int32_t> rows = {3, 17, -1, 59, 0, 42, 25, -1, 11, 38, 50, 9};
  const size_t tokens = rows.size(), n = tokens * Ring::kHeads;
  const std::vector<float> x = test::RandomVectors(rng, n, ring.dim);
  const std::vector<uint16_t> h = test::ToBf16Bits(x);
  const size_t pool_bytes = Ring::kSlots * ring.slot_bytes;
  int32_t* d_rows = ToDevice(rows);
  float* d_x = ToDevice(x);
  uint16_t* d_h = ToDevice(h);
  uint8_t* d_pool = nullptr;
  unsigned long long* d_bad = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_pool), pool_bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_bad), sizeof(unsigned long long)), cudaSuccess);
  for (int variant = 0; variant < 8; ++variant) {
    const bool ceil = variant & 1, bf16 = variant & 2, software = variant & 4;
    ASSERT_EQ(cudaMemset(d_pool, 0xA5, pool_bytes), cudaSuccess);
    ASSERT_EQ(cudaMemset(d_bad, 0, sizeof(unsigned long long)), cudaSuccess);
    kernels::Mxfp8EncodeParams p;
    p.src = bf16 ? static_cast<const void*>(d_h) : d_x;
    p.src_bf16 = bf16, p.src_stride = ring.dim, p.n_vectors = static_cast<int64_t>(n);
    p.dim = static_cast<int32_t>(ring.dim), p.ceil = ceil, p.dst = d_pool;
    p.dst_rows = ring.Address(d_rows), p.nonfinite_blocks = d_bad, p.force_software = software;
    ASSERT_EQ(kernels::LaunchMxfp8Encode(p, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<uint8_t> pool = ToHost(d_pool, pool_bytes);
    // Expected: the CPU reference into a host copy of the same ring.
    std::vector<uint8_t> want(pool_bytes, 0xA5);
    const codec::RowAddress host_addr = ring.Address(rows.data());
    std::vector<int64_t> offsets(n);
    uint64_t want_bad = 0;
    for (size_t i = 0; i < n; ++i) {
      const int64_t off = codec::VectorOffset(host_addr, static_cast<int64_t>(i));
      if (off < 0) continue;
      want_bad += bf16 ? codec::ScalarKernels().mxfp8_encode_bf16(&h[i * ring.dim], ring.dim, ceil,
                                                                  &want[off])
                       : codec::ScalarKernels().mxfp8_encode_f32(&x[i * ring.dim], ring.dim, ceil,
                                                                 &want[off]);
    }
    ASSERT_EQ(pool, want) << "ceil " << ceil << " bf16 " << bf16 << " software " << software;
    EXPECT_EQ(ToHost(d_bad, 1)[0], want_bad);
  }
  cudaFree(d_rows), cudaFree(d_x), cudaFree(d_h), cudaFree(d_pool), cudaFree(d_bad);
}

TEST(CodecGpu, DecodeMatchesCpu) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(2);
  const uint32_t dim = 256;
  const size_t n = 3000, vb = dim + dim / 32;
  std::vector<uint8_t> rows(n * vb);
  for (auto& b : rows) b = static_cast<uint8_t>(rng());  // any bytes
  uint8_t* d_rows = ToDevice(rows);
  for (bool bf16 : {false, true}) {
    const size_t stride = dim + 8, esize = bf16 ? 2 : 4;
    void* d_out = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_out), n * stride * esize), cudaSuccess);
    ASSERT_EQ(cudaMemset(d_out, 0xA5, n * stride * esize), cudaSuccess);
    kernels::Mxfp8DecodeParams p;
    p.src = d_rows, p.src_rows.row_bytes = static_cast<int64_t>(vb);
    p.src_rows.vec_bytes = static_cast<int64_t>(vb);
    p.n_vectors = static_cast<int64_t>(n), p.dim = dim, p.dst = d_out, p.dst_bf16 = bf16;
    p.dst_stride = static_cast<int64_t>(stride);
    ASSERT_EQ(kernels::LaunchMxfp8Decode(p, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint8_t> got(n * stride * esize), want(n * stride * esize, 0xA5);
    ASSERT_EQ(cudaMemcpy(got.data(), d_out, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < n; ++i) {
      uint8_t* o = &want[i * stride * esize];
      if (bf16)
        codec::ScalarKernels().mxfp8_decode_bf16(&rows[i * vb], dim, reinterpret_cast<uint16_t*>(o));
      else
        codec::ScalarKernels().mxfp8_decode_f32(&rows[i * vb], dim, reinterpret_cast<float*>(o));
    }
    ASSERT_EQ(got, want) << "bf16 " << bf16;
    cudaFree(d_out);
  }
  cudaFree(d_rows);
}

TEST(CodecGpu, RejectsBadShapes) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  kernels::Mxfp8EncodeParams p;
  p.dim = 48, p.n_vectors = 1, p.src_stride = 48;
  EXPECT_EQ(kernels::LaunchMxfp8Encode(p, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace swa
