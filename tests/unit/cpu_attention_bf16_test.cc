// The AVX512-BF16 attention kernels against an FP64 dense band-mask reference.
// Inputs are BF16-exact (as from BF16 queries and an MXFP8 or BF16 ring), so
// Q.K^T is exact up to FP32 summation; the only extra error is P rounded to
// BF16 (relative error below 2^-8, BF16's unit roundoff: 8 significant
// bits) before P.V: per element
//   |out - ref| <= 2^-8 * sum_j p_j |v_j| / l <= 2^-8 * max_j |v_j|,
// which the tests check with max_j over the row's visible keys, plus the FP32
// budget (1e-5 of the output's scale).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "api/forced_attention_path.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/attention_kernels.h"
#include "backend/cpu/thread_pool.h"
#include "common/cpu_features.h"
#include "gtest/gtest.h"
#include "test_random.h"

namespace swa::cpu {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();

uint16_t Bf16Bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  if (std::isnan(x)) return uint16_t((b >> 16) | 0x40);
  return uint16_t((b + 0x7FFF + ((b >> 16) & 1)) >> 16);
}
float FromBits(uint16_t h) {
  const uint32_t b = uint32_t(h) << 16;
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}

struct Shape {
  int hq, hkv, d;
  bool sinks, shared_kv;
};

struct Problem {
  int n_tokens = 0, n_keys = 0;
  std::vector<float> q, k, v, out;
  std::vector<uint16_t> q16, k16, v16;
  std::vector<int32_t> begin, end;
};

// BF16-exact values in +-[0.05, amp].
void Fill(std::vector<float>& x, size_t n, float amp, std::mt19937& rng) {
  swa_test::UniformReal<float> mag(0.05f, amp);
  x.resize(n);
  for (float& f : x) f = FromBits(Bf16Bits((rng() & 1) ? mag(rng) : -mag(rng)));
}

struct Batch {
  Shape s;
  float scale;
  std::vector<float> sinks;
  std::vector<Problem> problems;

  Batch(const Shape& shape, uint32_t seed) : s(shape) {
    std::mt19937 rng(seed);
    scale = 1.0f / std::sqrt(float(s.d));
    Fill(sinks, s.hq, 3.0f, rng);
  }
  // Tokens see [begin, end) of n_keys keys.
  Problem& Add(int n_keys, std::vector<int32_t> begin, std::vector<int32_t> end, uint32_t seed) {
    std::mt19937 rng(seed);
    Problem p;
    p.n_keys = n_keys;
    p.n_tokens = int(begin.size());
    p.begin = std::move(begin);
    p.end = std::move(end);
    Fill(p.q, size_t(p.n_tokens) * s.hq * s.d, 2.0f, rng);
    Fill(p.k, size_t(n_keys) * s.hkv * s.d, 1.0f, rng);
    if (!s.shared_kv) Fill(p.v, size_t(n_keys) * s.hkv * s.d, 1.0f, rng);
    problems.push_back(std::move(p));
    return problems.back();
  }
  // history earlier tokens + `tokens` new ones, window w.
  Problem& Banded(int history, int tokens, int w, uint32_t seed) {
    const int first = std::max(0, history - w + 1);
    std::vector<int32_t> b, e;
    for (int t = 0; t < tokens; ++t) {
      b.push_back(std::max(0, history + t - w + 1) - first);
      e.push_back(history + t + 1 - first);
    }
    return Add(history + tokens - first, b, e, seed);
  }
  const std::vector<float>& V(const Problem& p) const { return s.shared_kv ? p.k : p.v; }

