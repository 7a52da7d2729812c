// Host+device helpers of the CUDA kernels, run on the CPU:
//  - kernels/step/mxfp8_block.h against the independent MXFP8 oracle;
//  - kernels/attention/key_range.h against plan arrays built here from the
//    docs/semantics.md formulas and the brute-force visible-position lists.
#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/attention/key_range.h"
#include "kernels/step/mxfp8_block.h"
#include "unit/codec_inputs.h"
#include "unit/mxfp8_oracle.h"
#include "unit/plan_reference.h"

namespace swa {
namespace {

TEST(Mxfp8BlockDevice, MatchesOracleOnAdversarialBlocks) {
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 20000; ++iter) {
    float x[32];
    test::AdversarialBlock(rng, iter, x);
    uint32_t bits[32];
    for (int j = 0; j < 32; ++j) bits[j] = test::Bits(x[j]);
    for (bool ceil : {true, false}) {
      uint8_t want_codes[32], want_scale, codes[32], scale = 0x11;
      std::fill(codes, codes + 32, 0xA5);
      test::EncodeBlockOracle(x, ceil, want_codes, &want_scale);
      const uint32_t bad = kernels::EncodeMxfp8Block(bits, ceil, codes, &scale);
      ASSERT_EQ(scale, want_scale) << "iter " << iter << " ceil " << ceil;
      ASSERT_EQ(bad, want_scale == 0xFF ? 1u : 0u);
      for (int j = 0; j < 32; ++j)
        ASSERT_EQ(codes[j], want_codes[j]) << "iter " << iter << " element " << j << " value "
                                           << x[j] << " ceil " << ceil;
    }
  }
}

TEST(Mxfp8BlockDevice, PlainBlockNonFiniteFlag) {
  uint32_t bits[32];
  for (int j = 0; j < 32; ++j) bits[j] = test::Bits(float(j) - 7.5f);
  EXPECT_EQ(kernels::BlockIsNonFinite(bits), 0u);
  bits[31] = 0x7F800000u;  // +Inf
  EXPECT_EQ(kernels::BlockIsNonFinite(bits), 1u);
  bits[31] = 0;
  bits[3] = 0xFFC00001u;  // NaN
  EXPECT_EQ(kernels::BlockIsNonFinite(bits), 1u);
}

struct Batch {
  std::vector<plan_ref::Seq> seqs;
  int32_t w, r;
};

Batch RandomBatch(std::mt19937& rng, bool ring_only) {
  Batch b;
  b.w = std::uniform_int_distribution<int>(1, 40)(rng);
  const int n = std::uniform_int_distribution<int>(0, 6)(rng);
  b.r = b.w + n + 1;
  const int n_seqs = std::uniform_int_distribution<int>(1, 6)(rng);
  std::vector<uint32_t> slots(8);
  for (uint32_t i = 0; i < 8; ++i) slots[i] = i;
  std::shuffle(slots.begin(), slots.end(), rng);
  for (int i = 0; i < n_seqs; ++i) {
    plan_ref::Seq s;
    s.slot = slots[i];
    const int max_q = ring_only ? b.r - b.w + 1 : 3 * b.w + 5;
    s.seqlen_q = std::uniform_int_distribution<int>(0, max_q)(rng);
    s.seqlen_k = s.seqlen_q + std::uniform_int_distribution<int>(0, 300)(rng);
    const int32_t q_start = s.seqlen_k - s.seqlen_q;
    s.valid_start = std::uniform_int_distribution<int>(0, 2)(rng) == 0
                        ? std::uniform_int_distribution<int>(0, q_start)(rng)
                        : 0;
    b.seqs.push_back(s);
  }
  return b;
}

TEST(KeyRange, RingOnlyRowsAreTheVisiblePositions) {
  std::mt19937 rng(77);
  for (int iter = 0; iter < 3000; ++iter) {
    const Batch b = RandomBatch(rng, true);
    for (const plan_ref::Seq& s : b.seqs) {
      if (s.seqlen_q == 0) continue;
      const int32_t q_start = s.seqlen_k - s.seqlen_q;
      // offset_len lengths as in docs/semantics.md, "Decode index".
      auto len_of = [&](int32_t p) {
        const int32_t lo = std::max({0, s.valid_start, p - b.w + 1});
        return p - lo + 1;
      };
      const int32_t base = kernels::RingKeyBase(q_start, len_of(q_start));
      const int32_t n_keys = kernels::RingKeyCount(q_start, s.seqlen_q, base);
      ASSERT_LE(n_keys, b.r) << "a sequence's keys must fit in its ring";
      for (int32_t j = 0; j < s.seqlen_q; ++j) {
        const int32_t p = q_start + j;
        const kernels::KeyRange kr = kernels::RingTokenKeys(q_start, j, len_of(p), base);
        ASSERT_GE(kr.begin, 0);
        ASSERT_LE(kr.end, n_keys);
        std::vector<int64_t> got, want;
        for (int32_t k = kr.begin; k < kr.end; ++k)
          got.push_back(kernels::RingKeyRow(s.slot, base, k, b.r));
        for (int32_t x : plan_ref::Visible(p, s.valid_start, b.w))
          want.push_back(plan_ref::RingRowOf(s.slot, x, b.r));
        ASSERT_EQ(got, want) << "iter " << iter << " token " << j;
      }
    }
  }
}

TEST(KeyRange, StagedRowsAreTheVisiblePositions) {
  std::mt19937 rng(78);
  for (int iter = 0; iter < 3000; ++iter) {
    Batch b = RandomBatch(rng, false);
    const int32_t n_seqs = int32_t(b.seqs.size());
    int32_t token_offset = 0;
    for (int32_t i = 0; i < n_seqs; ++i) {
      const plan_ref::Seq& s = b.seqs[i];
      const int32_t q_start = s.seqlen_k - s.seqlen_q;
      const int32_t sec2_first = n_seqs * b.w + token_offset;
      const int32_t n_keys = kernels::StagedKeyCount(b.w, s.seqlen_q);
      for (int32_t j = 0; j < s.seqlen_q; ++j) {
        const int32_t p = q_start + j;
        // Pivots as docs/semantics.md, "Pivots", defines them.
        const int32_t lo = std::max({0, s.valid_start, p - b.w + 1});
        const int32_t start = std::min(lo, q_start) - (q_start - b.w);
        const int32_t k0 = std::max(0, lo - q_start);
        const int32_t pivot[4] = {i * b.w + start, b.w - start, sec2_first + k0, j - k0 + 1};
        const kernels::KeyRange kr = kernels::StagedTokenKeys(pivot, i, b.w, sec2_first);
        ASSERT_GE(kr.begin, 0);
        ASSERT_LE(kr.end, n_keys);
        std::vector<int64_t> got, want;
        for (int32_t k = kr.begin; k < kr.end; ++k)
          got.push_back(kernels::StagedKeyRow(i, k, b.w, sec2_first));
        for (int32_t x : plan_ref::Visible(p, s.valid_start, b.w))
          want.push_back(x < q_start ? int64_t(i) * b.w + (x - (q_start - b.w))
                                     : int64_t(sec2_first) + (x - q_start));
        ASSERT_EQ(got, want) << "iter " << iter << " seq " << i << " token " << j;
      }
      token_offset += s.seqlen_q;
    }
  }
}

TEST(KeyRange, QueryRowsCoverEveryTokenHeadOnceInTokenOrder) {
  for (int group : {1, 3, 8, 64})
    for (int kv_head : {0, 2}) {
      std::set<std::pair<int, int>> seen;
      int last_token = 0;
      for (int r = 0; r < 5 * group; ++r) {
        const kernels::QueryRow q = kernels::QueryRowOf(r, group, kv_head);
        EXPECT_GE(q.token, last_token);
        last_token = q.token;
        EXPECT_EQ(q.head / group, kv_head);
        EXPECT_TRUE(seen.insert({q.token, q.head}).second);
      }
      EXPECT_EQ(seen.size(), size_t(5 * group));
    }
}

}  // namespace
}  // namespace swa
