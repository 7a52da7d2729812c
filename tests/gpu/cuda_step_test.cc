// swa_step on the CUDA backend against the CPU backend, identical inputs,
// every path: decode, speculative verify (rewinds), chunked prefill, mixed
// batches, valid_start > 0, sinks, GQA, shared K/V, MXFP8/BF16/FP32/FP8_DS_MLA rings,
// FP32 and BF16 tensors. Outputs within the "Error budgets" of each other; ring
// bytes identical after every step.
#include <algorithm>

#include "gpu/gpu_test_util.h"

namespace swa_gpu {
namespace {

constexpr Dtypes kAllDtypes[] = {
    {SWA_DTYPE_FP32, SWA_DTYPE_FP32, SWA_DTYPE_FP32},  // precise kernel
    {SWA_DTYPE_BF16, SWA_DTYPE_BF16, SWA_DTYPE_BF16},  // tensor-core kernel
    {SWA_DTYPE_FP32, SWA_DTYPE_BF16, SWA_DTYPE_BF16},
    {SWA_DTYPE_BF16, SWA_DTYPE_FP32, SWA_DTYPE_FP32},
};

std::vector<LayerCfg> MixedLayers() {
  return {
      {SWA_FORMAT_MXFP8, 16, 1, 512, true, true},    // DeepSeek-V4-like (fewer heads)
      {SWA_FORMAT_BF16, 8, 2, 128, false, false},    // GQA, separate K/V
      {SWA_FORMAT_MXFP8, 4, 4, 64, false, true},     // MHA, sinks
      {SWA_FORMAT_FP32, 6, 3, 256, false, false},    // FP32 storage
      {SWA_FORMAT_MXFP8, 8, 2, 512, false, false},   // separate K/V at D = 512
      {SWA_FORMAT_FP8_DS_MLA, 16, 1, 512, true, true},  // DeepSeek-V4's 584-byte record
      {SWA_FORMAT_FP8_DS_MLA, 8, 2, 512, false, false},  // the same, separate K/V
  };
}

// Speculative decoding: each step verifies 1 + N tokens and accepts a random
// prefix, so the next step rewinds over rejected drafts.
TEST(CudaStep, DecodeAndSpeculativeVerifyMatchCpu) {
  SWA_SKIP_WITHOUT_DEVICE();
  const uint32_t W = 16, N = 3, slots = 5;
  DualCache dc(W, N, MixedLayers(), slots, 1);
  std::vector<int32_t> len(slots, 0);
  // Prefill through the staged path first (seqlen_q > R - W + 1).
  {
    std::vector<Seq> seqs;
    for (uint32_t s = 0; s < slots; ++s) {
      len[s] = 9 + 7 * int32_t(s);
      seqs.push_back({s, len[s], len[s], 0});
    }
    dc.Step(seqs, kAllDtypes[0]);
  }
  std::uniform_int_distribution<int> accept(0, N);
  for (int step = 0; step < 24; ++step) {
    std::vector<Seq> seqs;
    for (uint32_t s = 0; s < slots; ++s) {
      if ((step + s) % 4 == 3) continue;  // not every sequence in every batch
      const int32_t q = step % 5 == 0 ? 1 : int32_t(N) + 1;
      seqs.push_back({s, q, len[s] + q, 0});
      len[s] += step % 5 == 0 ? 1 : 1 + accept(dc.rng());  // drafts past it are rejected
    }
    std::shuffle(seqs.begin(), seqs.end(), dc.rng());
    dc.Step(seqs, kAllDtypes[step % 4]);
    if (HasFatalFailure()) return;
  }
  RecordProperty("worst_rel_l2", std::to_string(dc.worst_error()));
}

TEST(CudaStep, ChunkedPrefillThenDecodeMatchCpu) {
  SWA_SKIP_WITHOUT_DEVICE();
  const uint32_t W = 32, N = 0;
  DualCache dc(W, N, MixedLayers(), 3, 2);
  int32_t len[3] = {0, 0, 0};
  const int32_t chunks[] = {70, 33, 5, 100, 1, 64};
  for (int c = 0; c < 6; ++c)
    for (int d = 0; d < 2; ++d) {
      std::vector<Seq> seqs;
      for (uint32_t s = 0; s < 3; ++s) {
        const int32_t q = d == 0 ? chunks[(c + s) % 6] : 1;
        len[s] += q;
        seqs.push_back({s, q, len[s], 0});
      }
      dc.Step(seqs, kAllDtypes[(c + d) % 4]);
      if (HasFatalFailure()) return;
    }
}

// One long prefill and several decodes in one batch: the staged path for all.
TEST(CudaStep, MixedBatchMatchesCpu) {
  SWA_SKIP_WITHOUT_DEVICE();
  const uint32_t W = 24, N = 2;
  DualCache dc(W, N, MixedLayers(), 6, 3);
  std::vector<int32_t> len(6, 0);
  for (int step = 0; step < 8; ++step) {
    std::vector<Seq> seqs;
    for (uint32_t s = 0; s < 6; ++s) {
      const int32_t q = (s == uint32_t(step % 6)) ? 50 + 13 * step : (len[s] == 0 ? 4 : 1);
      len[s] += q;
      seqs.push_back({s, q, len[s], 0});
    }
    dc.Step(seqs, kAllDtypes[step % 4]);
    if (HasFatalFailure()) return;
  }
}

// Bounded replay: sequences starting at valid_start > 0 (ring-only and staged).
TEST(CudaStep, ValidStartMatchesCpu) {
  SWA_SKIP_WITHOUT_DEVICE();
  const uint32_t W = 16, N = 1;
  DualCache dc(W, N, MixedLayers(), 4, 4);
  // Replays of the last W tokens before H (valid_start raised through swa_seq_t).
  const int32_t H[4] = {100, 20, 16, 7};
  std::vector<Seq> seqs;
  std::vector<int32_t> len(4);
  for (uint32_t s = 0; s < 4; ++s) {
    const int32_t v = std::max(0, H[s] - int32_t(W));
    seqs.push_back({s, H[s] - v, H[s], v});
    len[s] = H[s];
  }
  dc.Step(seqs, kAllDtypes[1]);
  for (int step = 0; step < 10; ++step) {
    seqs.clear();
    for (uint32_t s = 0; s < 4; ++s) {
      const int32_t q = 1 + (step + s) % 2;
      len[s] += q;
      seqs.push_back({s, q, len[s], std::max(0, H[s] - int32_t(W))});
    }
    dc.Step(seqs, kAllDtypes[step % 4]);
    if (HasFatalFailure()) return;
  }
}

// The DeepSeek-V4-like decode shape at full width: Hq 64, one 512-wide
// vector (MXFP8 and DeepSeek-V4's own FP8_DS_MLA record), 6 query tokens per
// sequence, W 128.
TEST(CudaStep, DeepSeekShapeDecodeMatchesCpu) {
  SWA_SKIP_WITHOUT_DEVICE();
  const uint32_t W = 128, N = 5;
  DualCache dc(W, N,
               {{SWA_FORMAT_MXFP8, 64, 1, 512, true, true},
                {SWA_FORMAT_FP8_DS_MLA, 64, 1, 512, true, true}},
               8, 5);
  std::vector<int32_t> len(8);
  std::vector<Seq> seqs;
  for (uint32_t s = 0; s < 8; ++s) {
    len[s] = 130 + 37 * int32_t(s);
    seqs.push_back({s, len[s], len[s], 0});
  }
  dc.Step(seqs, kAllDtypes[1]);
  for (int step = 0; step < 4; ++step) {
    seqs.clear();
    for (uint32_t s = 0; s < 8; ++s) {
      seqs.push_back({s, 6, len[s] + 6, 0});
      len[s] += 1 + (step + s) % 6;
    }
    dc.Step(seqs, kAllDtypes[step % 2 == 0 ? 1 : 0]);
    if (HasFatalFailure()) return;
  }
}

TEST(CudaStep, UnsupportedHeadDimIsUnimplementedAndNamesIt) {
  SWA_SKIP_WITHOUT_DEVICE();
  DualCache dc(8, 0, {{SWA_FORMAT_MXFP8, 2, 1, 96, true, false}}, 1, 6);
  swa_seq_t s = {0, 1, 1, 0};
  swa_plan_t* plan = nullptr;
  ASSERT_EQ(swa_plan_create(dc.gpu(), &plan), SWA_OK);
  ASSERT_EQ(swa_plan_build(plan, &s, 1), SWA_OK) << swa_last_error();
  DeviceBuffer q(2 * 96 * 4), k(96 * 4), out(2 * 96 * 4);
  swa_step_args_t a;
  swa_step_args_init(&a);
  a.q = q.get();
  a.k_new = k.get();
  a.out = out.get();
  a.stream = dc.stream();
  EXPECT_EQ(swa_step(dc.gpu(), plan, &a), SWA_UNIMPLEMENTED);
  EXPECT_NE(std::string(swa_last_error()).find("head_dim = 96"), std::string::npos)
      << swa_last_error();
  swa_plan_destroy(plan);
}

}  // namespace
}  // namespace swa_gpu