  // bf16_tiles: K/V handed over as BF16 tiles (k16 / v16), as the step does.
  void Run(AttentionIsa isa, ThreadPool* pool, bool bf16_queries = true, bool bf16_tiles = false) {
    std::vector<SeqProblem> seqs;
    for (Problem& p : problems) {
      p.q16.resize(p.q.size());
      for (size_t i = 0; i < p.q.size(); ++i) p.q16[i] = Bf16Bits(p.q[i]);
      p.out.assign(size_t(p.n_tokens) * s.hq * s.d, kNaN);  // poison
      SeqProblem sp{p.n_tokens, p.q.data(), p.n_keys, p.k.data(), V(p).data(),
                    p.begin.data(), p.end.data(), p.out.data()};
      sp.q_bf16 = bf16_queries ? p.q16.data() : nullptr;
      if (bf16_tiles) {
        p.k16.resize(p.k.size());
        for (size_t i = 0; i < p.k.size(); ++i) p.k16[i] = Bf16Bits(p.k[i]);
        p.v16.resize(p.v.size());
        for (size_t i = 0; i < p.v.size(); ++i) p.v16[i] = Bf16Bits(p.v[i]);
        sp.k = sp.v = nullptr;
        sp.q = nullptr;
        sp.k16 = p.k16.data();
        sp.v16 = s.shared_kv ? p.k16.data() : p.v16.data();
      }
      seqs.push_back(sp);
    }
    const AttentionShape shape{s.hq, s.hkv, s.d, scale, s.sinks ? sinks.data() : nullptr};
    AttendWithIsa(isa, shape, seqs.data(), int(seqs.size()), pool);
  }

  // Checks every output element of every problem against FP64 within the
  // BF16-P budget; returns the largest error seen relative to its bound.
  SWA_TEST_UNSANITIZED double Check(const char* what) const {
    const int ratio = s.hq / s.hkv;
    double worst = 0;
    for (size_t pi = 0; pi < problems.size(); ++pi) {
      const Problem& p = problems[pi];
      const std::vector<float>& v = V(p);
      for (int t = 0; t < p.n_tokens; ++t) {
        for (int h = 0; h < s.hq; ++h) {
          const int g = h / ratio;
          const float* q = &p.q[(size_t(t) * s.hq + h) * s.d];
          const int b = std::max(p.begin[t], 0), e = std::min(p.end[t], p.n_keys);
          std::vector<double> z;
          double m = s.sinks ? double(sinks[h]) : -INFINITY;
          for (int j = b; j < e; ++j) {
            const float* k = &p.k[(size_t(j) * s.hkv + g) * s.d];
            double dot = 0;
            for (int x = 0; x < s.d; ++x) dot += double(q[x]) * k[x];
            z.push_back(double(scale) * dot);
            m = std::max(m, z.back());
          }
          double l = s.sinks ? std::exp(double(sinks[h]) - m) : 0.0;
          std::vector<double> o(s.d, 0.0);
          double* od = o.data();  // raw pointers in the inner loops: see SWA_TEST_UNSANITIZED
          double vmax = 0;
          for (int j = b; j < e; ++j) {
            const double w = std::exp(z[j - b] - m);
            l += w;
            const float* vj = &v[(size_t(j) * s.hkv + g) * s.d];
            for (int x = 0; x < s.d; ++x) {
              od[x] += w * vj[x];
              const double a = vj[x] < 0 ? -double(vj[x]) : double(vj[x]);
              if (a > vmax) vmax = a;
            }
          }
          const float* got = &p.out[(size_t(t) * s.hq + h) * s.d];
          const double bound = std::ldexp(1.0, -8) * vmax + 1e-5 * std::max(vmax, 1e-30);
          for (int x = 0; x < s.d; ++x) {
            const double want = l > 0 ? o[x] / l : 0.0;
            const double err = std::fabs(double(got[x]) - want);
            if (!(err <= bound)) {
              ADD_FAILURE() << what << ": problem " << pi << " token " << t << " head " << h
                            << " elem " << x << ": " << got[x] << " vs " << want << " bound "
                            << bound;
              return INFINITY;
            }
            if (bound > 0) worst = std::max(worst, err / bound);
          }
        }
      }
    }
    return worst;
  }
};

class Bf16Attention : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Bf16KernelsAvailable())
      GTEST_SKIP() << "this CPU has no AVX512-BF16 (avx512_bf16 in cpuid), or the build has no "
                      "x86-64 path: the BF16 kernels cannot run here";
  }
};

