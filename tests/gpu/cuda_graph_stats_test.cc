// The graph decode against its CPU twin (tests/gpu/graph_twin.h), for what
// the graph's own CUDA test (cuda_graph_test.cc, bit for bit against
// host-planned CUDA steps) cannot see: swa_cache_stats().nonfinite_blocks.
// The graph's encoder counts NaN/Inf blocks on the device, where a captured
// graph cannot read them back; swa_cache_stats reads them, so after a
// synchronisation both backends report the same count, also for graphs that
// were destroyed before the stats were read, and reading them inside an open
// capture leaves the capture valid.
#include <cmath>

#include "gpu/graph_twin.h"

namespace swa_gpu {
namespace {

uint64_t NonfiniteBlocks(swa_cache_t* cache) {
  swa_cache_stats_t s;
  s.struct_size = sizeof s;
  EXPECT_EQ(swa_cache_stats(cache, &s), SWA_OK) << swa_last_error();
  return s.nonfinite_blocks;
}

std::vector<LayerCfg> Layers() {
  return {
      {SWA_FORMAT_MXFP8, 8, 2, 128, false, true},
      {SWA_FORMAT_BF16, 4, 1, 64, true, false},
      {SWA_FORMAT_FP32, 4, 2, 128, false, false},
  };
}

// NaN into a few 32-value blocks of K (and V) of chosen rows.
void PoisonSome(size_t, const LayerCfg& c, swa_dtype_t kv, std::vector<uint8_t>& k,
                std::vector<uint8_t>& v) {
  const size_t elem = kv == SWA_DTYPE_FP32 ? 4 : 2;
  const float nan = std::nanf("");
  auto put = [&](std::vector<uint8_t>& t, size_t i) {
    if (kv == SWA_DTYPE_FP32) {
      std::memcpy(t.data() + i * elem, &nan, 4);
    } else {
      const uint16_t h = 0x7FC0;
      std::memcpy(t.data() + i * elem, &h, 2);
    }
  };
  const size_t vec = size_t(c.head_dim);
  put(k, 0 * vec + 3);
  put(k, 2 * vec + vec - 1);
  if (!v.empty()) put(v, 1 * vec + 40 % vec);
}

// Prefills slots 0..2 with host-planned steps on both caches, hands them to
// the graphs, then runs graph steps of 2 tokens per sequence.
void Prefill(DualCache& dc, GraphTwin& gt, std::vector<int32_t>* len) {
  *len = {37, 20, 51};
  dc.Step({{0, 37, 37, 0}, {1, 20, 20, 0}, {2, 51, 51, 0}},
          {SWA_DTYPE_BF16, SWA_DTYPE_BF16, SWA_DTYPE_BF16});
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  gt.Import({0, 1, 2});
}

void GraphSteps(GraphTwin& gt, std::vector<int32_t>& len, int steps, Dtypes dt,
                const DualCache::InputHook& hook) {
  for (int i = 0; i < steps; ++i) {
    std::vector<int32_t> slots = {2, -1, 0, 1}, k(4, 0);
    for (int e : {0, 2, 3}) {
      len[size_t(slots[size_t(e)])] += 2;
      k[size_t(e)] = len[size_t(slots[size_t(e)])];
    }
    gt.Step(slots, k, dt, hook);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(CudaGraphStats, NonfiniteBlocksOfGraphStepsReachTheStats) {
  SWA_SKIP_WITHOUT_DEVICE();
  DualCache dc(24, 3, Layers(), 4, 8);
  GraphTwin gt(dc, 4, 2);
  std::vector<int32_t> len;
  Prefill(dc, gt, &len);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_EQ(NonfiniteBlocks(dc.gpu()), NonfiniteBlocks(dc.cpu()));
  gt.set_nonfinite_rows(true);
  // Uncaptured graph steps, then one captured graph replayed.
  GraphSteps(gt, len, 2, {SWA_DTYPE_BF16, SWA_DTYPE_BF16, SWA_DTYPE_BF16}, PoisonSome);
  ASSERT_FALSE(HasFatalFailure());
  const uint64_t after_two = NonfiniteBlocks(dc.cpu());
  EXPECT_GT(after_two, 0u);
  EXPECT_EQ(NonfiniteBlocks(dc.gpu()), after_two);
  gt.set_capture(true);
  GraphSteps(gt, len, 3, {SWA_DTYPE_FP32, SWA_DTYPE_FP32, SWA_DTYPE_FP32}, PoisonSome);
  ASSERT_FALSE(HasFatalFailure());
  const uint64_t after_replays = NonfiniteBlocks(dc.cpu());
  EXPECT_GT(after_replays, after_two);
  EXPECT_EQ(NonfiniteBlocks(dc.gpu()), after_replays);
  // Counts of replays not read before the graph goes are kept.
  GraphSteps(gt, len, 1, {SWA_DTYPE_FP32, SWA_DTYPE_FP32, SWA_DTYPE_FP32}, PoisonSome);
  ASSERT_FALSE(HasFatalFailure());
  gt.DestroyGraphs();
  const uint64_t at_end = NonfiniteBlocks(dc.cpu());
  EXPECT_GT(at_end, after_replays);
  EXPECT_EQ(NonfiniteBlocks(dc.gpu()), at_end);
  EXPECT_EQ(NonfiniteBlocks(dc.gpu()), at_end);  // read once, not twice
}

// swa_cache_stats between cudaStreamBeginCapture (global mode, the strictest)
// and cudaStreamEndCapture on the capturing thread: OK, and the capture ends
// valid (the counters are read on a stream of the library's, in relaxed mode).
TEST(CudaGraphStats, StatsInsideAnOpenCaptureLeaveItValid) {
  SWA_SKIP_WITHOUT_DEVICE();
  DualCache dc(24, 3, Layers(), 4, 9);
  GraphTwin gt(dc, 4, 2);
  std::vector<int32_t> len;
  Prefill(dc, gt, &len);
  ASSERT_FALSE(HasFatalFailure());
  gt.set_capture(true, cudaStreamCaptureModeGlobal);
  gt.set_in_capture([&] {
    swa_cache_stats_t s;
    s.struct_size = sizeof s;
    EXPECT_EQ(swa_cache_stats(dc.gpu(), &s), SWA_OK) << swa_last_error();
  });
  gt.set_nonfinite_rows(true);
  GraphSteps(gt, len, 2, {SWA_DTYPE_BF16, SWA_DTYPE_BF16, SWA_DTYPE_BF16}, PoisonSome);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_EQ(NonfiniteBlocks(dc.gpu()), NonfiniteBlocks(dc.cpu()));
}

}  // namespace
}  // namespace swa_gpu
