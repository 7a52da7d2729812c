// swa_attention_merge on the CUDA backend against the CPU backend (itself
// checked against FP64 and for its NaN/Inf rules in tests/api/merge*_test.cc),
// on identical inputs: random rows with NaN, +-inf and far-apart LSEs, NaN
// garbage in empty parts and an occasional NaN or Inf in an output. Both
// backends share MergeOf (src/common/merge.h), so every NaN must sit in the
// same place; values agree to the two expf/logf implementations' rounding.
// Without a cache (device 0, on a stream of the test's) the CUDA merge gives
// the cached one's bits.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "api/merge_util.h"
#include "gpu/gpu_test_util.h"
#include "gtest/gtest.h"
#include "swacache.h"

namespace {

using swa_gpu::DeviceBuffer;

swa_cache_t* CudaCache() {
  swa_layer_desc_t l;
  swa_layer_desc_init(&l);
  swa_config_t c;
  swa_config_init(&c);
  c.window = 8, c.max_slots = 1, c.backend = SWA_BACKEND_CUDA, c.num_layers = 1, c.layers = &l;
  swa_cache_t* cache = nullptr;
  EXPECT_EQ(swa_cache_create(&c, &cache), SWA_OK) << swa_last_error();
  return cache;
}

float Value(const std::vector<uint8_t>& o, swa_dtype_t dtype, size_t i) {
  if (dtype == SWA_DTYPE_FP32) {
    float f;
    std::memcpy(&f, &o[4 * i], 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, &o[2 * i], 2);
  return swa_test::Bf16Value(h);
}

bool Close(float cuda, float cpu, swa_dtype_t dtype) {
  if (std::isnan(cpu) || std::isnan(cuda)) return std::isnan(cpu) && std::isnan(cuda);
  if (std::isinf(cpu) || std::isinf(cuda)) return cpu == cuda;
  // BF16: one step of 2^-8 relative where the FP32 values straddle a rounding point.
  const float tol = dtype == SWA_DTYPE_FP32 ? 2e-6f : 8e-3f;
  return std::fabs(cuda - cpu) <= tol * std::max(1.0f, std::fabs(cpu));
}

class CudaMerge : public ::testing::TestWithParam<swa_dtype_t> {};

TEST_P(CudaMerge, MatchesTheCpuBackendWithNaNAndInfinities) {
  SWA_SKIP_WITHOUT_DEVICE();
  const swa_dtype_t dtype = GetParam();
  const size_t elem = dtype == SWA_DTYPE_FP32 ? 4 : 2;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const int rows = 2085, d = 64;
  const size_t n = size_t(rows) * d;
  std::mt19937_64 rng(31);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> a(n), b(n), la(rows), lb(rows);
  for (size_t i = 0; i < n; ++i) {
    a[i] = rng() % 200 == 0 ? (rng() % 2 ? nan : inf) : u(rng);
    b[i] = rng() % 200 == 0 ? (rng() % 2 ? nan : -inf) : u(rng);
  }
  const float specials[] = {nan, inf, -inf, -inf};
  for (int r = 0; r < rows; ++r) {
    la[r] = rng() % 4 == 0 ? specials[rng() % 4] : 6 * u(rng);
    lb[r] = rng() % 4 == 0 ? specials[rng() % 4] : 6 * u(rng);
    if (r % 11 == 3 && std::isfinite(la[r])) lb[r] = la[r] + 200;  // A's weight underflows
    if (r % 13 == 7) lb[r] = la[r];
    if (la[r] == -inf) std::fill_n(&a[size_t(r) * d], d, nan);  // never read
    if (lb[r] == -inf) std::fill_n(&b[size_t(r) * d], d, nan);
  }
  std::vector<uint8_t> ha(n * elem), hb(n * elem);
  for (size_t i = 0; i < n; ++i) {
    if (dtype == SWA_DTYPE_FP32) {
      std::memcpy(&ha[4 * i], &a[i], 4), std::memcpy(&hb[4 * i], &b[i], 4);
    } else {
      const uint16_t x = swa_test::RoundToBf16(a[i]), y = swa_test::RoundToBf16(b[i]);
      std::memcpy(&ha[2 * i], &x, 2), std::memcpy(&hb[2 * i], &y, 2);
    }
  }

  swa_cache_t* cpu = swa_test::MergeCache(2);
  std::vector<uint8_t> cpu_out(n * elem);
  std::vector<float> cpu_lse(rows);
  ASSERT_EQ(swa_test::RunMerge(cpu, rows, d, dtype, ha.data(), la.data(), hb.data(), lb.data(),
                               cpu_out.data(), cpu_lse.data()),
            SWA_OK)
      << swa_last_error();
  swa_cache_destroy(cpu);

  swa_cache_t* cuda = CudaCache();
  ASSERT_NE(cuda, nullptr);
  DeviceBuffer da(n * elem), db(n * elem), dla(rows * 4), dlb(rows * 4), dout(n * elem),
      dlse(rows * 4);
  da.Upload(ha.data(), ha.size()), db.Upload(hb.data(), hb.size());
  dla.Upload(la.data(), rows * 4), dlb.Upload(lb.data(), rows * 4);
  CUDA_ASSERT(cudaMemset(dout.get(), 0x7F, n * elem));  // poison
  CUDA_ASSERT(cudaMemset(dlse.get(), 0x7F, rows * 4));
  ASSERT_EQ(swa_test::RunMerge(cuda, rows, d, dtype, da.get(), static_cast<const float*>(dla.get()),
                               db.get(), static_cast<const float*>(dlb.get()), dout.get(),
                               static_cast<float*>(dlse.get())),
            SWA_OK)
      << swa_last_error();
  CUDA_ASSERT(cudaDeviceSynchronize());
  std::vector<uint8_t> cuda_out(n * elem);
  std::vector<float> cuda_lse(rows);
  dout.Download(cuda_out.data(), cuda_out.size());
  dlse.Download(cuda_lse.data(), rows * 4);
  swa_cache_destroy(cuda);

  // No cache: device 0, the test's stream; poison again first.
  CUDA_ASSERT(cudaMemset(dout.get(), 0x7F, n * elem));
  CUDA_ASSERT(cudaMemset(dlse.get(), 0x7F, rows * 4));
  cudaStream_t stream;
  CUDA_ASSERT(cudaStreamCreate(&stream));
  swa_merge_args_t m;
  swa_merge_args_init(&m);
  m.rows = rows, m.head_dim = d, m.dtype = dtype, m.out_a = da.get();
  m.lse_a = static_cast<const float*>(dla.get()), m.out_b = db.get();
  m.lse_b = static_cast<const float*>(dlb.get()), m.out = dout.get();
  m.lse = static_cast<float*>(dlse.get()), m.stream = stream, m.device = 0;
  ASSERT_EQ(swa_attention_merge(nullptr, &m), SWA_OK) << swa_last_error();
  CUDA_ASSERT(cudaStreamSynchronize(stream));
  CUDA_ASSERT(cudaStreamDestroy(stream));
  std::vector<uint8_t> nocache_out(n * elem);
  std::vector<float> nocache_lse(rows);
  dout.Download(nocache_out.data(), nocache_out.size());
  dlse.Download(nocache_lse.data(), rows * 4);
  EXPECT_EQ(nocache_out, cuda_out) << "the cache-less merge differs from the cached one";
  EXPECT_EQ(0, std::memcmp(nocache_lse.data(), cuda_lse.data(), rows * 4));

  int bad = 0;
  for (int r = 0; r < rows && bad < 5; ++r) {
    bool ok = Close(cuda_lse[r], cpu_lse[r], SWA_DTYPE_FP32);
    if (std::isnan(la[r]) || std::isnan(lb[r])) ok = ok && std::isnan(cuda_lse[r]);
    for (int i = 0; i < d; ++i) {
      const size_t k = size_t(r) * d + i;
      ok = ok && Close(Value(cuda_out, dtype, k), Value(cpu_out, dtype, k), dtype);
    }
    if (!ok && ++bad)
      ADD_FAILURE() << "row " << r << ": lse_a " << la[r] << ", lse_b " << lb[r] << " -> CUDA lse "
                    << cuda_lse[r] << ", CPU lse " << cpu_lse[r];
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaMerge, ::testing::Values(SWA_DTYPE_FP32, SWA_DTYPE_BF16));

// A device that does not exist (no cache), and a device other than a CUDA
// cache's: INVALID_ARGUMENT naming it, nothing written.
TEST(CudaMergeNoCache, RefusesADeviceThatDoesNotExistOrDiffersFromTheCaches) {
  SWA_SKIP_WITHOUT_DEVICE();
  int count = 0;
  CUDA_ASSERT(cudaGetDeviceCount(&count));
  DeviceBuffer x(4 * 4), l(2 * 4);
  const float poison[4] = {-7, -7, -7, -7};
  x.Upload(poison, sizeof poison);
  swa_merge_args_t m;
  swa_merge_args_init(&m);
  m.rows = 2, m.head_dim = 2, m.out_a = x.get(), m.lse_a = static_cast<const float*>(l.get());
  m.out_b = x.get(), m.lse_b = static_cast<const float*>(l.get()), m.out = x.get();
  m.device = count;
  EXPECT_EQ(swa_attention_merge(nullptr, &m), SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(swa_last_error()).find("device = " + std::to_string(count)),
            std::string::npos)
      << swa_last_error();
  swa_cache_t* cuda = CudaCache();
  ASSERT_NE(cuda, nullptr);
  m.device = count;  // not the cache's device 0
  EXPECT_EQ(swa_attention_merge(cuda, &m), SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(swa_last_error()).find("but the cache is on CUDA device 0"),
            std::string::npos)
      << swa_last_error();
  swa_cache_destroy(cuda);
  float back[4];
  x.Download(back, sizeof back);
  EXPECT_EQ(back[0], -7.0f);
}

}  // namespace
