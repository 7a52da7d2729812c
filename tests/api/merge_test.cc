// swa_attention_merge: two partial attentions over disjoint key sets, with
// their LSEs, merged into the attention over the union (docs/semantics.md,
// "Merging partial attentions"). The parts and the expected union are
// computed in FP64 by the test; each row's keys are split at random, one part
// may be empty, and the sink is counted in exactly one part. Then the window
// attention of a real swa_step (with lse) merged with the test's attention
// over extra keys equals one softmax over both key sets.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "api/merge_util.h"
#include "api/step_harness.h"
#include "api/test_util.h"
#include "gtest/gtest.h"
#include "swacache.h"
#include "test_random.h"

namespace {

using swa_test::FromBf16;
using swa_test::ToBf16;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Attention of one row over `keys` (a subset), with an optional sink logit.
void Partial(const std::vector<double>& z, const std::vector<std::vector<double>>& v,
             const std::vector<int>& keys, const double* sink, int d, double* out, double* lse) {
  double m = sink ? *sink : kNegInf;
  for (int j : keys) m = std::max(m, z[j]);
  double l = sink ? std::exp(*sink - m) : 0.0;
  std::vector<double> acc(d, 0.0);
  for (int j : keys) {
    const double e = std::exp(z[j] - m);
    l += e;
    for (int i = 0; i < d; ++i) acc[i] += e * v[j][i];
  }
  for (int i = 0; i < d; ++i) out[i] = l > 0 ? acc[i] / l : 0.0;
  *lse = l > 0 ? m + std::log(l) : kNegInf;
}

swa_cache_t* MakeCache() { return swa_test::MergeCache(); }

struct MergeCase {
  swa_dtype_t dtype;
  bool in_place;
  bool no_cache;  // swa_attention_merge(NULL, ...) on host memory
};

class MergeTest : public ::testing::TestWithParam<MergeCase> {};

TEST_P(MergeTest, SplitKeySetsMergeToTheUnion) {
  const MergeCase mc = GetParam();
  swa_cache_t* cache = mc.no_cache ? nullptr : MakeCache();
  std::mt19937_64 rng(77);
  swa_test::UniformReal<double> u(-1, 1);
  const int rows = 300, d = 40;
  std::vector<double> want(size_t(rows) * d), want_lse(rows);
  std::vector<double> pa(size_t(rows) * d), pb(size_t(rows) * d), la(rows), lb(rows);
  for (int r = 0; r < rows; ++r) {
    const int n = int(rng() % 20);  // 0 ... 19 keys
    std::vector<double> z(n);
    std::vector<std::vector<double>> v(n, std::vector<double>(d));
    for (int j = 0; j < n; ++j) {
      z[j] = 8 * u(rng) + (r % 7 == 0 ? 60 : 0);  // some rows with large logits
      for (double& x : v[j]) x = u(rng);
    }
    std::vector<int> all, a, b;
    for (int j = 0; j < n; ++j) {
      all.push_back(j);
      (rng() % 3 == 0 ? a : b).push_back(j);
    }
    if (r % 5 == 0) b.insert(b.end(), a.begin(), a.end()), a.clear();  // A empty
    const double sink = u(rng);
    const bool with_sink = r % 2 == 0, sink_in_a = r % 4 == 0;
    const double* s = with_sink ? &sink : nullptr;
    Partial(z, v, all, s, d, &want[size_t(r) * d], &want_lse[r]);
    Partial(z, v, a, with_sink && sink_in_a ? &sink : nullptr, d, &pa[size_t(r) * d], &la[r]);
    Partial(z, v, b, with_sink && !sink_in_a ? &sink : nullptr, d, &pb[size_t(r) * d], &lb[r]);
    // An empty part's output is never read: give it garbage.
    const double nan = std::numeric_limits<double>::quiet_NaN();
    if (la[r] == kNegInf) std::fill_n(&pa[size_t(r) * d], d, nan);
    if (lb[r] == kNegInf) std::fill_n(&pb[size_t(r) * d], d, nan);
  }
  // The parts as the library receives them.
  const size_t n = size_t(rows) * d, elem = mc.dtype == SWA_DTYPE_FP32 ? 4 : 2;
  std::vector<uint8_t> a(n * elem), b(n * elem), out(n * elem, 0xFF);
  std::vector<float> fa(n), fb(n);
  for (size_t i = 0; i < n; ++i) {
    fa[i] = float(pa[i]), fb[i] = float(pb[i]);
    if (mc.dtype == SWA_DTYPE_BF16) {
      const uint16_t ha = ToBf16(fa[i]), hb = ToBf16(fb[i]);
      std::memcpy(&a[2 * i], &ha, 2), std::memcpy(&b[2 * i], &hb, 2);
    } else {
      std::memcpy(&a[4 * i], &fa[i], 4), std::memcpy(&b[4 * i], &fb[i], 4);
    }
  }
  std::vector<float> fla(la.begin(), la.end()), flb(lb.begin(), lb.end());
  std::vector<float> lse(rows, std::numeric_limits<float>::quiet_NaN());
  swa_merge_args_t m;
  swa_merge_args_init(&m);
  m.rows = rows;
  m.head_dim = d;
  m.dtype = mc.dtype;
  m.out_a = a.data();
  m.lse_a = fla.data();
  m.out_b = b.data();
  m.lse_b = flb.data();
  m.out = mc.in_place ? static_cast<void*>(a.data()) : out.data();
  m.lse = mc.in_place ? fla.data() : lse.data();
  ASSERT_EQ(swa_attention_merge(cache, &m), SWA_OK) << swa_last_error();
  const uint8_t* got = static_cast<const uint8_t*>(m.out);
  const float* got_lse = m.lse;
  std::vector<float> x(n);
  double err = 0, ref = 0;
  for (size_t i = 0; i < n; ++i) {
    if (mc.dtype == SWA_DTYPE_BF16) {
      uint16_t h;
      std::memcpy(&h, got + 2 * i, 2);
      x[i] = FromBf16(h);
    } else {
      std::memcpy(&x[i], got + 4 * i, 4);
    }
    ASSERT_TRUE(std::isfinite(x[i])) << i;
    err += (x[i] - want[i]) * (x[i] - want[i]);
    ref += want[i] * want[i];
  }
  // BF16: the parts were rounded to BF16 and so is the result (2^-9 each);
  // bit-exactness is Bf16IsTheFp32MergeRoundedToNearestEven's.
  const double tol = mc.dtype == SWA_DTYPE_FP32 ? 1e-6 : 5e-3;
  EXPECT_LE(std::sqrt(err / ref), tol);
  for (int r = 0; r < rows; ++r) {
    if (want_lse[r] == kNegInf) {
      EXPECT_EQ(got_lse[r], -std::numeric_limits<float>::infinity()) << r;
      for (int i = 0; i < d; ++i) EXPECT_EQ(x[size_t(r) * d + i], 0.0f) << r << ", " << i;
      continue;
    }
    EXPECT_NEAR(got_lse[r], want_lse[r], 1e-5 * std::max(1.0, std::fabs(want_lse[r]))) << r;
  }
  swa_cache_destroy(cache);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MergeTest,
                         ::testing::Values(MergeCase{SWA_DTYPE_FP32, false, false},
                                           MergeCase{SWA_DTYPE_FP32, true, false},
                                           MergeCase{SWA_DTYPE_BF16, false, false},
                                           MergeCase{SWA_DTYPE_FP32, false, true},
                                           MergeCase{SWA_DTYPE_FP32, true, true},
                                           MergeCase{SWA_DTYPE_BF16, false, true}));

// Random parts with FP32 inputs for the large tests: LSEs in [-6, 6], some
// rows with A or B (or both) empty and NaN garbage in the empty part, some
// with LSEs 90 apart (weights that underflow); outputs in [-1, 1].
struct RandomParts {
  std::vector<float> a, b, la, lb;
  RandomParts(int rows, int d, uint64_t seed)
      : a(size_t(rows) * d), b(a.size()), la(rows), lb(rows) {
    std::mt19937_64 rng(seed);
    swa_test::UniformReal<float> u(-1, 1);
    const float inf = std::numeric_limits<float>::infinity();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (float& x : a) x = u(rng);
    for (float& x : b) x = u(rng);
    for (int r = 0; r < rows; ++r) {
      la[r] = 6 * u(rng), lb[r] = 6 * u(rng);
      if (r % 11 == 3) lb[r] = la[r] + 90;
      if (r % 9 == 0) la[r] = -inf;
      if (r % 13 == 0) lb[r] = -inf;
      if (la[r] == -inf) std::fill_n(&a[size_t(r) * d], d, nan);
      if (lb[r] == -inf) std::fill_n(&b[size_t(r) * d], d, nan);
    }
  }
};

// The parallel path (rows * dim >= 65536 on a pool of more than one thread:
// docs/cpu_attention.md) against FP64, every row: a chunk boundary handled
// wrongly leaves the poison or another row's values.
TEST(Merge, ParallelPathMatchesFp64RowByRow) {
  swa_cache_t* cache = swa_test::MergeCache(4);
  const int rows = 2085, d = 64;  // 133440 values; the last chunk of 64 rows is partial
  ASSERT_GE(size_t(rows) * d, size_t{1} << 16);
  const RandomParts p(rows, d, 91);
  std::vector<float> out(p.a.size(), std::numeric_limits<float>::quiet_NaN());
  std::vector<float> lse(rows, std::numeric_limits<float>::quiet_NaN());
  ASSERT_EQ(swa_test::RunMerge(cache, rows, d, SWA_DTYPE_FP32, p.a.data(), p.la.data(), p.b.data(),
                               p.lb.data(), out.data(), lse.data()),
            SWA_OK)
      << swa_last_error();
  int bad_rows = 0;
  for (int r = 0; r < rows && bad_rows < 5; ++r) {
    // FP64 weights; an empty (-inf) part has weight 0 and its output is not read.
    const double la = p.la[r], lb = p.lb[r], m = std::max(la, lb);
    const double wa = la == kNegInf ? 0 : std::exp(la - m);
    const double wb = lb == kNegInf ? 0 : std::exp(lb - m);
    const double want_lse = m == kNegInf ? kNegInf : m + std::log(wa + wb);
    bool ok = want_lse == kNegInf
                  ? lse[r] == -std::numeric_limits<float>::infinity()
                  : std::fabs(lse[r] - want_lse) <= 1e-6 * std::max(1.0, std::fabs(want_lse));
    for (int i = 0; i < d; ++i) {
      const size_t k = size_t(r) * d + i;
      const double sa = wa > 0 ? wa * p.a[k] : 0.0, sb = wb > 0 ? wb * p.b[k] : 0.0;
      const double want = m == kNegInf ? 0.0 : (sa + sb) / (wa + wb);
      ok = ok && std::fabs(out[k] - want) <= 1e-6;  // |out| <= 1
    }
    if (!ok) {
      ++bad_rows;
      ADD_FAILURE() << "row " << r << ": lse " << lse[r] << " (want " << want_lse << "), out[0] "
                    << out[size_t(r) * d];
    }
  }
  swa_cache_destroy(cache);
}

// The BF16 merge is the FP32 merge of the same (BF16) values, rounded to
// nearest even: bit for bit, on the serial and the parallel path.
TEST(Merge, Bf16IsTheFp32MergeRoundedToNearestEven) {
  swa_cache_t* cache = swa_test::MergeCache(4);
  for (const int rows : {300, 2085}) {
    const int d = 64;
    const size_t n = size_t(rows) * d;
    RandomParts p(rows, d, 17 + rows);
    std::vector<uint16_t> a16(n), b16(n), out16(n, 0x7FBF);  // poison: a NaN
    for (size_t i = 0; i < n; ++i) {
      // Inputs with all 16 bits set at random (the FP32 values' low bits dropped).
      uint32_t ua, ub;
      std::memcpy(&ua, &p.a[i], 4), std::memcpy(&ub, &p.b[i], 4);
      a16[i] = uint16_t(ua >> 16), b16[i] = uint16_t(ub >> 16);
      p.a[i] = swa_test::Bf16Value(a16[i]), p.b[i] = swa_test::Bf16Value(b16[i]);
    }
    // Ties: equal LSEs (weights 1/2 exactly) and outputs one BF16 step apart
    // in [1, 2) make every merged value a midpoint between two BF16 values.
    for (int r = 5; r < rows; r += 17) {
      p.la[r] = p.lb[r] = 0.375f;
      for (int i = 0; i < d; ++i) {
        const size_t k = size_t(r) * d + i;
        a16[k] = uint16_t(0x3F80 + i), b16[k] = uint16_t(a16[k] + 1);
        p.a[k] = swa_test::Bf16Value(a16[k]), p.b[k] = swa_test::Bf16Value(b16[k]);
      }
    }
    std::vector<float> out32(n), lse32(rows), lse16(rows);
    ASSERT_EQ(swa_test::RunMerge(cache, rows, d, SWA_DTYPE_FP32, p.a.data(), p.la.data(),
                                 p.b.data(), p.lb.data(), out32.data(), lse32.data()),
              SWA_OK)
        << swa_last_error();
    ASSERT_EQ(swa_test::RunMerge(cache, rows, d, SWA_DTYPE_BF16, a16.data(), p.la.data(),
                                 b16.data(), p.lb.data(), out16.data(), lse16.data()),
              SWA_OK)
        << swa_last_error();
    size_t mismatches = 0, rounded_up = 0, ties = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint16_t want = swa_test::RoundToBf16(out32[i]);
      rounded_up += (want & 0x7FFF) > ((std::bit_cast<uint32_t>(out32[i]) >> 16) & 0x7FFF);
      ties += (std::bit_cast<uint32_t>(out32[i]) & 0xFFFF) == 0x8000;
      const bool same = std::isnan(out32[i]) ? std::isnan(swa_test::Bf16Value(out16[i]))
                                             : out16[i] == want;
      if (!same && ++mismatches <= 5)
        ADD_FAILURE() << "rows " << rows << ", value " << i << ": FP32 merge " << out32[i]
                      << " rounds to 0x" << std::hex << want << ", BF16 merge gave 0x" << out16[i]
                      << std::dec;
    }
    EXPECT_EQ(mismatches, 0u) << "rows " << rows;
    EXPECT_GT(rounded_up, n / 4) << "the case must tell rounding from truncation";
    EXPECT_GT(ties, size_t(d) * (rows / 17)) << "the case must tell ties to even from ties away";
    for (int r = 0; r < rows; ++r)
      ASSERT_EQ(std::bit_cast<uint32_t>(lse16[r]), std::bit_cast<uint32_t>(lse32[r])) << r;
  }
  swa_cache_destroy(cache);
}