// The tests below run once per BF16 driver: the AVX512-BF16 kernels (kBf16)
// and the AMX-BF16 tiles (kAmx), which skip, with the reason, on a CPU or OS
// without AMX-BF16 tile data.
class Bf16Paths : public ::testing::TestWithParam<AttentionIsa> {
 protected:
  void SetUp() override {
    if (!Bf16KernelsAvailable())
      GTEST_SKIP() << "this CPU has no AVX512-BF16 (avx512_bf16 in cpuid), or the build has no "
                      "x86-64 path: the BF16 kernels cannot run here";
    if (GetParam() == AttentionIsa::kAmx && !AmxKernelsAvailable())
      GTEST_SKIP() << "no AMX-BF16 here: cpuid lacks amx_bf16/amx_tile, the OS does not enable "
                      "the tile state, or Linux refused ARCH_REQ_XCOMP_PERM for XTILEDATA";
  }
};

TEST_P(Bf16Paths, DecodePrefillAndLongWindowsMatchDenseReference) {
  ThreadPool pool2(2);
  uint32_t seed = 7;
  for (const Shape& s : {Shape{64, 1, 512, true, true}, Shape{64, 8, 64, true, false},
                         Shape{8, 8, 96, false, false}, Shape{4, 2, 1024, true, false},
                         Shape{16, 4, 32, false, true}}) {
    Batch b(s, seed++);
    b.Banded(400, 6, 128, seed++);   // decode + drafts
    b.Banded(0, 150, 128, seed++);   // prefill
    b.Banded(700, 3, 600, seed++);   // a window longer than a key chunk
    b.Banded(5, 1, 128, seed++);     // a short history
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
      b.Run(GetParam(), pool);
      const double worst = b.Check("bf16");
      EXPECT_LE(worst, 1.0);
      std::printf("Hq %d Hkv %d D %d: worst error / budget %.3f\n", s.hq, s.hkv, s.d, worst);
      // BF16 tiles pack to the same panels: the same bits.
      std::vector<std::vector<float>> fp32_tiles;
      for (const Problem& p : b.problems) fp32_tiles.push_back(p.out);
      b.Run(GetParam(), pool, true, /*bf16_tiles=*/true);
      for (size_t i = 0; i < b.problems.size(); ++i) EXPECT_EQ(b.problems[i].out, fp32_tiles[i]);
    }
  }
}

// Odd and even range edges (a key pair straddles each edge) and arbitrary,
// non-monotone ranges.
TEST_P(Bf16Paths, ArbitraryRangesAndOddEdges) {
  std::mt19937 rng(5);
  for (const Shape& s : {Shape{8, 2, 64, true, false}, Shape{16, 1, 128, false, true}}) {
    Batch b(s, 11);
    for (int n = 0; n < 12; ++n) {
      const int keys = 1 + int(rng() % 300);
      std::vector<int32_t> bg, en;
      for (int t = 0; t < 1 + int(rng() % 9); ++t) {
        const int lo = int(rng() % keys);
        bg.push_back(lo);
        en.push_back(lo + 1 + int(rng() % (keys - lo)));
      }
      b.Add(keys, bg, en, 100 + n);
    }
    b.Run(GetParam(), nullptr);
    EXPECT_LE(b.Check("random ranges"), 1.0);
  }
}

// NaN keys/values no token sees, right next to odd range edges (the partner
// of an edge key in its BF16 pair), must not reach an output.
TEST_P(Bf16Paths, NanInAnUnseenKeyDoesNotLeak) {
  for (bool shared : {false, true}) {
    const Shape s{64, shared ? 1 : 8, 64, !shared, shared};
    Batch b(s, 21);
    Problem& p = b.Add(41, {3, 3, 25, 26, 4}, {15, 20, 37, 38, 19}, 22);
    for (int key : {0, 1, 2, 20, 21, 22, 23, 24, 38, 39, 40}) {
      for (int e = 0; e < s.hkv * s.d; ++e) {
        p.k[size_t(key) * s.hkv * s.d + e] = kNaN;
        if (!shared) p.v[size_t(key) * s.hkv * s.d + e] = kNaN;
      }
    }
    b.Run(GetParam(), nullptr);
    EXPECT_LE(b.Check(shared ? "shared" : "separate"), 1.0);
  }
}

