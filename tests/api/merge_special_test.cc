// swa_attention_merge with NaN and infinite LSEs, and its symmetry in the two
// parts (docs/semantics.md, "Merging partial attentions"): a NaN LSE in
// either part poisons the row (NaN output and LSE) whichever part it is in;
// -inf is an empty part whose output is never read; +inf (FA2's and FlashMLA's
// empty row) is an empty part whose output is still read, so a NaN there
// shows; a finite LSE's output is read even when its weight underflows.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "api/merge_util.h"
#include "gtest/gtest.h"
#include "swacache.h"
#include "test_random.h"

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr int kDim = 3;
using Row = std::array<float, kDim>;

struct Case {
  const char* name;
  float la, lb;
  Row oa, ob;
  Row want;        // NaN: the value must be NaN
  float want_lse;  // NaN: must be NaN
};

// The exact merge of two finite LSEs, for the expectations.
float Mixed(float la, float lb, float oa, float ob) {
  const double m = std::max(la, lb), wa = std::exp(la - m), wb = std::exp(lb - m);
  return float((wa * oa + wb * ob) / (wa + wb));
}
float MixedLse(float la, float lb) {
  const double m = std::max(la, lb);
  return float(m + std::log(std::exp(la - m) + std::exp(lb - m)));
}

bool Matches(float got, float want, bool exact) {
  if (std::isnan(want)) return std::isnan(got);
  if (exact || std::isinf(want)) return got == want;
  return std::fabs(got - want) <= 1e-6f * std::max(1.0f, std::fabs(want));
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class MergeSpecial : public ::testing::TestWithParam<Case> {};

// Each case in both orders: the same result whichever part is A; with a
// cache and without one (host memory, device -1).
TEST_P(MergeSpecial, EitherOrder) {
  const Case c = GetParam();
  swa_cache_t* with_cache = swa_test::MergeCache(1);
  for (swa_cache_t* cache : {with_cache, static_cast<swa_cache_t*>(nullptr)}) {
    SCOPED_TRACE(cache ? "with a cache" : "without a cache");
    const bool exact = !(std::isfinite(c.la) && std::isfinite(c.lb) && std::fabs(c.la - c.lb) < 50);
    Row got[2];
    float got_lse[2];
    for (int swap = 0; swap < 2; ++swap) {
      const Row& a = swap ? c.ob : c.oa;
      const Row& b = swap ? c.oa : c.ob;
      const float la = swap ? c.lb : c.la, lb = swap ? c.la : c.lb;
      Row out;
      out.fill(-777.0f);
      float lse = -777.0f;
      ASSERT_EQ(swa_test::RunMerge(cache, 1, kDim, SWA_DTYPE_FP32, a.data(), &la, b.data(), &lb,
                                   out.data(), &lse),
                SWA_OK)
          << swa_last_error();
      for (int i = 0; i < kDim; ++i)
        EXPECT_TRUE(Matches(out[i], c.want[i], exact))
            << c.name << (swap ? " (swapped)" : "") << ": out[" << i << "] = " << out[i]
            << ", want " << c.want[i];
      EXPECT_TRUE(Matches(lse, c.want_lse, exact))
          << c.name << (swap ? " (swapped)" : "") << ": lse = " << lse << ", want " << c.want_lse;
      got[swap] = out, got_lse[swap] = lse;
    }
    for (int i = 0; i < kDim; ++i)
      if (!std::isnan(got[0][i]))
        EXPECT_EQ(std::bit_cast<uint32_t>(got[0][i]), std::bit_cast<uint32_t>(got[1][i])) << i;
    if (!std::isnan(got_lse[0]))
      EXPECT_EQ(std::bit_cast<uint32_t>(got_lse[0]), std::bit_cast<uint32_t>(got_lse[1]));
  }
  swa_cache_destroy(with_cache);
}

const Row kNaNRow = {kNaN, kNaN, kNaN};
const Row kZero = {0, 0, 0};

// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Cases, MergeSpecial,
    ::testing::Values(
        //   name                                           la     lb      out_a               out_b             want          want_lse
        Case{"NaN LSE with an empty part",                  kNaN,  -kInf,  {1, 2, 3},          {4, 5, 6},        kNaNRow,      kNaN},
        Case{"NaN LSE with a finite part",                  kNaN,  0.5f,   {1, 2, 3},          {4, 5, 6},        kNaNRow,      kNaN},
        Case{"NaN LSE with a +inf part",                    kNaN,  kInf,   {1, 2, 3},          {0, 0, 0},        kNaNRow,      kNaN},
        Case{"two NaN LSEs",                                kNaN,  kNaN,   {1, 2, 3},          {4, 5, 6},        kNaNRow,      kNaN},
        Case{"both empty, garbage outputs",                 -kInf, -kInf,  {kNaN, kInf, 7},    {kNaN, -kInf, 8}, kZero,        -kInf},
        Case{"-inf part is never read",                     -kInf, 0.25f,  {kNaN, kInf, -kInf}, {1, 2, 3},       {1, 2, 3},    0.25f},
        Case{"+inf is an empty part (FA2, FlashMLA)",       kInf,  1.5f,   {0, 0, 0},          {1, -2, 3},       {1, -2, 3},   1.5f},
        Case{"+inf part's NaN output is not hidden",        kInf,  1.5f,   kNaNRow,            {1, -2, 3},       kNaNRow,      1.5f},
        Case{"+inf and -inf",                               kInf,  -kInf,  {0, 0, 0},          {kNaN, 5, 6},     kZero,        -kInf},
        Case{"+inf and +inf",                               kInf,  kInf,   {0, 0, 0},          {0, 0, 0},        kZero,        -kInf},
        Case{"finite LSE, underflowing weight, NaN output", 0.0f,  200.0f, {kNaN, 1, kInf},    {1, 2, 3},        {kNaN, 2, kNaN}, 200.0f},
        Case{"NaN in one output value, finite LSEs",        0.0f,  0.5f,   {1, kNaN, 3},       {4, 5, 6},
             {Mixed(0, 0.5f, 1, 4), kNaN, Mixed(0, 0.5f, 3, 6)}, MixedLse(0, 0.5f)}),
    [](const ::testing::TestParamInfo<Case>& info) { return "case" + std::to_string(info.index); });
