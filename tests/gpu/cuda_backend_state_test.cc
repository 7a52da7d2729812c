// Host-side state of the CUDA backend around the application's: the thread's
// last CUDA error that the application left pending survives our calls
// (issue 27: reading the non-finite counters used to clear it), and a
// host-planned step's non-finite blocks reach swa_cache_stats once the
// device has finished the step, without a later step.
#include <chrono>
#include <cmath>
#include <thread>

#include "gpu/gpu_test_util.h"

namespace swa_gpu {
namespace {

uint64_t NonfiniteBlocks(swa_cache_t* cache) {
  swa_cache_stats_t s;
  s.struct_size = sizeof s;
  EXPECT_EQ(swa_cache_stats(cache, &s), SWA_OK) << swa_last_error();
  return s.nonfinite_blocks;
}

// A two-layer CUDA cache, one slot, and the tensors of a 16-token prefill.
struct Rig {
  Rig() {
    const LayerCfg c{SWA_FORMAT_MXFP8, 4, 1, 64, true, false};
    d[0] = d[1] = swa_test::ToDesc(c, SWA_LAYER_STORED);
    swa_config_t cfg;
    swa_config_init(&cfg);
    cfg.window = 16;
    cfg.max_slots = 1;
    cfg.num_layers = 2;
    cfg.layers = d;
    cfg.backend = SWA_BACKEND_CUDA;
    EXPECT_EQ(swa_cache_create(&cfg, &cache), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_plan_create(cache, &plan), SWA_OK) << swa_last_error();
    uint32_t slot = 0;
    EXPECT_EQ(swa_slot_alloc(cache, &slot), SWA_OK);
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    std::mt19937_64 rng(4);
    auto qh = RandomTensor(rng, 16 * 4 * 64, SWA_DTYPE_BF16, 1.0f);
    auto kh = RandomTensor(rng, 16 * 64, SWA_DTYPE_BF16, 1.0f);
    const uint16_t nan = 0x7FC0;
    std::memcpy(kh.data() + 2 * (3 * 64 + 5), &nan, 2);  // token 3: one NaN block of two
    q.Resize(qh.size());
    k.Resize(kh.size());
    out.Resize(qh.size());
    q.Upload(qh.data(), qh.size());
    k.Upload(kh.data(), kh.size());
    const swa_seq_t seq{0, 16, 16, 0};
    EXPECT_EQ(swa_plan_build(plan, &seq, 1), SWA_OK) << swa_last_error();
  }
  ~Rig() {
    swa_plan_destroy(plan);
    swa_cache_destroy(cache);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
  swa_status_t Step(uint32_t layer) {
    swa_step_args_t a;
    swa_step_args_init(&a);
    a.layer = layer;
    a.q_dtype = a.kv_dtype = a.out_dtype = SWA_DTYPE_BF16;
    a.q = q.get();
    a.k_new = k.get();
    a.out = out.get();
    a.stream = stream;
    return swa_step(cache, plan, &a);
  }
  swa_layer_desc_t d[2];
  swa_cache_t* cache = nullptr;
  swa_plan_t* plan = nullptr;
  cudaStream_t stream = nullptr;
  DeviceBuffer q, k, out;
};

void Sleep300ms(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(300)); }

// The stream is held by a host function, so the first step's counter is
// still pending when the second step looks at it ("not ready").
TEST(CudaBackendState, PendingApplicationErrorSurvivesSteps) {
  SWA_SKIP_WITHOUT_DEVICE();
  Rig r;
  ASSERT_NE(r.cache, nullptr);
  CUDA_ASSERT(cudaLaunchHostFunc(r.stream, Sleep300ms, nullptr));
  ASSERT_EQ(r.Step(0), SWA_OK) << swa_last_error();
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, size_t{1} << 62), cudaErrorMemoryAllocation);  // the application's
  ASSERT_EQ(r.Step(1), SWA_OK) << swa_last_error();
  EXPECT_EQ(NonfiniteBlocks(r.cache), 0u);  // still running: not counted yet
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  CUDA_ASSERT(cudaStreamSynchronize(r.stream));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(CudaBackendState, FinishedStepsReachTheStatsWithoutALaterStep) {
  SWA_SKIP_WITHOUT_DEVICE();
  Rig r;
  ASSERT_NE(r.cache, nullptr);
  ASSERT_EQ(r.Step(0), SWA_OK) << swa_last_error();
  ASSERT_EQ(r.Step(1), SWA_OK) << swa_last_error();
  CUDA_ASSERT(cudaStreamSynchronize(r.stream));
  EXPECT_EQ(NonfiniteBlocks(r.cache), 2u);  // one block per layer
  EXPECT_EQ(NonfiniteBlocks(r.cache), 2u);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace swa_gpu
