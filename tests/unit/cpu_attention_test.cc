// The CPU attention core against an FP64 dense band-mask reference
// (docs/semantics.md, "Attention"): every key of the problem's tile is in the row, keys outside the
// token's range get -inf, the sink joins the denominator.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "api/forced_attention_path.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/attention_kernels.h"
#include "backend/cpu/thread_pool.h"
#include "gtest/gtest.h"
#include "test_random.h"

namespace swa::cpu {
namespace {

constexpr double kTolerance = 1e-5;  // "Error budgets", FP32 in and out
const float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Shape {
  int hq, hkv, d;
  bool sinks, shared_kv;
};

// One problem with owned storage.
struct Problem {
  int n_tokens = 0, n_keys = 0;
  std::vector<float> q, k, v, out;
  std::vector<int32_t> begin, end;
};

struct Batch {
  Shape shape;
  float scale = 0;
  std::vector<float> sinks;
  std::vector<Problem> problems;

  AttentionShape View() const {
    return {shape.hq, shape.hkv, shape.d, scale, shape.sinks ? sinks.data() : nullptr};
  }
  std::vector<SeqProblem> Seqs() {
    std::vector<SeqProblem> out;
    for (Problem& p : problems) {
      out.push_back({p.n_tokens, p.q.data(), p.n_keys, p.k.data(),
                     shape.shared_kv ? p.k.data() : p.v.data(), p.begin.data(), p.end.data(),
                     p.out.data()});
    }
    return out;
  }
};

// Uniform in +-[0.05, 1]: random, never zero.
float NonZero(std::mt19937& rng) {
  swa_test::UniformReal<float> mag(0.05f, 1.0f);
  return (rng() & 1) ? mag(rng) : -mag(rng);
}

void Fill(std::vector<float>& x, size_t n, std::mt19937& rng) {
  x.resize(n);
  for (float& f : x) f = NonZero(rng);
}

// Allocates and fills the tensors of a problem whose ranges are already set.
void FillProblem(const Shape& s, Problem& p, std::mt19937& rng) {
  p.n_tokens = static_cast<int>(p.begin.size());
  Fill(p.q, static_cast<size_t>(p.n_tokens) * s.hq * s.d, rng);
  for (float& f : p.q) f *= 2.0f;  // logits of a few units: a non-trivial softmax
  Fill(p.k, static_cast<size_t>(p.n_keys) * s.hkv * s.d, rng);
  if (!s.shared_kv) Fill(p.v, static_cast<size_t>(p.n_keys) * s.hkv * s.d, rng);
  p.out.assign(static_cast<size_t>(p.n_tokens) * s.hq * s.d, kNaN);
}

// A sequence of `history` earlier tokens plus `tokens` new ones, window w,
// valid_start vs: the tile holds every position some new token sees.
Problem Banded(const Shape& s, int history, int tokens, int w, int vs, std::mt19937& rng) {
  Problem p;
  const int first = std::max({0, vs, history - w + 1});
  p.n_keys = history + tokens - first;
  for (int t = 0; t < tokens; ++t) {
    const int pos = history + t;
    p.begin.push_back(std::max({0, vs, pos - w + 1}) - first);
    p.end.push_back(pos + 1 - first);
  }
  FillProblem(s, p, rng);
  return p;
}

// Arbitrary non-empty ranges, not monotone, inside a tile with spare rows.
Problem RandomRanges(const Shape& s, int tokens, int n_keys, std::mt19937& rng) {
  Problem p;
  p.n_keys = n_keys;
  for (int t = 0; t < tokens; ++t) {
    const int b = static_cast<int>(rng() % n_keys);
    const int e = b + 1 + static_cast<int>(rng() % (n_keys - b));
    p.begin.push_back(b);
    p.end.push_back(e);
  }
  FillProblem(s, p, rng);
  return p;
}

Batch MakeBatch(const Shape& s, uint32_t seed) {
  Batch b;
  b.shape = s;
  std::mt19937 rng(seed);
  b.scale = 1.0f / std::sqrt(static_cast<float>(s.d));
  for (int h = 0; h < s.hq; ++h) b.sinks.push_back(NonZero(rng) * 3.0f);
  return b;
}

// FP64 dense band mask over all keys of the tile. Masked keys contribute
// exactly nothing (their values are never read: they may be NaN).
SWA_TEST_UNSANITIZED std::vector<double> Reference(const Batch& b, const Problem& p) {
  const Shape& s = b.shape;
  const int ratio = s.hq / s.hkv;
  const std::vector<float>& v = s.shared_kv ? p.k : p.v;
  std::vector<double> out(static_cast<size_t>(p.n_tokens) * s.hq * s.d, 0.0);
  std::vector<double> z(p.n_keys);
  const double inf = std::numeric_limits<double>::infinity();
  for (int t = 0; t < p.n_tokens; ++t) {
    for (int h = 0; h < s.hq; ++h) {
      const int g = h / ratio;
      const float* q = &p.q[(static_cast<size_t>(t) * s.hq + h) * s.d];
      double m = s.sinks ? static_cast<double>(b.sinks[h]) : -inf;
      for (int j = 0; j < p.n_keys; ++j) {
        z[j] = -inf;
        if (j < p.begin[t] || j >= p.end[t]) continue;
        const float* k = &p.k[(static_cast<size_t>(j) * s.hkv + g) * s.d];
        double dot = 0;
        for (int e = 0; e < s.d; ++e) dot += static_cast<double>(q[e]) * k[e];
        z[j] = static_cast<double>(b.scale) * dot;
        m = std::max(m, z[j]);
      }
      double denom = s.sinks ? std::exp(static_cast<double>(b.sinks[h]) - m) : 0.0;
      double* o = &out[(static_cast<size_t>(t) * s.hq + h) * s.d];
      for (int j = 0; j < p.n_keys; ++j) {
        if (z[j] == -inf) continue;
        const double w = std::exp(z[j] - m);
        denom += w;
        const float* vj = &v[(static_cast<size_t>(j) * s.hkv + g) * s.d];
        for (int e = 0; e < s.d; ++e) o[e] += w * vj[e];
      }
      for (int e = 0; e < s.d; ++e) o[e] = denom > 0 ? o[e] / denom : 0.0;
    }
  }
  return out;
}

double RelativeL2(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double diff = static_cast<double>(got[i]) - want[i];
    err += diff * diff;
    norm += want[i] * want[i];
  }
  if (std::isnan(err)) return std::numeric_limits<double>::infinity();
  return std::sqrt(err / std::max(norm, 1e-300));
}

void RunAttention(Batch& b, ThreadPool* pool, AttentionIsa isa = AttentionIsa::kAuto) {
  for (Problem& p : b.problems) std::fill(p.out.begin(), p.out.end(), kNaN);
  std::vector<SeqProblem> seqs = b.Seqs();
  AttendWithIsa(isa, b.View(), seqs.data(), static_cast<int>(seqs.size()), pool);
}

void ExpectMatchesReference(Batch& b, ThreadPool* pool, const char* what) {
  RunAttention(b, pool);
  for (size_t i = 0; i < b.problems.size(); ++i) {
    const Problem& p = b.problems[i];
    for (float f : p.out) ASSERT_TRUE(std::isfinite(f)) << what << ": problem " << i;
    const double err = RelativeL2(p.out, Reference(b, p));
    EXPECT_LE(err, kTolerance) << what << ": problem " << i << " tokens " << p.n_tokens
                               << " keys " << p.n_keys;
  }
}

std::string Describe(const Shape& s) {
  return "Hq " + std::to_string(s.hq) + " Hkv " + std::to_string(s.hkv) + " D " +
         std::to_string(s.d) + (s.sinks ? " sinks" : " no-sinks") +
         (s.shared_kv ? " shared-kv" : " separate-kv");
}

// Decode and speculative steps: 1..7 tokens per sequence, several sequences
// per call, GQA ratios 1, 8 and 64, every combination of sinks and K/V sharing.
TEST(CpuAttention, DecodeShapesMatchDenseReference) {
  ThreadPool pool3(3);
  const Shape shapes[] = {{8, 8, 64}, {64, 8, 64}, {64, 1, 512}, {16, 2, 128}, {32, 4, 96}};
  uint32_t seed = 1;
  for (Shape s : shapes) {
    for (int variant = 0; variant < 4; ++variant) {
      s.sinks = variant & 1;
      s.shared_kv = variant & 2;
      Batch b = MakeBatch(s, seed++);
      std::mt19937 rng(seed++);
      for (int tokens = 1; tokens <= 7; ++tokens) {
        const int history = static_cast<int>(rng() % 300);
        const int vs = (tokens % 3 == 0) ? history / 2 : 0;  // valid_start > 0 on some
        b.problems.push_back(Banded(s, history, tokens, 128, vs, rng));
      }
      ExpectMatchesReference(b, nullptr, (Describe(s) + ", no pool").c_str());
      ExpectMatchesReference(b, &pool3, (Describe(s) + ", 3 threads").c_str());
    }
  }
}

TEST(CpuAttention, DeepSeekV4DecodeShape) {
  // Hq 64 on one shared 512-wide vector, 6 tokens per sequence, 133 keys.
  ThreadPool pool1(1), pool3(3);
  Batch b = MakeBatch({64, 1, 512, true, true}, 11);
  std::mt19937 rng(12);
  for (int i = 0; i < 3; ++i) b.problems.push_back(Banded(b.shape, 500 + i, 6, 128, 0, rng));
  ASSERT_EQ(b.problems[0].n_keys, 133);
  ExpectMatchesReference(b, &pool1, "1 thread");
  ExpectMatchesReference(b, &pool3, "3 threads");
}

TEST(CpuAttention, LongPrefillBands) {
  ThreadPool pool3(3);
  const Shape shapes[] = {{4, 4, 64, true, false}, {16, 2, 128, false, false},
                          {8, 1, 128, true, true}};
  uint32_t seed = 21;
  for (const Shape& s : shapes) {
    Batch b = MakeBatch(s, seed++);
    std::mt19937 rng(seed++);
    b.problems.push_back(Banded(s, 0, 300, 128, 0, rng));     // fresh prompt
    b.problems.push_back(Banded(s, 200, 300, 128, 0, rng));   // chunked prefill
    b.problems.push_back(Banded(s, 50, 300, 128, 120, rng));  // valid_start inside
    b.problems.push_back(Banded(s, 10, 3, 128, 0, rng));      // a decode step beside them
    ExpectMatchesReference(b, nullptr, (Describe(s) + ", no pool").c_str());
    ExpectMatchesReference(b, &pool3, (Describe(s) + ", 3 threads").c_str());
  }
}

// Windows longer than one key chunk exercise the online softmax (running max
// and rescaling across chunks).
TEST(CpuAttention, WindowsLongerThanAKeyChunk) {
  ThreadPool pool3(3);
  const Shape shapes[] = {{8, 1, 512, true, true}, {4, 2, 1024, false, false},
                          {8, 8, 64, false, true}};
  uint32_t seed = 31;
  for (const Shape& s : shapes) {
    Batch b = MakeBatch(s, seed++);
    std::mt19937 rng(seed++);
    b.problems.push_back(Banded(s, 3000, 4, 2500, 0, rng));
    b.problems.push_back(Banded(s, 0, 40, 4096, 0, rng));
    ExpectMatchesReference(b, &pool3, Describe(s).c_str());
  }
}

TEST(CpuAttention, HeadDimsFrom32To1024) {
  ThreadPool pool3(3);
  uint32_t seed = 41;
  for (int d : {32, 96, 160, 288, 1024}) {
    const Shape s{8, 2, d, (d / 32) % 2 == 1, d == 160};
    Batch b = MakeBatch(s, seed++);
    std::mt19937 rng(seed++);
    b.problems.push_back(Banded(s, 140, 6, 128, 0, rng));
    b.problems.push_back(Banded(s, 3, 2, 128, 0, rng));
    ExpectMatchesReference(b, &pool3, Describe(s).c_str());
  }
}

TEST(CpuAttention, ArbitraryRangesAndManyProblems) {
  ThreadPool pool1(1), pool3(3);
  uint32_t seed = 51;
  for (const Shape& s : {Shape{8, 8, 64, true, false}, Shape{64, 8, 64, false, true},
                         Shape{16, 1, 128, true, false}}) {
    Batch b = MakeBatch(s, seed++);
    std::mt19937 rng(seed++);
    for (int i = 0; i < 20; ++i) {
      b.problems.push_back(RandomRanges(s, 1 + static_cast<int>(rng() % 13),
                                        1 + static_cast<int>(rng() % 200), rng));
    }
    ExpectMatchesReference(b, &pool1, (Describe(s) + ", 1 thread").c_str());
    ExpectMatchesReference(b, &pool3, (Describe(s) + ", 3 threads").c_str());
  }
}

TEST(CpuAttention, DominantAndNegligibleSinks) {
  for (float sink : {40.0f, 6.0f, -40.0f}) {
    Batch b = MakeBatch({16, 2, 128, true, false}, 61);
    std::fill(b.sinks.begin(), b.sinks.end(), sink);
    std::mt19937 rng(62);
    b.problems.push_back(Banded(b.shape, 90, 5, 128, 0, rng));
    ExpectMatchesReference(b, nullptr, ("sink " + std::to_string(sink)).c_str());
  }
}

// A NaN key/value row that no token sees, before every range, after every
// range and in a gap between two tokens' disjoint ranges, must not reach any
// output ("Error budgets": a NaN never passes).
TEST(CpuAttention, NanInAnUnseenKeyDoesNotLeak) {
  for (bool shared : {false, true}) {
    for (int ratio : {1, 8, 64}) {
      const Shape s{64, 64 / ratio, 64, !shared, shared};
      Batch b = MakeBatch(s, 71 + ratio);
      std::mt19937 rng(72);
      Problem p;
      p.n_keys = 40;
      p.begin = {2, 3, 25, 26, 3};   // gap: keys 20..24 are seen by no token
      p.end = {15, 20, 37, 38, 19};  // keys 0, 1 and 38, 39 neither
      FillProblem(s, p, rng);
      for (int key : {0, 1, 22, 38, 39}) {
        for (int e = 0; e < s.hkv * s.d; ++e) {
          p.k[static_cast<size_t>(key) * s.hkv * s.d + e] = kNaN;
          if (!shared) p.v[static_cast<size_t>(key) * s.hkv * s.d + e] = kNaN;
        }
      }
      b.problems.push_back(std::move(p));
      ExpectMatchesReference(b, nullptr, Describe(s).c_str());
    }
  }
}

// Keys whose score is -inf (a -inf K value where every query is positive)
// weigh 0 (docs/semantics.md, "Attention"), also when they fill whole key
// chunks before the first finite score (D 512: chunks of a few dozen keys)
// and when a row sees nothing else (no sink: zeros). Every path.
TEST(CpuAttention, MinusInfScoresFillingWholeChunksWeighZero) {
  for (bool sinks : {false, true}) {
    const Shape s{8, 1, 512, sinks, false};
    Batch b = MakeBatch(s, 91);
    std::mt19937 rng(92);
    Problem p = Banded(s, 0, 300, 300, 0, rng);
    const float minus_inf = -std::numeric_limits<float>::infinity();
    for (int key = 0; key < 200; ++key) p.k[static_cast<size_t>(key) * s.d + 3] = minus_inf;
    for (int row = 0; row < p.n_tokens * s.hq; ++row) {
      float& x = p.q[static_cast<size_t>(row) * s.d + 3];
      x = std::fabs(x) + 0.25f;
    }
    b.problems.push_back(std::move(p));
    ExpectMatchesReference(b, nullptr, sinks ? "sinks" : "no sinks");
  }
}

// The test can fail: a NaN inside a token's range does reach the output.
TEST(CpuAttention, NanInASeenKeyPropagates) {
  Batch b = MakeBatch({8, 1, 64, false, true}, 81);
  std::mt19937 rng(82);
  b.problems.push_back(Banded(b.shape, 20, 2, 128, 0, rng));
  b.problems[0].k[5 * 64 + 3] = kNaN;
  RunAttention(b, nullptr);
  for (float f : b.problems[0].out) EXPECT_TRUE(std::isnan(f));
}

// A NaN/Inf key or value that later tokens of the step see but earlier ones
// do not (a draft token's own K/V): register tiles mix rows of several
// tokens, and the earlier tokens' outputs must stay exact, the later ones
// non-finite. Every attention path (this binary runs once per forced path).
TEST(CpuAttention, NanSeenOnlyByLaterTokensStaysInTheirRows) {
  for (bool shared : {false, true}) {
    for (int ratio : {1, 2, 4, 8}) {
      for (float bad : {kNaN, std::numeric_limits<float>::infinity()}) {
        const Shape s{8, 8 / ratio, 64, !shared, shared};
        Batch b = MakeBatch(s, 111 + ratio);
        std::mt19937 rng(112 + ratio);
        b.problems.push_back(Banded(s, 50, 6, 16, 0, rng));
        Problem& p = b.problems[0];
        const int poisoned = 4;  // token 4's own key: tokens 4 and 5 see it
        const int key = p.end[poisoned] - 1;
        const std::vector<double> want = Reference(b, p);  // rows 0..3 never read it
        for (int e = 0; e < s.hkv * s.d; e += 7) {
          if (shared) {
            p.k[static_cast<size_t>(key) * s.hkv * s.d + e] = bad;
          } else {
            p.v[static_cast<size_t>(key) * s.hkv * s.d + e] = bad;
          }
        }
        RunAttention(b, nullptr);
        const size_t row_floats = static_cast<size_t>(s.hq) * s.d;
        std::vector<float> got_early(p.out.begin(), p.out.begin() + poisoned * row_floats);
        std::vector<double> want_early(want.begin(), want.begin() + poisoned * row_floats);
        for (float f : got_early) ASSERT_TRUE(std::isfinite(f)) << Describe(s) << " ratio " << ratio;
        EXPECT_LE(RelativeL2(got_early, want_early), kTolerance) << Describe(s);
        for (size_t i = poisoned * row_floats; i < p.out.size(); i += s.d) {
          bool any_bad = false;
          for (int e = 0; e < s.d; ++e) any_bad |= !std::isfinite(p.out[i + e]);
          EXPECT_TRUE(any_bad) << Describe(s) << ": a row that sees the bad value is finite";
        }
      }
    }
  }
}

TEST(CpuAttention, EmptyRangeYieldsZero) {
  for (bool sinks : {false, true}) {
    Batch b = MakeBatch({8, 2, 64, sinks, false}, 91);
    std::mt19937 rng(92);
    Problem p;
    p.n_keys = 10;
    p.begin = {0, 4, 7};
    p.end = {5, 4, 10};  // token 1 sees nothing
    FillProblem(b.shape, p, rng);
    b.problems.push_back(std::move(p));
    ExpectMatchesReference(b, nullptr, sinks ? "sinks" : "no sinks");
    for (int e = 0; e < 8 * 64; ++e) EXPECT_EQ(b.problems[0].out[8 * 64 + e], 0.0f);
  }
}

// The tests below name their kernels (an AttentionIsa other than kAuto, or a
// kernel table): SWACACHE_ATTENTION does not change what they run, so in the
// binary's forced runs (tests/CMakeLists.txt) they would repeat the unforced
// run's check. The AVX-512 ones take the FP32 register tiling, which
// SWACACHE_AVX512_TILES does change: they run in the tiling runs.
std::string SameAsTheUnforcedRun(bool takes_the_tiling) {
  const char* path = std::getenv("SWACACHE_ATTENTION");
  if (path == nullptr || *path == '\0') return "";
  const char* tiles = std::getenv("SWACACHE_AVX512_TILES");
  if (takes_the_tiling && tiles != nullptr && *tiles != '\0') return "";
  return std::string("names its kernels, which SWACACHE_ATTENTION=") + path +
         " does not change: the unforced run of this binary checked them";
}

#define SWA_SKIP_IF_SAME_AS_UNFORCED(takes_the_tiling)                  \
  do {                                                                   \
    const std::string why = SameAsTheUnforcedRun(takes_the_tiling);      \
    if (!why.empty()) GTEST_SKIP() << why;                               \
  } while (0)

// Each SIMD set against the portable kernels on the same problems.
void ExpectIsaMatchesPortable(AttentionIsa isa) {
  ThreadPool pool3(3);
  uint32_t seed = 101;
  for (const Shape& s : {Shape{64, 1, 512, true, true}, Shape{64, 8, 64, true, false},
                         Shape{8, 8, 96, false, false}, Shape{4, 2, 1024, true, false}}) {
    Batch b = MakeBatch(s, seed++);
    std::mt19937 rng(seed++);
    b.problems.push_back(Banded(s, 400, 6, 128, 0, rng));
    b.problems.push_back(Banded(s, 0, 150, 128, 0, rng));
    b.problems.push_back(Banded(s, 700, 3, 600, 0, rng));
    RunAttention(b, &pool3, AttentionIsa::kPortable);
    std::vector<std::vector<float>> portable;
    for (const Problem& p : b.problems) portable.push_back(p.out);
    RunAttention(b, &pool3, isa);
    for (size_t i = 0; i < b.problems.size(); ++i) {
      std::vector<double> want(portable[i].begin(), portable[i].end());
      for (float f : b.problems[i].out) ASSERT_TRUE(std::isfinite(f));
      EXPECT_LE(RelativeL2(b.problems[i].out, want), 1e-6) << Describe(s) << " problem " << i;
      EXPECT_NE(b.problems[i].out, portable[i]) << "both runs took the same path?";
    }
  }
}

TEST(CpuAttention, Avx2MatchesPortable) {
  SWA_SKIP_IF_SAME_AS_UNFORCED(false);
  if (!Avx2KernelsAvailable()) GTEST_SKIP() << "this CPU has no AVX2/FMA (or the build has no x86 path)";
  ExpectIsaMatchesPortable(AttentionIsa::kAvx2);
}

TEST(CpuAttention, Avx512MatchesPortable) {
  SWA_SKIP_IF_SAME_AS_UNFORCED(true);
  if (!Avx512KernelsAvailable()) GTEST_SKIP() << "this CPU has no AVX-512 F (or the build has no x86-64 path)";
  ExpectIsaMatchesPortable(AttentionIsa::kAvx512);
}

// The AVX-512 set against the FP64 reference directly.
TEST(CpuAttention, Avx512MatchesDenseReference) {
  SWA_SKIP_IF_SAME_AS_UNFORCED(true);
  if (!Avx512KernelsAvailable()) GTEST_SKIP() << "this CPU has no AVX-512 F";
  Batch b = MakeBatch({64, 8, 64, true, false}, 131);
  std::mt19937 rng(132);
  b.problems.push_back(Banded(b.shape, 300, 6, 128, 0, rng));
  b.problems.push_back(Banded(b.shape, 0, 37, 128, 0, rng));
  RunAttention(b, nullptr, AttentionIsa::kAvx512);
  for (const Problem& p : b.problems) EXPECT_LE(RelativeL2(p.out, Reference(b, p)), kTolerance);
}

// The 8-column score kernel (edge K^T panels) gives each half of the 16-column
// kernel's result bit for bit: the same FMAs in the same order per lane.
TEST(CpuAttention, Avx512HalfGemmMatchesFullGemm) {
  SWA_SKIP_IF_SAME_AS_UNFORCED(false);  // the Mx16 table itself, whatever the tiling
  if (!Avx512KernelsAvailable()) GTEST_SKIP() << "this CPU has no AVX-512 F";
  const AttentionKernels& kn = *Avx512AttentionKernels();
  ASSERT_NE(kn.gemm_half, nullptr);
  std::mt19937 rng(141);
  std::normal_distribution<float> dist;
  for (int m = 1; m <= kTileRows; ++m) {
    for (int k : {1, 2, 7, 256}) {
      for (bool acc : {false, true}) {
        std::vector<float> a(static_cast<size_t>(m) * k), b(static_cast<size_t>(k) * kTileCols);
        std::vector<float> c0(static_cast<size_t>(m) * kTileCols);
        for (float& x : a) x = dist(rng);
        for (float& x : b) x = dist(rng);
        for (float& x : c0) x = dist(rng);
        std::vector<float> full = c0;
        kn.gemm(m, k, a.data(), k, b.data(), kTileCols, full.data(), kTileCols, acc);
        for (int col : {0, kTileCols / 2}) {
          std::vector<float> half = c0;
          kn.gemm_half(m, k, a.data(), k, b.data() + col, kTileCols, half.data() + col, kTileCols,
                       acc);
          for (int i = 0; i < m; ++i)
            for (int j = 0; j < kTileCols; ++j) {
              const size_t at = static_cast<size_t>(i) * kTileCols + j;
              const bool inside = j >= col && j < col + kTileCols / 2;
              EXPECT_EQ(half[at], inside ? full[at] : c0[at])
                  << "m " << m << " k " << k << " acc " << acc << " col " << col << " (" << i
                  << ", " << j << ")";
            }
        }
      }
    }
  }
}

TEST(CpuAttention, PortablePathMatchesDenseReference) {
  SWA_SKIP_IF_SAME_AS_UNFORCED(false);
  Batch b = MakeBatch({64, 8, 64, true, false}, 111);
  std::mt19937 rng(112);
  b.problems.push_back(Banded(b.shape, 300, 6, 128, 0, rng));
  b.problems.push_back(Banded(b.shape, 0, 200, 128, 0, rng));
  RunAttention(b, nullptr, AttentionIsa::kPortable);
  for (const Problem& p : b.problems) EXPECT_LE(RelativeL2(p.out, Reference(b, p)), kTolerance);
}

// Repeated calls with the same pool give the same bits: no state leaks
// between calls through the reused workspaces.
TEST(CpuAttention, RepeatedCallsAreDeterministic) {
  ThreadPool pool2(2);
  Batch b = MakeBatch({16, 2, 128, true, false}, 121);
  std::mt19937 rng(122);
  for (int i = 0; i < 6; ++i) b.problems.push_back(Banded(b.shape, 100 * i, 1 + i, 128, 0, rng));
  RunAttention(b, &pool2);
  std::vector<std::vector<float>> first;
  for (const Problem& p : b.problems) first.push_back(p.out);
  for (int rep = 0; rep < 3; ++rep) {
    RunAttention(b, &pool2);
    for (size_t i = 0; i < b.problems.size(); ++i) EXPECT_EQ(b.problems[i].out, first[i]);
  }
}

}  // namespace
}  // namespace swa::cpu
