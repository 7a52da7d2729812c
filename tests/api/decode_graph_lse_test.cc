// Rows of padding and refused sequences in a graph decode step on the CPU
// twin: output 0 and LSE -inf (the LSE of an empty row), so that merging such
// a row with another part gives exactly that part (an LSE of 0 would weigh its
// zero output by exp(0 - m)).
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "api/graph_rig.h"
#include "gtest/gtest.h"
#include "swacache.h"

namespace swa_test {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// out = merge(idle rows, real part) over `rows` rows of `dim` values; the
// merged LSE goes to *lse.
std::vector<float> Merge(swa_cache_t* cache, const float* idle_out, const float* idle_lse,
                         const std::vector<float>& real_out, const std::vector<float>& real_lse,
                         int64_t rows, uint32_t dim, std::vector<float>* lse) {
  std::vector<float> out(size_t(rows) * dim, std::numeric_limits<float>::quiet_NaN());
  lse->assign(size_t(rows), std::numeric_limits<float>::quiet_NaN());
  swa_merge_args_t m;
  swa_merge_args_init(&m);
  m.rows = rows;
  m.head_dim = dim;
  m.dtype = SWA_DTYPE_FP32;
  m.out_a = idle_out;
  m.lse_a = idle_lse;
  m.out_b = real_out.data();
  m.lse_b = real_lse.data();
  m.out = out.data();
  m.lse = lse->data();
  EXPECT_EQ(swa_attention_merge(cache, &m), SWA_OK) << swa_last_error();
  return out;
}

void RunIdleRows(uint32_t tokens, uint64_t seed) {
  GraphRig rig(tokens, 4, seed);
  const uint32_t s0 = rig.NewSlot(25), s1 = rig.NewSlot(9), s2 = rig.NewSlot(30);
  const uint32_t mine[] = {s0, s1, s2};
  ASSERT_EQ(swa_decode_graph_import(rig.graph(), mine, 3, nullptr), SWA_OK) << swa_last_error();
  const int32_t k = int32_t(tokens);
  // [valid, a gap (refused), padding, valid]
  std::vector<GraphRig::Rows> layers;
  ASSERT_EQ(rig.GraphStep({int32_t(s0), int32_t(s1), -1, int32_t(s2)}, {25 + k, 9 + 3 + k, 0, 30 + k},
                          &layers),
            SWA_OK)
      << swa_last_error();
  swa_graph_error_t rec;
  EXPECT_EQ(swa_decode_graph_check(rig.graph(), nullptr, &rec), SWA_FAILED_PRECONDITION);
  EXPECT_EQ(rec.reason, SWA_GRAPH_GAP);
  EXPECT_EQ(rec.seq, 1);
  ASSERT_EQ(layers.size(), rig.num_layers());
  for (size_t l = 0; l < layers.size(); ++l) {
    SCOPED_TRACE(testing::Message() << "layer " << l << ", tokens " << tokens);
    const GraphRig::Rows& r = layers[l];
    const size_t h = size_t(rig.q_heads(l)), d = size_t(rig.head_dim(l));
    const size_t seq_lse = tokens * h, seq_out = tokens * h * d;
    for (int i = 0; i < 4; ++i) {
      const bool idle = i == 1 || i == 2;
      for (size_t j = 0; j < seq_lse; ++j) {
        const float x = r.lse[i * seq_lse + j];
        if (idle)
          ASSERT_EQ(x, kNegInf) << "seqs[" << i << "] lse[" << j << "]";
        else
          ASSERT_TRUE(std::isfinite(x)) << "seqs[" << i << "] lse[" << j << "] = " << x;
      }
      for (size_t j = 0; j < seq_out; ++j) {
        const float x = r.out[i * seq_out + j];
        if (idle)
          ASSERT_EQ(x, 0.0f) << "seqs[" << i << "] out[" << j << "]";
        else
          ASSERT_TRUE(std::isfinite(x)) << "seqs[" << i << "] out[" << j << "]";
      }
    }
    // Each idle sequence's rows merged with a real part: exactly the real
    // part, output and LSE. The real part: sequence 0's rows, and random rows
    // whose LSEs are far below 0 (where an LSE of 0 would dominate).
    std::vector<float> rand_out(seq_out), rand_lse(seq_lse);
    for (float& x : rand_out) x = rig.Uniform(-3.0f, 3.0f);
    for (float& x : rand_lse) x = rig.Uniform(-30.0f, 5.0f);
    const std::vector<float> s0_out(r.out.begin(), r.out.begin() + seq_out);
    const std::vector<float> s0_lse(r.lse.begin(), r.lse.begin() + seq_lse);
    struct Part {
      const std::vector<float>* out;
      const std::vector<float>* lse;
    };
    for (int i : {1, 2})
      for (const Part& real : {Part{&s0_out, &s0_lse}, Part{&rand_out, &rand_lse}}) {
        std::vector<float> lse;
        const std::vector<float> out =
            Merge(rig.cache(), r.out.data() + i * seq_out, r.lse.data() + i * seq_lse, *real.out,
                  *real.lse, int64_t(seq_lse), uint32_t(d), &lse);
        ASSERT_EQ(0, std::memcmp(out.data(), real.out->data(), seq_out * sizeof(float)))
            << "seqs[" << i << "] merged output differs from the real part";
        ASSERT_EQ(0, std::memcmp(lse.data(), real.lse->data(), seq_lse * sizeof(float)))
            << "seqs[" << i << "] merged LSE differs from the real part";
      }
  }
}

TEST(DecodeGraphLse, IdleRowsHaveEmptyRowLseAndMergeAway) { RunIdleRows(1, 201); }
TEST(DecodeGraphLse, IdleRowsHaveEmptyRowLseAndMergeAwayVerify) { RunIdleRows(4, 202); }

}  // namespace
}  // namespace swa_test