// A NaN/Inf value that only the later tokens of a step see (register tiles
// mix tokens when Hq / Hkv < 6): the earlier tokens' rows equal those of the
// same step without it, the later rows are non-finite.
TEST_P(Bf16Paths, NanSeenOnlyByLaterTokensStaysInTheirRows) {
  for (bool shared : {false, true}) {
    for (bool tiles16 : {false, true}) {
      for (int ratio : {1, 2, 4, 8}) {  // 8: one KV head, outputs written in place
        const Shape s{8, 8 / ratio, 64, !shared, shared};
        Batch b(s, 51 + ratio);
        Problem& p = b.Banded(50, 6, 16, 52);
        b.Run(GetParam(), nullptr, true, tiles16);
        const std::vector<float> clean = p.out;
        const int poisoned = 4;  // token 4's own key: tokens 4 and 5 see it
        const int key = p.end[poisoned] - 1;
        std::vector<float>& target = shared ? p.k : p.v;
        for (int e = 0; e < s.hkv * s.d; e += 5)
          target[size_t(key) * s.hkv * s.d + e] = (e % 2) ? kNaN : INFINITY;
        b.Run(GetParam(), nullptr, true, tiles16);
        const size_t row = size_t(s.hq) * s.d;
        for (size_t i = 0; i < poisoned * row; ++i) {
          ASSERT_TRUE(std::isfinite(p.out[i])) << "ratio " << ratio << " elem " << i;
          EXPECT_NEAR(p.out[i], clean[i], 1e-5f * (1.0f + std::fabs(clean[i]))) << i;
        }
        for (size_t i = poisoned * row; i < p.out.size(); i += s.d) {
          bool any_bad = false;
          for (int x = 0; x < s.d; ++x) any_bad |= !std::isfinite(p.out[i + x]);
          EXPECT_TRUE(any_bad) << "a row that sees the bad value is finite";
        }
      }
    }
  }
}

TEST_P(Bf16Paths, NanInASeenKeyPropagates) {
  Batch b({8, 1, 64, false, true}, 31);
  Problem& p = b.Banded(20, 2, 128, 32);
  p.k[5 * 64 + 3] = kNaN;
  b.Run(GetParam(), nullptr);
  for (float f : b.problems[0].out) EXPECT_TRUE(std::isnan(f));
}

// Also with one KV head and 16 query heads (outputs written in place: token
// 1's rows fill whole register tiles that no P.V writes).
TEST_P(Bf16Paths, EmptyRangeYieldsZero) {
  for (int kv_heads : {2, 1}) {
    for (bool sinks : {false, true}) {
      const int hq = kv_heads == 1 ? 16 : 8;
      Batch b({hq, kv_heads, 64, sinks, kv_heads == 1}, 41);
      b.Add(10, {0, 4, 7}, {5, 4, 10}, 42);  // token 1 sees nothing
      b.Run(GetParam(), nullptr);
      EXPECT_LE(b.Check("empty"), 1.0);
      for (int e = 0; e < hq * 64; ++e) EXPECT_EQ(b.problems[0].out[hq * 64 + e], 0.0f);
    }
  }
}

// The BF16 kernels really ran (their results differ from the FP32 path's),
// and problems without BF16 queries take the FP32 path under kBf16.
TEST_P(Bf16Paths, TakesTheBf16PathOnlyWithBf16Queries) {
  Batch b({64, 1, 512, true, true}, 51);
  b.Banded(300, 6, 128, 52);
  b.Run(AttentionIsa::kAvx512, nullptr);
  const std::vector<float> fp32 = b.problems[0].out;
  b.Run(GetParam(), nullptr, /*bf16_queries=*/false);
  EXPECT_EQ(b.problems[0].out, fp32);
  b.Run(GetParam(), nullptr);
  EXPECT_NE(b.problems[0].out, fp32);
  EXPECT_LE(b.Check("bf16"), 1.0);
}

INSTANTIATE_TEST_SUITE_P(Drivers, Bf16Paths,
                         ::testing::Values(AttentionIsa::kBf16, AttentionIsa::kAmx),
                         [](const ::testing::TestParamInfo<AttentionIsa>& info) {
                           return info.param == AttentionIsa::kAmx ? std::string("amx")
                                                                   : std::string("avx512_bf16");
                         });

