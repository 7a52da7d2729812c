// The blocked CPU projection GEMM against an FP64 reference written here.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "backend/cpu/gemm_cpu.h"
#include "backend/cpu/thread_pool.h"
#include "test_random.h"

namespace swa {
namespace {

uint16_t ToBf16(float f) {  // round to nearest even (inputs are finite)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1)) >> 16);
}
double FromBf16(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Case {
  int64_t t, k, n;
  WeightLayout layout;
  Dtype out;
  unsigned threads;
};

void Check(const Case& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  swa_test::UniformReal<float> dist(-2.0f, 2.0f);
  std::vector<uint16_t> a(c.t * c.k), w(c.k * c.n);
  for (auto& x : a) x = ToBf16(dist(rng));
  for (auto& x : w) x = ToBf16(dist(rng));
  // Element (k, n) of the logical [K, N] weight.
  auto weight = [&](int64_t k, int64_t n) {
    return FromBf16(c.layout == WeightLayout::kOutIn ? w[n * c.k + k] : w[k * c.n + n]);
  };
  std::vector<float> out32(c.t * c.n, std::nanf(""));
  std::vector<uint16_t> out16(c.t * c.n, 0x7FC1);
  ProjectWork pw;
  pw.hidden = a.data();
  pw.weight = w.data();
  pw.layout = c.layout;
  pw.out_dtype = c.out;
  pw.out = c.out == Dtype::kFp32 ? static_cast<void*>(out32.data()) : out16.data();
  pw.tokens = c.t;
  pw.in_dim = c.k;
  pw.out_dim = c.n;
  cpu::ThreadPool pool(c.threads);
  cpu::GemmBf16Cpu(pw, &pool);

  const double gamma = 2.0 * double(c.k) * std::ldexp(1.0, -24);  // FP32 summation bound
  int bad = 0;
  for (int64_t i = 0; i < c.t && bad < 5; ++i)
    for (int64_t j = 0; j < c.n && bad < 5; ++j) {
      double ref = 0, mag = 0;
      for (int64_t k = 0; k < c.k; ++k) {
        const double p = FromBf16(a[i * c.k + k]) * weight(k, j);
        ref += p;
        mag += std::fabs(p);
      }
      const double got = c.out == Dtype::kFp32 ? double(out32[i * c.n + j])
                                               : FromBf16(out16[i * c.n + j]);
      double tol = gamma * mag + 1e-30;
      if (c.out == Dtype::kBf16) tol += std::ldexp(std::fabs(ref), -8) + gamma * mag;
      if (!(std::fabs(got - ref) <= tol)) {
        ++bad;
        ADD_FAILURE() << "T=" << c.t << " K=" << c.k << " N=" << c.n << " at (" << i << ", " << j
                      << "): got " << got << ", FP64 reference " << ref << ", tolerance " << tol;
      }
    }
}

TEST(ProjectGemmCpu, MatchesFp64ReferenceOverShapes) {
  const Case cases[] = {
      {1, 32, 16, WeightLayout::kOutIn, Dtype::kFp32, 1},
      {3, 7, 5, WeightLayout::kOutIn, Dtype::kFp32, 1},      // smaller than every block
      {67, 300, 271, WeightLayout::kOutIn, Dtype::kFp32, 3}, // ragged edges of every block
      {67, 300, 271, WeightLayout::kInOut, Dtype::kFp32, 2},
      {130, 513, 600, WeightLayout::kInOut, Dtype::kBf16, 4},
      {64, 256, 256, WeightLayout::kOutIn, Dtype::kBf16, 0},  // exact block multiples
      {5, 1, 33, WeightLayout::kInOut, Dtype::kFp32, 1},      // K = 1
  };
  uint64_t seed = 11;
  for (const Case& c : cases) Check(c, seed++);
}

TEST(ProjectGemmCpu, ThreadCountDoesNotChangeBits) {
  // Each output tile is summed in the same order on any thread.
  std::mt19937_64 rng(5);
  swa_test::UniformReal<float> dist(-1.0f, 1.0f);
  const int64_t t = 150, k = 700, n = 530;
  std::vector<uint16_t> a(t * k), w(k * n);
  for (auto& x : a) x = ToBf16(dist(rng));
  for (auto& x : w) x = ToBf16(dist(rng));
  std::vector<float> o1(t * n, -1), o4(t * n, -2);
  ProjectWork pw;
  pw.hidden = a.data();
  pw.weight = w.data();
  pw.tokens = t;
  pw.in_dim = k;
  pw.out_dim = n;
  pw.out = o1.data();
  cpu::GemmBf16Cpu(pw, nullptr);
  pw.out = o4.data();
  cpu::ThreadPool pool(4);
  cpu::GemmBf16Cpu(pw, &pool);
  EXPECT_EQ(std::memcmp(o1.data(), o4.data(), o1.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace swa
