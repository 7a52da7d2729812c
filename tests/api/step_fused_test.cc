// swa_step's fused tile path (docs/step.md, "Fused tiles"): with at least 4
// sequences per thread, every sequence whose K/V tile is at most 1 MiB of FP32
// is decoded and attended by one thread at once; larger ones (long prefill
// chunks) go through the batched tiles in the same step. Checked against the
// FP64 dense reference over many decode steps, so the ring wraps (tiles are
// decoded in two runs) on both the ring-only and the staged paths.
#include <cstdio>
#include <string>
#include <vector>

#include "api/step_harness.h"
#include "gtest/gtest.h"

namespace swa_test {
namespace {

struct FusedCase {
  const char* name;
  uint32_t threads;
  int n_seq;
};

class StepFusedTest : public ::testing::TestWithParam<FusedCase> {};

TEST_P(StepFusedTest, ManySequencesWithALongPrefillMatchDense) {
  const FusedCase& fc = GetParam();
  constexpr uint32_t kWindow = 12, kDraft = 3;
  // Tiles per key: D512 shared = 512 floats, so a 530-token chunk (1.06 MiB)
  // is over the fused limit; GQA D64 K+V = 256 floats.
  const std::vector<LayerCfg> layers = {{SWA_FORMAT_MXFP8, 64, 1, 512, true, true},
                                        {SWA_FORMAT_BF16, 16, 2, 64, false, true},
                                        {SWA_FORMAT_MXFP8, 16, 2, 64, false, false}};
  StepHarness h(kWindow, kDraft, layers, uint32_t(fc.n_seq), 4321, /*all_stored=*/false,
                fc.threads);
  for (int s = 0; s < fc.n_seq; ++s) {
    uint32_t slot;
    ASSERT_EQ(swa_slot_alloc(h.cache(), &slot), SWA_OK);
  }
  std::vector<int32_t> accepted(fc.n_seq, 0);
  const swa_dtype_t dt[2] = {SWA_DTYPE_FP32, SWA_DTYPE_BF16};
  for (int step = 0; step < 14; ++step) {
    std::vector<StepSeq> batch;
    for (int s = 0; s < fc.n_seq; ++s) {
      int32_t q = int32_t(kDraft) + 1;
      if (step == 0) q = h.Int(1, 30);                 // short prefill
      if (s == 0 && step == 3) q = 530;  // a long chunk: batched tile
      if (s == 1 && step % 4 == 2) q = 0;               // idle
      batch.push_back({uint32_t(s), q, accepted[s] + q, 0});
    }
    ASSERT_TRUE(h.Step(batch, dt[step % 2], dt[(step / 2) % 2], dt[(step / 3) % 2]))
        << fc.name << " step " << step;
    for (int s = 0; s < fc.n_seq; ++s) {
      const StepSeq& b = batch[s];
      // Accept a random prefix of decode steps (rewinds within the draft).
      accepted[s] = b.seqlen_q == int32_t(kDraft) + 1 ? accepted[s] + h.Int(1, b.seqlen_q)
                                                      : b.seqlen_k;
    }
  }
  std::printf("%s: max relative error %.3g\n", fc.name, h.max_error());
}

INSTANTIATE_TEST_SUITE_P(Threads, StepFusedTest,
                         ::testing::Values(FusedCase{"one_thread_3_seqs", 1, 3},
                                           FusedCase{"two_threads_9_seqs", 2, 9},
                                           FusedCase{"three_threads_7_seqs_batched", 3, 7}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace swa_test