// The AMX tiles really ran: their sums run in another order than the
// AVX512-BF16 kernels' (both within the budget), and kAuto takes them.
TEST_F(Bf16Attention, AmxRunsItsOwnTilesAndIsTheDefault) {
  if (!AmxKernelsAvailable()) GTEST_SKIP() << "no AMX-BF16 tile data on this CPU / OS";
  for (const Shape& s : {Shape{64, 1, 512, true, true}, Shape{64, 8, 64, true, false}}) {
    Batch b(s, 71);
    b.Banded(300, 6, 128, 72);
    b.Banded(40, 1, 128, 73);
    b.Run(AttentionIsa::kBf16, nullptr);
    std::vector<std::vector<float>> avx;
    for (const Problem& p : b.problems) avx.push_back(p.out);
    b.Run(AttentionIsa::kAmx, nullptr);
    EXPECT_LE(b.Check("amx"), 1.0);
    bool differs = false;
    for (size_t i = 0; i < b.problems.size(); ++i) differs |= b.problems[i].out != avx[i];
    EXPECT_TRUE(differs) << "kAmx gave the AVX512-BF16 bits: the AMX driver did not run";
  }
  if (std::getenv("SWACACHE_ATTENTION") == nullptr) {
    EXPECT_TRUE(AmxAttentionSelected());
    EXPECT_STREQ(Bf16AttentionPathName(), "amx_bf16");
  }
}

// The default path of BF16 queries (SWACACHE_ATTENTION unset): AMX where it
// runs, else the AVX512-BF16 kernels where vdpbf16ps keeps up with the FMA
// ports (not on Intel cores: there the FP32 kernels on widened queries win).
TEST(Bf16PathChoice, FollowsKnownThroughput) {
  if (std::getenv("SWACACHE_ATTENTION") != nullptr) GTEST_SKIP() << "SWACACHE_ATTENTION is set";
  const char* want = AmxKernelsAvailable()                           ? "amx_bf16"
                     : Bf16KernelsAvailable() && !swa::CpuIsIntel() ? "avx512_bf16"
                                                                     : AttentionKernelName();
  EXPECT_STREQ(Bf16AttentionPathName(), want);
  EXPECT_EQ(Bf16AttentionSelected(), AmxKernelsAvailable() ||
                                         (Bf16KernelsAvailable() && !swa::CpuIsIntel()));
  std::printf("BF16 queries take: %s (FP32 queries: %s)\n", Bf16AttentionPathName(),
              AttentionKernelName());
}

// The rounding of P that the bound rests on: to_bf16 is round to nearest
// even with a relative error below 2^-8 (BF16's unit roundoff) on every
// probability-like value, and 2^-9 (half of it) is not a bound: 0.5 + 2^-9
// is a tie that goes to 0.5.
TEST_F(Bf16Attention, PRoundingStaysBelowBf16UnitRoundoff) {
  const Bf16AttentionKernels& kb = *Avx512Bf16AttentionKernels();
  std::mt19937 rng(61);
  swa_test::UniformReal<float> p(0.0f, 1.0f);
  std::vector<float> x(4096);
  for (float& f : x) f = p(rng);
  x[0] = 0.5f + std::ldexp(1.0f, -9);
  x[1] = 1.0f + std::ldexp(1.0f, -8);
  x[2] = 1.0f;
  std::vector<uint16_t> r(x.size(), 0xFFFF);
  kb.to_bf16(x.data(), static_cast<int>(x.size()), r.data());
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t bits = uint32_t(r[i]) << 16;
    float y;
    std::memcpy(&y, &bits, sizeof y);
    const double rel = x[i] > 0 ? std::fabs(double(y) - x[i]) / x[i] : 0.0;
    EXPECT_LT(rel, std::ldexp(1.0, -8)) << x[i];
    worst = std::max(worst, rel);
  }
  EXPECT_EQ(r[0], 0x3F00);  // 0.5: the tie goes to the even neighbour
  EXPECT_EQ(r[1], 0x3F80);  // 1.0
  EXPECT_EQ(r[2], 0x3F80);
  EXPECT_GT(worst, std::ldexp(1.0, -9));
}

