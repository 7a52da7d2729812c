// Host+device helpers of the CUDA kernels' RoPE, soft-cap and LSE, run on the
// CPU against what the CPU step does (src/backend/cpu/cpu_step.cc,
// attention.cc):
//  - common/rope.h RopeFreqOf inverts RopePair;
//  - kernels/step/rope_apply.h: a cos/sin table entry (RopeTableEntry, what
//    the table kernel writes) scaled by the factor equals the CPU step's
//    RopeAngle and the FP32 formula bit for bit (positions past 2^16 and 2^24,
//    YaRN tables of real models); a dim rotated on its own from a table row
//    (the kernels' way) equals RotateHead over the whole vector bit for bit
//    (both styles, partial dims, YaRN, de-rotation), and an encoded MXFP8
//    block of a rotated key equals the CPU codec's bytes of the rotated vector
//    (NEOX partners in other blocks);
//  - TokenSeq (the table kernel's token -> sequence) against the plan's
//    token numbering, and (with CUDA) RopeParamsOf;
//  - kernels/attention/softmax_stats.h against the formulas.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "codec/codec.h"
#include "common/rope.h"
#include "gtest/gtest.h"
#include "kernels/attention/softmax_stats.h"
#include "kernels/step/mxfp8_block.h"
#include "kernels/step/rope_apply.h"
#include "layout/rope_table.h"
#include "unit/rope_goldens.h"
#if defined(SWACACHE_HAVE_CUDA)
#include "backend/cuda/step_params.h"
#endif
#include "test_random.h"

