// Host code of the CUDA backend that decides or computes without a device,
// run on the CPU:
//  - kernels/attention/softmax_stats.h OnlineSoftmaxUpdate (the precise
//    kernel's per-key step) against an FP64 softmax, with -inf scores before
//    the first finite one and NaN scores;
//  - src/backend/cuda/device_support.h: which devices a cache refuses;
//  - kernels/common/smem_optin_cache.h: the shared-memory opt-in is set once
//    per kernel and device, also under concurrent first launches.
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/device_support.h"
#include "gtest/gtest.h"
#include "kernels/attention/softmax_stats.h"
#include "kernels/common/smem_optin_cache.h"
#include "test_random.h"

namespace swa {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

uint32_t Bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// A row through the online softmax as the precise kernel runs it: start
// (m, l) from the sink or (-inf, 0), one update per key, o accumulating v.
struct Row {
  float m, l, o;
};
Row RunRow(const std::vector<float>& z, const std::vector<float>& v, const float* sink) {
  Row r{sink ? *sink : -kInf, sink ? kernels::SinkStartSum(*sink) : 0.0f, 0.0f};
  for (size_t k = 0; k < z.size(); ++k) {
    const kernels::OnlineSoftmaxStep u = kernels::OnlineSoftmaxUpdate(r.m, z[k]);
    r.l = r.l * u.rescale + u.p;
    r.o = std::fma(u.p, v[k], r.o * u.rescale);
    r.m = u.m;
  }
  return r;
}

// sum softmax(z)_k v_k in FP64 (a -inf score weighs 0), and ln sum exp(z).
void Reference(const std::vector<float>& z, const std::vector<float>& v, const float* sink,
               double* out, double* lse) {
  double m = sink ? *sink : -INFINITY;
  for (float x : z) m = std::max(m, double(x));
  double l = sink ? std::exp(*sink - m) : 0, o = 0;
  for (size_t k = 0; k < z.size(); ++k) {
    const double p = std::exp(double(z[k]) - m);
    l += p;
    o += p * v[k];
  }
  *out = l > 0 ? o / l : 0;
  *lse = l > 0 ? m + std::log(l) : -INFINITY;
}

// The issue-27 case: no sink, the oldest visible key's score is -inf (a K
// value of -inf where q > 0): exp(-inf - -inf) must not make the row NaN.
TEST(CudaOnlineSoftmax, MinusInfScoresBeforeTheFirstFiniteOneWeighZero) {
  std::mt19937_64 rng(27);
  swa_test::UniformReal<float> s(-6.0f, 6.0f), val(-1.0f, 1.0f);
  for (int trial = 0; trial < 500; ++trial) {
    const int n = 1 + int(rng() % 40);
    std::vector<float> z(static_cast<size_t>(n)), v(static_cast<size_t>(n));
    for (int k = 0; k < n; ++k) {
      z[size_t(k)] = s(rng);
      v[size_t(k)] = val(rng);
    }
    // -inf at the start (1 to 3 keys) and at random places after.
    const int lead = 1 + int(rng() % 3);
    for (int k = 0; k < std::min(lead, n - 1); ++k) z[size_t(k)] = -kInf;
    for (int k = 0; k < n; ++k)
      if (rng() % 5 == 0 && k != n - 1) z[size_t(k)] = -kInf;
    const float sink = s(rng);
    for (const float* sk : {static_cast<const float*>(nullptr), &sink}) {
      const Row r = RunRow(z, v, sk);
      double want, want_lse;
      Reference(z, v, sk, &want, &want_lse);
      ASSERT_TRUE(std::isfinite(r.l) && std::isfinite(r.o))
          << "trial " << trial << " sink " << (sk != nullptr) << ": l = " << r.l
          << ", o = " << r.o;
      const double got = r.l > 0 ? double(r.o) / r.l : 0;
      EXPECT_NEAR(got, want, 1e-5) << "trial " << trial;
      EXPECT_NEAR(double(kernels::RowLse(r.m, r.l)), want_lse, 1e-5 * (1 + std::fabs(want_lse)))
          << "trial " << trial;
    }
  }
}

TEST(CudaOnlineSoftmax, OnlyMinusInfScoresGiveAnEmptyRow) {
  const Row r = RunRow({-kInf, -kInf, -kInf}, {0.5f, -0.25f, 1.0f}, nullptr);
  EXPECT_EQ(r.l, 0.0f);
  EXPECT_EQ(r.o, 0.0f);
  EXPECT_EQ(kernels::RowLse(r.m, r.l), -kInf);
  // With a sink the row is the sink's alone: l = 1, o = 0.
  const float sink = 0.75f;
  const Row s = RunRow({-kInf, -kInf}, {0.5f, 1.0f}, &sink);
  EXPECT_EQ(s.l, 1.0f);
  EXPECT_EQ(s.o, 0.0f);
  EXPECT_EQ(kernels::RowLse(s.m, s.l), sink);
}

// A +inf sink: the formula's exp(S - m) with m = +inf is NaN, and so is the
// row (not o = 0 with LSE +inf, an "empty part" to a merge); a -inf sink
// weighs 0 like a -inf score; a NaN sink poisons the row.
TEST(CudaOnlineSoftmax, PlusInfAndNanSinksPoisonTheRowMinusInfWeighsZero) {
  const float inf = kInf, nan = std::nanf("");
  for (const float* sk : {&inf, &nan}) {
    const Row r = RunRow({0.5f, -1.0f}, {0.25f, 1.0f}, sk);
    EXPECT_TRUE(std::isnan(r.l)) << "sink " << *sk << ": l = " << r.l;
    EXPECT_TRUE(std::isnan(r.o / r.l)) << "sink " << *sk << ": o = " << r.o;
    EXPECT_TRUE(std::isnan(kernels::RowLse(r.m, r.l))) << "sink " << *sk;
  }
  const float minus_inf = -kInf;
  const Row r = RunRow({0.5f, -1.0f}, {0.25f, 1.0f}, &minus_inf);
  const double e = std::exp(-1.5);
  EXPECT_NEAR(r.o / r.l, (0.25 + e) / (1 + e), 1e-6);
  EXPECT_NEAR(kernels::RowLse(r.m, r.l), 0.5 + std::log1p(e), 1e-6);
  const Row empty = RunRow({-kInf}, {1.0f}, &minus_inf);
  EXPECT_EQ(empty.o, 0.0f);
  EXPECT_EQ(kernels::RowLse(empty.m, empty.l), -kInf);
}

// The guard is for -inf only: a NaN score (from a NaN in q or K) still
// poisons the row wherever it comes, first key included.
TEST(CudaOnlineSoftmax, NanScoresStillPoisonTheRow) {
  const float nan = std::nanf("");
  for (const std::vector<float>& z : std::vector<std::vector<float>>{
           {nan, 1.0f, 2.0f}, {-kInf, nan, 0.5f}, {1.0f, 2.0f, nan}, {nan}}) {
    const Row r = RunRow(z, std::vector<float>(z.size(), 0.5f), nullptr);
    EXPECT_TRUE(std::isnan(r.l)) << "l = " << r.l;
    EXPECT_TRUE(std::isnan(r.o)) << "o = " << r.o;
  }
}

// Finite scores and maxima take the formulas bit for bit: the kernel's
// results where no -inf meets a -inf running max are unchanged.
TEST(CudaOnlineSoftmax, FiniteStepsAreTheFormulas) {
  std::mt19937_64 rng(5);
  swa_test::UniformReal<float> s(-30.0f, 30.0f);
  for (int i = 0; i < 10000; ++i) {
    const float m = i % 7 == 0 ? -kInf : s(rng), z = i % 11 == 0 ? -kInf : s(rng);
    if (m == -kInf && z == -kInf) continue;
    const kernels::OnlineSoftmaxStep u = kernels::OnlineSoftmaxUpdate(m, z);
    const float m_new = z > m ? z : m;
    EXPECT_EQ(Bits(u.m), Bits(m_new));
    EXPECT_EQ(Bits(u.p), Bits(std::exp(z - m_new))) << "m " << m << " z " << z;
    EXPECT_EQ(Bits(u.rescale), Bits(m == m_new ? 1.0f : std::exp(m - m_new)))
        << "m " << m << " z " << z;
  }
}

// ---- device_support.h -------------------------------------------------------

cuda::CudaDeviceInfo Device(int ordinal, const char* name, int major, int minor) {
  cuda::CudaDeviceInfo d;
  d.ordinal = ordinal;
  d.name = name;
  d.major = major;
  d.minor = minor;
  return d;
}

TEST(CudaDeviceSupport, BelowSm80IsRefusedNamingTheCapability) {
  for (auto [major, minor] : {std::pair{7, 5}, {7, 0}, {6, 1}, {5, 2}}) {
    for (cuda::KernelImage image : {cuda::KernelImage::kPresent, cuda::KernelImage::kMissing}) {
      const absl::Status st = cuda::CheckDeviceSupported(Device(1, "Tesla T4", major, minor), image);
      EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << major << "." << minor;
      const std::string msg(st.message());
      const std::string cap = "compute capability " + std::to_string(major) + "." +
                              std::to_string(minor);
      EXPECT_NE(msg.find(cap), std::string::npos) << msg;
      EXPECT_NE(msg.find("device 1 (Tesla T4)"), std::string::npos) << msg;
      EXPECT_NE(msg.find("8.0 or newer"), std::string::npos) << msg;
    }
  }
}

TEST(CudaDeviceSupport, Sm80AndNewerRunWhenTheBuildHasAnImage) {
  // sm_80 and sm_86/sm_89 (the sm_80 SASS), sm_90 (sm_90a SASS), sm_100 and
  // sm_120 (JIT from the compute_90 PTX) in the default build.
  for (auto [major, minor] : {std::pair{8, 0}, {8, 6}, {8, 9}, {9, 0}, {10, 0}, {12, 0}})
    EXPECT_TRUE(
        cuda::CheckDeviceSupported(Device(0, "GPU", major, minor), cuda::KernelImage::kPresent)
            .ok())
        << major << "." << minor;
}

TEST(CudaDeviceSupport, NoImageForTheDeviceIsRefusedNamingTheArchitecture) {
  // A build for sm_90a only, on an A100 or an RTX 5090.
  for (auto [major, minor] : {std::pair{8, 0}, {12, 0}}) {
    const absl::Status st =
        cuda::CheckDeviceSupported(Device(2, "NVIDIA X", major, minor), cuda::KernelImage::kMissing);
    EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
    const std::string msg(st.message());
    const std::string arch = std::to_string(major) + std::to_string(minor);
    EXPECT_NE(msg.find("device 2 (NVIDIA X)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("no kernel image"), std::string::npos) << msg;
    EXPECT_NE(msg.find("CMAKE_CUDA_ARCHITECTURES including " + arch), std::string::npos) << msg;
  }
}

// ---- smem_optin_cache.h -----------------------------------------------------

TEST(SmemOptinCache, SetsOncePerKernelAndDevice) {
  kernels::SmemOptinCache cache;
  int calls = 0;
  int fail = 0;  // the setter's result: 0 = success
  auto set = [&] {
    ++calls;
    return fail;
  };
  const int k1 = 0, k2 = 0;  // two distinct "kernel" addresses
  EXPECT_EQ(cache.Ensure(0, &k1, 100000, set), 0);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(cache.Ensure(0, &k1, 100000, set), 0);
  EXPECT_EQ(cache.Ensure(0, &k1, 60000, set), 0);  // less than allowed
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(cache.Ensure(0, &k1, 150000, set), 0);  // more: set again
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(cache.Ensure(0, &k1, 120000, set), 0);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(cache.Ensure(1, &k1, 100000, set), 0);  // another device
  EXPECT_EQ(cache.Ensure(0, &k2, 100000, set), 0);  // another kernel
  EXPECT_EQ(calls, 4);
  // A failure is returned and not remembered.
  fail = 7;
  EXPECT_EQ(cache.Ensure(2, &k1, 100000, set), 7);
  fail = 0;
  EXPECT_EQ(cache.Ensure(2, &k1, 100000, set), 0);
  EXPECT_EQ(calls, 6);
  EXPECT_EQ(cache.Ensure(2, &k1, 100000, set), 0);
  EXPECT_EQ(calls, 6);
  // Forget(device) drops that device's kernels only.
  cache.Forget(0);
  EXPECT_EQ(cache.Ensure(0, &k1, 100000, set), 0);
  EXPECT_EQ(cache.Ensure(0, &k2, 100000, set), 0);
  EXPECT_EQ(calls, 8);
  EXPECT_EQ(cache.Ensure(1, &k1, 100000, set), 0);
  EXPECT_EQ(calls, 8);
}

TEST(SmemOptinCache, ConcurrentFirstLaunchesSetOnce) {
  kernels::SmemOptinCache cache;
  static const int kernels_[4] = {};
  std::atomic<int> calls[4] = {};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        const int k = (i + t) % 4;
        ASSERT_EQ(cache.Ensure(0, &kernels_[k], 100000,
                               [&] {
                                 calls[k].fetch_add(1);
                                 return 0;
                               }),
                  0);
      }
    });
  for (std::thread& t : threads) t.join();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(calls[k].load(), 1) << "kernel " << k;
}

}  // namespace
}  // namespace swa