// gemm_qk_rows (FP32 and BF16 key rows) against FP64 dot products, for every
// tile height, key count and a few depths, on poisoned outputs: exact
// products, FP32 sums (bound: depth * 2^-24 * sum |products|), columns past n
// untouched, and the FP32 and BF16 variants giving the same bits.
TEST_F(Bf16Attention, EdgeScoresFromKeyRowsMatchFp64Dots) {
  const Bf16AttentionKernels& kb = *Avx512Bf16AttentionKernels();
  std::mt19937 rng(71);
  const float alpha = 0.37f;
  for (int d : {32, 64, 512}) {
    const ptrdiff_t lda = d + 32, ldk = d + 64, ldc = 11;  // strided, not packed
    for (int m = 1; m <= kTileRows; ++m) {
      for (int n = 1; n <= 9; ++n) {
        std::vector<float> a, k;
        Fill(a, size_t(m) * lda, 2.0f, rng);
        Fill(k, size_t(n) * ldk, 1.0f, rng);
        std::vector<uint16_t> a16(a.size()), k16(k.size());
        for (size_t i = 0; i < a.size(); ++i) a16[i] = Bf16Bits(a[i]);
        for (size_t i = 0; i < k.size(); ++i) k16[i] = Bf16Bits(k[i]);
        std::vector<float> c(size_t(m) * ldc, kNaN), c16(c.size(), kNaN);
        kb.gemm_qk_rows(m, n, d / 2, a16.data(), lda, k.data(), ldk, alpha, c.data(), ldc);
        kb.gemm_qk_rows16(m, n, d / 2, a16.data(), lda, k16.data(), ldk, alpha, c16.data(), ldc);
        for (int i = 0; i < m; ++i) {
          for (int j = 0; j < ldc; ++j) {
            const float got = c[size_t(i) * ldc + j];
            if (j >= n) {
              EXPECT_TRUE(std::isnan(got)) << "column " << j << " past n " << n << " written";
              continue;
            }
            double want = 0, mag = 0;
            for (int e = 0; e < d; ++e) {
              const double x = double(a[size_t(i) * lda + e]) * k[size_t(j) * ldk + e];
              want += x;
              mag += std::fabs(x);
            }
            want *= alpha;
            EXPECT_NEAR(got, want, d * std::ldexp(1.0, -24) * mag * alpha + 1e-30)
                << "d " << d << " m " << m << " n " << n << " row " << i << " key " << j;
            uint32_t b32, b16;
            std::memcpy(&b32, &got, 4);
            std::memcpy(&b16, &c16[size_t(i) * ldc + j], 4);
            EXPECT_EQ(b32, b16) << "d " << d << " m " << m << " n " << n;
          }
        }
      }
    }
  }
}

// gemm_pv over several 16-column slabs with a row scale: the same bits as the
// unscaled call followed by a separate multiply (the in-place normalisation).
TEST_F(Bf16Attention, ValueGemmRowScaleEqualsASeparatePass) {
  const Bf16AttentionKernels& kb = *Avx512Bf16AttentionKernels();
  std::mt19937 rng(73);
  const int keys = 37, cols = 64, m = 5;
  std::vector<float> v, pf, scale;
  Fill(v, size_t(keys) * cols, 1.0f, rng);
  Fill(pf, size_t(m) * keys, 1.0f, rng);
  Fill(scale, m, 1.0f, rng);
  std::vector<uint16_t> p16(pf.size());
  for (size_t i = 0; i < pf.size(); ++i) p16[i] = Bf16Bits(pf[i]);
  const ptrdiff_t slab = PairSlabStride(keys);
  std::vector<uint16_t> vp(size_t(slab) * (cols / kTileCols));
  kb.pack_v(v.data(), cols, keys, cols, vp.data());
  for (bool accumulate : {false, true}) {
    std::vector<float> fused(size_t(m) * cols), plain;
    Fill(fused, fused.size(), 1.0f, rng);
    plain = fused;
    kb.gemm_pv(m, 3, keys, p16.data(), keys, vp.data(), slab, cols, fused.data(), cols, accumulate,
               scale.data());
    kb.gemm_pv(m, 3, keys, p16.data(), keys, vp.data(), slab, cols, plain.data(), cols, accumulate,
               nullptr);
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < cols; ++j) {
        const float want = plain[size_t(i) * cols + j] * scale[i];
        EXPECT_EQ(std::memcmp(&fused[size_t(i) * cols + j], &want, 4), 0)
            << "row " << i << " column " << j << " accumulate " << accumulate;
      }
    }
  }
}

}  // namespace
}  // namespace swa::cpu