TEST(Merge, RejectsBadArguments) {
  swa_cache_t* cache = MakeCache();
  float x[4] = {1, 2, 3, 4}, l[2] = {0, 0};
  swa_merge_args_t m;
  swa_merge_args_init(&m);
  m.rows = 2, m.head_dim = 2, m.out_a = x, m.lse_a = l, m.out_b = x, m.lse_b = l, m.out = x;
  EXPECT_EQ(swa_attention_merge(cache, nullptr), SWA_INVALID_ARGUMENT);
  swa_merge_args_t bad = m;
  bad.rows = -1;
  EXPECT_EQ(swa_attention_merge(cache, &bad), SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(swa_last_error()).find("rows"), std::string::npos);
  bad = m, bad.head_dim = 0;
  EXPECT_EQ(swa_attention_merge(cache, &bad), SWA_INVALID_ARGUMENT);
  bad = m, bad.lse_b = nullptr;
  EXPECT_EQ(swa_attention_merge(cache, &bad), SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(swa_last_error()).find("lse_b"), std::string::npos);
  bad = m, bad.dtype = static_cast<swa_dtype_t>(7);
  EXPECT_EQ(swa_attention_merge(cache, &bad), SWA_INVALID_ARGUMENT);
  bad = m, bad.struct_size = 3;
  EXPECT_EQ(swa_attention_merge(cache, &bad), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(x[0], 1.0f);  // nothing written by a refused call
  swa_cache_destroy(cache);
}

// The window attention of a swa_step (lse requested, sink given to it) merged
// with the test's attention over extra "compressed" keys (no sink) equals one
// softmax over the window keys and the extra keys.
TEST(Merge, WindowPlusCompressedEqualsOneSoftmax) {
  using namespace swa_reference;
  const int hq = 4, d = 64, T = 6;
  uint32_t slot;
  std::mt19937_64 rng(5);
  swa_test::UniformReal<double> u(-1, 1);
  std::vector<float> k(size_t(T) * d), q(size_t(T) * hq * d), sinks(hq);
  for (float& x : k) x = float(u(rng));
  for (float& x : q) x = float(u(rng));
  for (float& x : sinks) x = float(u(rng));
  swa_layer_desc_t l;
  swa_layer_desc_init(&l);
  l.q_heads = hq, l.head_dim = d, l.kv_format = SWA_FORMAT_FP32, l.has_sinks = 1;
  swa_config_t c;
  swa_config_init(&c);
  c.window = 8, c.max_slots = 1, c.backend = SWA_BACKEND_CPU, c.num_layers = 1, c.layers = &l;
  swa_cache_t* cache = nullptr;
  ASSERT_EQ(swa_cache_create(&c, &cache), SWA_OK) << swa_last_error();
  ASSERT_EQ(swa_slot_alloc(cache, &slot), SWA_OK);
  swa_plan_t* plan = nullptr;
  ASSERT_EQ(swa_plan_create(cache, &plan), SWA_OK);
  const swa_seq_t seq{slot, T, T, 0};
  ASSERT_EQ(swa_plan_build(plan, &seq, 1), SWA_OK);
  std::vector<float> out(q.size()), lse(size_t(T) * hq);
  swa_step_args_t a;
  swa_step_args_init(&a);
  a.q = q.data(), a.k_new = k.data(), a.out = out.data(), a.sinks = sinks.data(), a.lse = lse.data();
  ASSERT_EQ(swa_step(cache, plan, &a), SWA_OK) << swa_last_error();
  // Extra keys (shared K=V), visible to every token.
  const int extra = 5;
  std::vector<std::vector<double>> ek(extra, std::vector<double>(d));
  for (auto& e : ek)
    for (double& x : e) x = u(rng);
  const double scale = 1.0 / std::sqrt(double(d));
  std::vector<float> ob(q.size()), lb(lse.size());
  std::vector<double> want(q.size());
  for (int t = 0; t < T; ++t)
    for (int hh = 0; hh < hq; ++hh) {
      const float* qv = &q[(size_t(t) * hq + hh) * d];
      std::vector<double> z;
      std::vector<std::vector<double>> vals;
      std::vector<int> part_b, all;
      for (int j = 0; j <= t; ++j) {  // window keys (W 8 > T: all earlier ones)
        double dot = 0;
        for (int i = 0; i < d; ++i) dot += double(qv[i]) * double(k[size_t(j) * d + i]);
        z.push_back(scale * dot), vals.emplace_back(&k[size_t(j) * d], &k[size_t(j) * d] + d);
        all.push_back(int(z.size()) - 1);
      }
      for (const auto& e : ek) {
        double dot = 0;
        for (int i = 0; i < d; ++i) dot += double(qv[i]) * e[i];
        z.push_back(scale * dot), vals.push_back(e);
        all.push_back(int(z.size()) - 1), part_b.push_back(int(z.size()) - 1);
      }
      const double s = sinks[hh];
      double lall, lpart;
      std::vector<double> o(d);
      Partial(z, vals, all, &s, d, &want[(size_t(t) * hq + hh) * d], &lall);
      Partial(z, vals, part_b, nullptr, d, o.data(), &lpart);
      for (int i = 0; i < d; ++i) ob[(size_t(t) * hq + hh) * d + i] = float(o[i]);
      lb[size_t(t) * hq + hh] = float(lpart);
    }
  swa_merge_args_t m;
  swa_merge_args_init(&m);
  m.rows = T * hq, m.head_dim = d, m.out_a = out.data(), m.lse_a = lse.data();
  m.out_b = ob.data(), m.lse_b = lb.data(), m.out = out.data(), m.lse = lse.data();
  ASSERT_EQ(swa_attention_merge(cache, &m), SWA_OK) << swa_last_error();
  EXPECT_LE(RelativeL2(out.data(), want.data(), want.size()), 1e-5);
  swa_plan_destroy(plan);
  swa_cache_destroy(cache);
}

}  // namespace