namespace swa {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

struct Case {
  const char* name;
  uint32_t head_dim;
  RopeSpec spec;
};

std::vector<Case> Cases() {
  std::vector<Case> c;
  RopeSpec s;
  s.style = RopeStyle::kNeox;
  s.dims = 128;
  c.push_back({"neox full 128", 128, s});
  s.style = RopeStyle::kGptj;
  c.push_back({"gptj full 128", 128, s});
  s.style = RopeStyle::kNeox;  // DeepSeek-V4-like: the last 64 dims of 512 rotate
  s.first_dim = 448;
  s.dims = 64;
  s.derotate_output = true;
  c.push_back({"neox partial 448+64 of 512", 512, s});
  s.style = RopeStyle::kGptj;
  s.first_dim = 16;
  s.dims = 40;  // partial, not block-aligned
  s.derotate_output = false;
  c.push_back({"gptj partial 16+40 of 64", 64, s});
  s.style = RopeStyle::kNeox;
  s.first_dim = 0;
  s.dims = 256;
  s.theta = 1e6f;
  s.yarn_factor = 40.0f;
  s.yarn_original_max_positions = 4096;
  c.push_back({"neox yarn 256", 256, s});
  s.yarn_truncate = false;
  s.attention_factor = 0.7f;
  s.style = RopeStyle::kGptj;
  s.first_dim = 64;
  s.dims = 128;
  c.push_back({"gptj yarn partial, factor", 256, s});
  return c;
}

kernels::RopeParams ParamsOf(const RopeTable& t) {
  kernels::RopeParams r;
  r.style = t.style;
  r.first_dim = int32_t(t.first_dim);
  r.dims = int32_t(t.dims);
  r.attention_factor = t.attention_factor;
  r.derotate_output = t.derotate_output;
  return r;
}

// A token's row of the cos/sin table, as the table kernel fills it.
std::vector<kernels::RopeCs> TableRow(const RopeTable& t, int32_t pos) {
  std::vector<kernels::RopeCs> row(t.dims / 2);
  for (uint32_t i = 0; i < t.dims / 2; ++i)
    row[i] = kernels::RopeTableEntry(float(pos), t.inv_freq[i]);
  return row;
}

// cos/sin of a position as the CPU step lays them out for RotateHead.
void Angles(const RopeTable& t, int32_t pos, float factor, std::vector<float>* cs) {
  const uint32_t half = t.dims / 2;
  cs->resize(2 * size_t(half));
  for (uint32_t i = 0; i < half; ++i)
    RopeAngle(float(pos), t.inv_freq[i], factor, &(*cs)[i], &(*cs)[half + i]);
}

TEST(CudaRopeMath, FreqOfInvertsPair) {
  for (RopeStyle style : {RopeStyle::kNeox, RopeStyle::kGptj})
    for (uint32_t first : {0u, 3u, 448u})
      for (uint32_t n : {2u, 8u, 40u, 64u}) {
        std::vector<int> seen(first + n + 8, 0);
        for (uint32_t i = 0; i < n / 2; ++i) {
          uint32_t a, b, fi;
          bool is_first;
          RopePair(style, first, n, i, &a, &b);
          ASSERT_TRUE(RopeFreqOf(style, first, n, a, &fi, &is_first));
          EXPECT_EQ(fi, i);
          EXPECT_TRUE(is_first);
          ASSERT_TRUE(RopeFreqOf(style, first, n, b, &fi, &is_first));
          EXPECT_EQ(fi, i);
          EXPECT_FALSE(is_first);
          ++seen[a];
          ++seen[b];
        }
        for (uint32_t e = 0; e < seen.size(); ++e) {
          uint32_t fi;
          bool is_first;
          const bool rotary = e >= first && e < first + n;
          EXPECT_EQ(RopeFreqOf(style, first, n, e, &fi, &is_first), rotary) << e;
          EXPECT_EQ(seen[e], rotary ? 1 : 0) << "dim " << e;
        }
        uint32_t fi;
        bool is_first;
        EXPECT_FALSE(RopeFreqOf(RopeStyle::kNone, first, n, first, &fi, &is_first));
      }
}

TEST(CudaRopeMath, DimByDimEqualsRotateHeadBitForBit) {
  std::mt19937 rng(7);
  swa_test::UniformReal<float> u(-3.0f, 3.0f);
  const int32_t positions[] = {0, 1, 2, 7, 127, 1000, 4095, 65537, 1 << 20};
  for (const Case& c : Cases()) {
    const RopeTable t = MakeRopeTable(c.spec);
    ASSERT_TRUE(t.on()) << c.name;
    const kernels::RopeParams r = ParamsOf(t);
    std::vector<float> v(c.head_dim), want, cs;
    for (int32_t pos : positions)
      for (float sign : {1.0f, -1.0f}) {
        // Query/key rotation: with the attention factor; output: -1, no factor.
        const float factor = sign > 0 ? t.attention_factor : 1.0f;
        for (float& x : v) x = u(rng);
        want = v;
        Angles(t, pos, factor, &cs);
        RotateHead(want.data(), t.style, t.first_dim, t.dims, cs.data(), cs.data() + t.dims / 2,
                   sign);
        const std::vector<kernels::RopeCs> row = TableRow(t, pos);
        for (uint32_t e = 0; e < c.head_dim; ++e) {
          const float got = kernels::RopeRotatedDim(r, e, row.data(), factor, sign,
                                                    [&](uint32_t d) { return v[d]; });
          ASSERT_EQ(Bits(got), Bits(want[e]))
              << c.name << " pos " << pos << " sign " << sign << " dim " << e;
        }
      }
  }
}

TEST(CudaRopeMath, EncodedRotatedKeyBlocksEqualCpuCodecBytes) {
  std::mt19937 rng(11);
  swa_test::UniformReal<float> u(-2.0f, 2.0f);
  for (const Case& c : Cases()) {
    const RopeTable t = MakeRopeTable(c.spec);
    const kernels::RopeParams r = ParamsOf(t);
    const uint32_t d = c.head_dim;
    const uint32_t vb = VectorBytes(Format::kMxfp8, d);
    std::vector<float> k(d), rotated, cs;
    std::vector<uint8_t> want(vb), got(vb);
    for (int iter = 0; iter < 40; ++iter) {
      const int32_t pos = iter * iter * 37 + iter;
      // Blocks of very different magnitude: a partner in another block moves amax.
      for (uint32_t e = 0; e < d; ++e) k[e] = u(rng) * (((e / 32) % 3 == 0) ? 64.0f : 0.25f);
      rotated = k;
      Angles(t, pos, t.attention_factor, &cs);
      RotateHead(rotated.data(), t.style, t.first_dim, t.dims, cs.data(), cs.data() + t.dims / 2,
                 1.0f);
      for (bool ceil : {true, false}) {
        codec::EncodeRows(Format::kMxfp8, ceil ? ScaleMode::kCeil : ScaleMode::kFloor, d, 1,
                          {rotated.data(), Dtype::kFp32, d}, {.base = want.data(), .stride = vb});
        std::fill(got.begin(), got.end(), 0xA5);
        const std::vector<kernels::RopeCs> row = TableRow(t, pos);
        for (uint32_t b = 0; b < d / 32; ++b) {  // as the encode kernel's thread of block b
          uint32_t bits[32];
          kernels::RotatedBlockBits(r, b, row.data(), [&](uint32_t e) { return k[e]; }, bits);
          kernels::EncodeMxfp8Block(bits, ceil, got.data() + 32 * b, got.data() + d + b);
        }
        ASSERT_EQ(got, want) << c.name << " pos " << pos << " ceil " << ceil;
      }
    }
  }
}

TEST(CudaRopeMath, TokenSeqFindsEachTokensSequence) {
  // q_start = seqlen_k - seqlen_q; empty sequences at the start, in between
  // and at the end (a host plan's), then a device plan's refused sequences
  // (seqlen_q 0) between runs of equal length.
  const std::vector<std::vector<PlannedSeq>> plans = {
      {{3, 2, 10, 8, 0, 0}, {0, 0, 5, 5, 0, 2}, {7, 3, 3, 0, 0, 2}, {1, 1, 1000, 999, 990, 5}},
      {{0, 0, 4, 4, 0, 0}, {5, 4, 9, 5, 0, 0}, {6, 0, 1, 1, 0, 4}},
      {{1, 3, 70000, 69997, 0, 0}, {0, 0, 3, 3, 0, 3}, {2, 3, 3, 0, 0, 6}, {0, 0, 3, 3, 0, 9},
       {0, 0, 3, 3, 0, 12}, {4, 3, 1 << 30, (1 << 30) - 3, 0, 15}},
      {{9, 1, 1, 0, 0, 0}},
      {}};
  for (size_t n = 0; n < plans.size(); ++n) {
    const std::vector<PlannedSeq>& seqs = plans[n];
    int32_t T = 0;
    for (const PlannedSeq& s : seqs) T = std::max(T, s.token_offset + s.seqlen_q);
    for (int64_t t = -1; t < T + 4; ++t) {
      int32_t want = -1;
      for (size_t i = 0; i < seqs.size(); ++i)
        if (t >= seqs[i].token_offset && t < seqs[i].token_offset + seqs[i].seqlen_q)
          want = int32_t(i);
      EXPECT_EQ(kernels::TokenSeq(seqs.data(), int32_t(seqs.size()), t), want)
          << "plan " << n << " token " << t;
    }
  }
}

// The table entry, scaled as the kernels scale it, is the CPU step's
// RopeAngle and the FP32 formula written out (one rounding of pos * inv_freq,
// cosf/sinf, one rounding of the factor product), for every frequency of the
// test layers and of real models' tables (transformers' goldens), at positions
// past 2^16 (and past 2^24, where float(pos) rounds).
TEST(CudaRopeMath, TableEntryEqualsRopeAngleBitForBit) {
  namespace g = swa_rope_goldens;
  std::vector<std::vector<float>> tables = {
      {g::kGptOss20b_inv_freq, g::kGptOss20b_inv_freq + 32},
      {g::kDeepseekV4Compress_inv_freq, g::kDeepseekV4Compress_inv_freq + 32},
      {g::kDeepseekV4Main_inv_freq, g::kDeepseekV4Main_inv_freq + 32}};
  for (const Case& c : Cases()) tables.push_back(MakeRopeTable(c.spec).inv_freq);
  const int32_t positions[] = {0,       1,        7,        4095,          65535,     65536,
                               65537,   131071,   1 << 20,  (1 << 24) + 1, 123456789, 0x7fffffff};
  const float factors[] = {1.0f, 0.7f, g::kGptOss20b_attention_factor, 1.25f};
  for (const std::vector<float>& inv : tables)
    for (int32_t pos : positions)
      for (float f : inv) {
        const kernels::RopeCs e = kernels::RopeTableEntry(float(pos), f);
        const float angle = float(pos) * f;
        ASSERT_EQ(Bits(e.c), Bits(std::cos(angle))) << pos << " " << f;
        ASSERT_EQ(Bits(e.s), Bits(std::sin(angle))) << pos << " " << f;
        for (float factor : factors) {
          float c, s, want_c, want_s;
          RopeScaled(e.c, e.s, factor, &c, &s);
          RopeAngle(float(pos), f, factor, &want_c, &want_s);
          ASSERT_EQ(Bits(c), Bits(want_c)) << pos << " " << f << " " << factor;
          ASSERT_EQ(Bits(s), Bits(want_s)) << pos << " " << f << " " << factor;
          ASSERT_EQ(Bits(c), Bits(std::cos(angle) * factor)) << pos << " " << f;
          ASSERT_EQ(Bits(s), Bits(std::sin(angle) * factor)) << pos << " " << f;
        }
      }
}

#if defined(SWACACHE_HAVE_CUDA)
// The host side of the device tables: the layer's RopeTable -> kernel params.
TEST(CudaRopeMath, RopeParamsOfCarriesTheTable) {
  for (const Case& c : Cases()) {
    const RopeTable t = MakeRopeTable(c.spec);
    const auto* dev = reinterpret_cast<const kernels::RopeCs*>(uintptr_t{0x1000});
    const kernels::RopeParams r = cuda::RopeParamsOf(t, dev);
    EXPECT_EQ(r.style, t.style);
    EXPECT_EQ(r.first_dim, int32_t(t.first_dim));
    EXPECT_EQ(r.dims, int32_t(t.dims));
    EXPECT_EQ(Bits(r.attention_factor), Bits(t.attention_factor));
    EXPECT_EQ(r.derotate_output, t.derotate_output);
    EXPECT_EQ(r.cos_sin, dev);
  }
  const kernels::RopeParams off = cuda::RopeParamsOf(MakeRopeTable(RopeSpec{}), nullptr);
  EXPECT_FALSE(off.on());
}
#endif

TEST(CudaSoftmaxStats, SoftCapAndLse) {
  for (float cap : {1.0f, 30.0f, 50.0f})
    for (float z : {-1e4f, -60.0f, -1.0f, 0.0f, 1e-3f, 2.5f, 49.0f, 1e4f}) {
      const float inv = 1.0f / cap;
      EXPECT_EQ(Bits(kernels::SoftCapScore(z, cap, inv)), Bits(cap * std::tanh(z * inv)));
      EXPECT_LE(std::fabs(kernels::SoftCapScore(z, cap, inv)), cap);
    }
  EXPECT_EQ(kernels::RowLse(3.0f, 0.0f), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(kernels::RowLse(-std::numeric_limits<float>::infinity(), 0.0f),
            -std::numeric_limits<float>::infinity());
  EXPECT_EQ(Bits(kernels::RowLse(1.5f, 1.0f)), Bits(1.5f));
  EXPECT_EQ(Bits(kernels::RowLse(-2.0f, 7.25f)), Bits(-2.0f + std::log(7.25f)));
  // A sink alone: m = S_h, l = 1 -> lse = S_h.
  EXPECT_EQ(kernels::RowLse(-0.75f, 1.0f), -0.75f);
}

}  // namespace
}  // namespace swa
