// Window and ring edges against the FP64 dense band-mask reference: W = 1
// (every token sees itself only), W = R (no draft tokens, a ring exactly one
// window long: one token per ring-only step, rewinds of one position), and a
// ring longer than the default. Random walks of steps mixing ring-only steps,
// prefill chunks of exactly R - W + 1, R, R + 1 and several R tokens (staged),
// idle sequences (seqlen_q = 0) and every legal rewind depth, checked by the
// harness at every step on every layer.
#include <algorithm>
#include <string>
#include <vector>

#include "api/step_harness.h"
#include "gtest/gtest.h"

namespace swa_test {
namespace {

struct Edge {
  const char* name;
  uint32_t window, draft, ring_len;  // ring_len 0: W + N + 1
};

class StepWindowEdge : public ::testing::TestWithParam<Edge> {};

TEST_P(StepWindowEdge, RandomWalkMatchesDense) {
  const Edge& e = GetParam();
  const std::vector<LayerCfg> layers = {{SWA_FORMAT_MXFP8, 4, 2, 64, false, true},
                                        {SWA_FORMAT_FP32, 2, 1, 32, true, false}};
  StepHarness h(e.window, e.draft, layers, 3, 4242 + e.window, false, 2, e.ring_len);
  const int32_t w = int32_t(e.window), r = int32_t(h.ring_len());
  ASSERT_EQ(r, e.ring_len != 0 ? int32_t(e.ring_len) : w + int32_t(e.draft) + 1);
  const int32_t ring_tokens = r - w + 1;
  const int n = 3;
  std::vector<int32_t> end(n, 0), high(n, 0);
  for (int s = 0; s < n; ++s) {
    uint32_t slot;
    ASSERT_EQ(swa_slot_alloc(h.cache(), &slot), SWA_OK);
  }
  const int32_t sizes[] = {1, ring_tokens, r, r + 1, 2 * r + 3, ring_tokens, 1};
  int staged = 0, rewinds = 0;
  for (int step = 0; step < 40; ++step) {
    std::vector<StepSeq> batch;
    for (int s = 0; s < n; ++s) {
      int32_t q = sizes[h.Int(0, 6)];
      if (h.Int(0, 6) == 0) q = 0;
      // The deepest legal q_start (docs/semantics.md, "Rewinds"), then any
      // depth up to it.
      int32_t lo = end[s];
      while (lo > 0 && std::max(0, lo - 1 - w + 1) >= std::max(end[s], high[s]) - r) --lo;
      int32_t q_start = end[s];
      if (h.Int(0, 2) == 0) {
        q_start = h.Int(lo, end[s]);
        rewinds += q_start < end[s];
      }
      batch.push_back({uint32_t(s), q, q_start + q, 0});
      if (q > ring_tokens) ++staged;
    }
    ASSERT_TRUE(h.Step(batch, SWA_DTYPE_FP32, SWA_DTYPE_FP32, SWA_DTYPE_FP32))
        << e.name << " step " << step;
    for (int s = 0; s < n; ++s) {
      end[s] = batch[s].seqlen_k;
      high[s] = std::max(high[s], end[s]);
    }
  }
  EXPECT_GT(staged, 0);
  EXPECT_GT(rewinds, 0);
  // One position deeper than the deepest legal rewind is refused.
  for (int s = 0; s < n; ++s) {
    int32_t lo = end[s];
    while (lo > 0 && std::max(0, lo - 1 - w + 1) >= std::max(end[s], high[s]) - r) --lo;
    if (lo == 0) continue;
    const swa_seq_t bad{uint32_t(s), 1, lo, 0};  // q_start = lo - 1
    EXPECT_EQ(swa_plan_build(h.plan(), &bad, 1), SWA_FAILED_PRECONDITION) << e.name;
    const swa_seq_t ok{uint32_t(s), 1, lo + 1, 0};
    EXPECT_EQ(swa_plan_build(h.plan(), &ok, 1), SWA_OK) << e.name << ": " << swa_last_error();
    ASSERT_EQ(swa_plan_cancel(h.plan()), SWA_OK);
  }
  std::printf("%s: max relative error %.3g\n", e.name, h.max_error());
}

INSTANTIATE_TEST_SUITE_P(
    Edges, StepWindowEdge,
    ::testing::Values(Edge{"w1_n0", 1, 0, 0}, Edge{"w1_n3", 1, 3, 0},
                      Edge{"w_equals_r", 6, 0, 6}, Edge{"w1_equals_r", 1, 0, 1},
                      Edge{"long_ring", 5, 1, 19}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace swa_test