// clang-format on

// Random rows drawn from finite, equal, far-apart, +-inf and NaN LSEs and
// outputs with an occasional NaN or Inf: merging (A, B) and (B, A) gives the
// same bits (NaN for NaN), in FP32 and BF16.
TEST(MergeSpecial, SwappingThePartsGivesTheSameBits) {
  swa_cache_t* cache = swa_test::MergeCache(1);
  const int rows = 600, d = 16;
  const size_t n = size_t(rows) * d;
  std::mt19937_64 rng(2024);
  swa_test::UniformReal<float> u(-1, 1);
  const float specials[] = {kNaN, kInf, -kInf, 0.0f, 80.0f, -80.0f};
  std::vector<float> a(n), b(n), la(rows), lb(rows);
  for (size_t i = 0; i < n; ++i) {
    a[i] = rng() % 50 == 0 ? specials[rng() % 3] : u(rng);
    b[i] = rng() % 50 == 0 ? specials[rng() % 3] : u(rng);
  }
  for (int r = 0; r < rows; ++r) {
    la[r] = rng() % 3 == 0 ? specials[rng() % 6] : 4 * u(rng);
    lb[r] = rng() % 3 == 0 ? specials[rng() % 6] : 4 * u(rng);
    if (r % 10 == 0) lb[r] = la[r];
  }
  for (swa_dtype_t dtype : {SWA_DTYPE_FP32, SWA_DTYPE_BF16}) {
    const size_t elem = dtype == SWA_DTYPE_FP32 ? 4 : 2;
    std::vector<uint8_t> ba(n * elem), bb(n * elem), o1(n * elem, 0xAB), o2(n * elem, 0xCD);
    for (size_t i = 0; i < n; ++i) {
      if (dtype == SWA_DTYPE_FP32) {
        std::memcpy(&ba[4 * i], &a[i], 4), std::memcpy(&bb[4 * i], &b[i], 4);
      } else {
        const uint16_t ha = swa_test::RoundToBf16(a[i]), hb = swa_test::RoundToBf16(b[i]);
        std::memcpy(&ba[2 * i], &ha, 2), std::memcpy(&bb[2 * i], &hb, 2);
      }
    }
    std::vector<float> l1(rows, 1.0f), l2(rows, 2.0f);
    ASSERT_EQ(swa_test::RunMerge(cache, rows, d, dtype, ba.data(), la.data(), bb.data(), lb.data(),
                                 o1.data(), l1.data()),
              SWA_OK);
    ASSERT_EQ(swa_test::RunMerge(cache, rows, d, dtype, bb.data(), lb.data(), ba.data(), la.data(),
                                 o2.data(), l2.data()),
              SWA_OK);
    auto value = [&](const std::vector<uint8_t>& o, size_t i) {
      if (dtype == SWA_DTYPE_FP32) {
        float f;
        std::memcpy(&f, &o[4 * i], 4);
        return f;
      }
      uint16_t h;
      std::memcpy(&h, &o[2 * i], 2);
      return swa_test::Bf16Value(h);
    };
    int differing = 0;
    for (int r = 0; r < rows; ++r) {
      const bool nan_row = std::isnan(la[r]) || std::isnan(lb[r]);
      bool same = std::isnan(l1[r])
                      ? std::isnan(l2[r])
                      : std::bit_cast<uint32_t>(l1[r]) == std::bit_cast<uint32_t>(l2[r]);
      if (nan_row) same = same && std::isnan(l1[r]);
      for (int i = 0; i < d; ++i) {
        const float x1 = value(o1, size_t(r) * d + i), x2 = value(o2, size_t(r) * d + i);
        same =
            same && (std::isnan(x1) ? std::isnan(x2)
                                    : std::bit_cast<uint32_t>(x1) == std::bit_cast<uint32_t>(x2));
        if (nan_row) same = same && std::isnan(x1);
      }
      if (!same && ++differing <= 5)
        ADD_FAILURE() << "dtype " << dtype << ", row " << r << ": lse_a " << la[r] << ", lse_b "
                      << lb[r] << " -> lse " << l1[r] << " vs " << l2[r];
    }
    EXPECT_EQ(differing, 0) << "dtype " << dtype;
  }
  swa_cache_destroy(cache);
}

}  // namespace