// Without a cache (device -1, the default) the merge runs on the calling
// thread: the same bits as a cache's merge, on the parallel path's sizes too,
// and FP64-close row by row.
TEST(MergeNoCache, SameBitsAsACachesMergeAndFp64Close) {
  swa_cache_t* cache = swa_test::MergeCache(4);
  const int rows = 2085, d = 64;
  const RandomParts p(rows, d, 5);
  std::vector<float> with(p.a.size(), std::numeric_limits<float>::quiet_NaN()), without = with;
  std::vector<float> lse_with(rows, std::numeric_limits<float>::quiet_NaN()), lse_without = lse_with;
  ASSERT_EQ(swa_test::RunMerge(cache, rows, d, SWA_DTYPE_FP32, p.a.data(), p.la.data(), p.b.data(),
                               p.lb.data(), with.data(), lse_with.data()),
            SWA_OK)
      << swa_last_error();
  ASSERT_EQ(swa_test::RunMerge(nullptr, rows, d, SWA_DTYPE_FP32, p.a.data(), p.la.data(),
                               p.b.data(), p.lb.data(), without.data(), lse_without.data()),
            SWA_OK)
      << swa_last_error();
  for (size_t i = 0; i < with.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(with[i]), std::bit_cast<uint32_t>(without[i])) << i;
  for (int r = 0; r < rows; ++r) {
    ASSERT_EQ(std::bit_cast<uint32_t>(lse_with[r]), std::bit_cast<uint32_t>(lse_without[r])) << r;
    const double la = p.la[r], lb = p.lb[r], m = std::max(la, lb);
    const double wa = la == kNegInf ? 0 : std::exp(la - m);
    const double wb = lb == kNegInf ? 0 : std::exp(lb - m);
    for (int i = 0; i < d; ++i) {
      const size_t k = size_t(r) * d + i;
      const double sa = wa > 0 ? wa * p.a[k] : 0.0, sb = wb > 0 ? wb * p.b[k] : 0.0;
      const double want = wa + wb > 0 ? (sa + sb) / (wa + wb) : 0.0;
      ASSERT_NEAR(without[k], want, 1e-6) << r << ", " << i;
    }
  }
  swa_cache_destroy(cache);
}

// A refused cache-less call names the value and writes nothing; `device`
// must agree with a given cache.
TEST(MergeNoCache, RejectsBadArgumentsNamingTheValue) {
  float x[4] = {1, 2, 3, 4}, l[2] = {0, 0}, lse[2] = {-7, -7};
  swa_merge_args_t m;
  swa_merge_args_init(&m);
  EXPECT_EQ(m.device, -1);
  m.rows = 2, m.head_dim = 2, m.out_a = x, m.lse_a = l, m.out_b = x, m.lse_b = l, m.out = x;
  m.lse = lse;
  auto refused = [&](const swa_merge_args_t& a, swa_status_t want, const std::string& names,
                     swa_cache_t* cache = nullptr) {
    EXPECT_EQ(swa_attention_merge(cache, &a), want) << names;
    EXPECT_NE(std::string(swa_last_error()).find(names), std::string::npos)
        << swa_last_error();
    EXPECT_EQ(x[0], 1.0f);
    EXPECT_EQ(lse[0], -7.0f);
  };
  EXPECT_EQ(swa_attention_merge(nullptr, nullptr), SWA_INVALID_ARGUMENT);
  swa_merge_args_t bad = m;
  bad.rows = -3;
  refused(bad, SWA_INVALID_ARGUMENT, "rows = -3");
  bad = m, bad.head_dim = 0;
  refused(bad, SWA_INVALID_ARGUMENT, "head_dim = 0");
  bad = m, bad.out_b = nullptr;
  refused(bad, SWA_INVALID_ARGUMENT, "out_b");
  bad = m, bad.dtype = static_cast<swa_dtype_t>(9);
  refused(bad, SWA_INVALID_ARGUMENT, "dtype");
  bad = m, bad.struct_size = 12;
  refused(bad, SWA_INVALID_ARGUMENT, "struct_size = 12");
  bad = m, bad.device = -2;
  refused(bad, SWA_INVALID_ARGUMENT, "device = -2");
  // No such CUDA device (or no CUDA backend in this build).
  bad = m, bad.device = 1 << 20;
  EXPECT_NE(swa_attention_merge(nullptr, &bad), SWA_OK);
  EXPECT_NE(std::string(swa_last_error()).find("device = 1048576"), std::string::npos)
      << swa_last_error();
  EXPECT_EQ(x[0], 1.0f);
  // A CPU cache takes device -1 only.
  swa_cache_t* cache = swa_test::MergeCache(1);
  bad = m, bad.device = 0;
  refused(bad, SWA_INVALID_ARGUMENT, "device = 0 but the cache is on the CPU backend", cache);
  swa_cache_destroy(cache);
  // rows = 0 is a no-op without a cache too.
  bad = m, bad.rows = 0, bad.out = nullptr;
  EXPECT_EQ(swa_attention_merge(nullptr, &bad), SWA_OK) << swa_last_error();
}
