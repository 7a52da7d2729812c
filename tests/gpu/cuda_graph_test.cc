// The device-driven decode step (src/backend/cuda/decode_graph.h): captured
// once in a CUDA graph, replayed with new lengths written to device memory,
// checked against the CPU backend running the same steps through swa_step.
#include <algorithm>

#include "backend/cuda/decode_graph.h"
#include "capi/handles.h"
#include "gpu/gpu_test_util.h"

namespace swa_gpu {
namespace {

// Captures the decode step of a one-layer cache (shared K/V, one KV head) once and replays it with new
// lengths; with `with_lse` the per-row LSE is written and compared too.
void CapturedReplays(const LayerCfg& cfg, bool with_lse, uint64_t seed) {
  const uint32_t W = 32, N = 2, slots = 4;
  DualCache dc(W, N, {cfg}, slots, seed);
  const int32_t nq = int32_t(N) + 1;
  const int32_t max_tokens = int32_t(slots) * nq;

  // Prefill both caches through the normal path.
  std::vector<int32_t> len(slots);
  std::vector<Seq> seqs;
  for (uint32_t s = 0; s < slots; ++s) {
    len[s] = 40 + 11 * int32_t(s);
    seqs.push_back({s, len[s], len[s], 0});
  }
  dc.Step(seqs, {SWA_DTYPE_BF16, SWA_DTYPE_BF16, SWA_DTYPE_BF16});
  ASSERT_FALSE(::testing::Test::HasFatalFailure());

  auto step_or = swa::cuda::DeviceDecodeStep::Create(*dc.gpu()->impl, 0, int32_t(slots),
                                                     max_tokens);
  ASSERT_TRUE(step_or.ok()) << step_or.status();
  auto& step = *step_or;

  // Device-resident batch columns and tensors, fixed addresses for the graph.
  DeviceBuffer d_slot(slots * 4), d_q(slots * 4), d_k(slots * 4);
  const size_t q_elems = size_t(max_tokens) * cfg.q_heads * cfg.head_dim;
  const size_t kv_elems = size_t(max_tokens) * cfg.head_dim;
  DeviceBuffer dq(q_elems * 2), dk(kv_elems * 2), dout(q_elems * 2);
  const size_t max_rows = size_t(max_tokens) * cfg.q_heads;
  DeviceBuffer dlse(max_rows * 4);
  std::vector<uint32_t> slot_ids(slots);
  for (uint32_t s = 0; s < slots; ++s) slot_ids[s] = s;
  d_slot.Upload(slot_ids.data(), slots * 4);

  swa::cuda::DeviceDecodeBatch batch;
  batch.slot = static_cast<const uint32_t*>(d_slot.get());
  batch.seqlen_q = static_cast<const int32_t*>(d_q.get());
  batch.seqlen_k = static_cast<const int32_t*>(d_k.get());
  batch.n_seqs = int32_t(slots);
  swa::StepTensors x;
  x.q_dtype = x.kv_dtype = x.out_dtype = swa::Dtype::kBf16;
  x.q = dq.get();
  x.k_new = dk.get();
  x.out = dout.get();
  x.sinks = cfg.sinks ? dc.device_sinks(0) : nullptr;
  x.lse = with_lse ? static_cast<float*>(dlse.get()) : nullptr;

  cudaStream_t stream = dc.stream();
  cudaGraph_t graph = nullptr;
  CUDA_ASSERT(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const absl::Status st = step->Enqueue(batch, x, stream);
  CUDA_ASSERT(cudaStreamEndCapture(stream, &graph));
  ASSERT_TRUE(st.ok()) << st;
  cudaGraphExec_t exec = nullptr;
  CUDA_ASSERT(cudaGraphInstantiate(&exec, graph, 0));

  swa_plan_t* cpu_plan = nullptr;
  ASSERT_EQ(swa_plan_create(dc.cpu(), &cpu_plan), SWA_OK);

  for (int it = 0; it < 6; ++it) {
    std::vector<int32_t> q(slots), k(slots);
    std::vector<swa_seq_t> in;
    int32_t T = 0;
    for (uint32_t s = 0; s < slots; ++s) {
      q[s] = 1 + (it + int32_t(s)) % nq;
      k[s] = len[s] + q[s];
      in.push_back({s, q[s], k[s], 0});
      T += q[s];
      len[s] += 1 + (it % q[s]);  // accept a prefix: the next step rewinds
    }
    d_q.Upload(q.data(), slots * 4);
    d_k.Upload(k.data(), slots * 4);
    const auto hq = RandomTensor(dc.rng(), size_t(T) * cfg.q_heads * cfg.head_dim, SWA_DTYPE_BF16, 1.0f);
    const auto hk = RandomTensor(dc.rng(), size_t(T) * cfg.head_dim, SWA_DTYPE_BF16, 1.5f);
    dq.Upload(hq.data(), hq.size());
    dk.Upload(hk.data(), hk.size());
    CUDA_ASSERT(cudaMemset(dout.get(), 0xFF, q_elems * 2));
    CUDA_ASSERT(cudaMemset(dlse.get(), 0xFF, max_rows * 4));
    CUDA_ASSERT(cudaDeviceSynchronize());
    CUDA_ASSERT(cudaGraphLaunch(exec, stream));
    CUDA_ASSERT(cudaStreamSynchronize(stream));
    int32_t err = -7;
    CUDA_ASSERT(cudaMemcpy(&err, step->error(), 4, cudaMemcpyDeviceToHost));
    ASSERT_EQ(err, 0) << "device planner rejected replay " << it;

    std::vector<uint8_t> out_gpu(size_t(T) * cfg.q_heads * cfg.head_dim * 2);
    dout.Download(out_gpu.data(), out_gpu.size());
    std::vector<uint8_t> out_cpu(out_gpu.size(), 0xFF);
    ASSERT_EQ(swa_plan_build(cpu_plan, in.data(), slots), SWA_OK) << swa_last_error();
    swa_step_args_t a;
    swa_step_args_init(&a);
    a.q_dtype = a.kv_dtype = a.out_dtype = SWA_DTYPE_BF16;
    a.q = hq.data();
    a.k_new = hk.data();
    a.out = out_cpu.data();
    a.sinks = cfg.sinks ? dc.sinks(0).data() : nullptr;
    const size_t rows = size_t(T) * cfg.q_heads;
    std::vector<float> lse_cpu(rows, NAN), lse_gpu(rows, NAN);
    a.lse = with_lse ? lse_cpu.data() : nullptr;
    ASSERT_EQ(swa_step(dc.cpu(), cpu_plan, &a), SWA_OK) << swa_last_error();
    const double e = RelL2(AsDouble(out_gpu, SWA_DTYPE_BF16), AsDouble(out_cpu, SWA_DTYPE_BF16));
    EXPECT_LE(e, Budget(SWA_DTYPE_BF16)) << "replay " << it;
    if (with_lse) {
      dlse.Download(lse_gpu.data(), rows * 4);
      for (size_t i = 0; i < rows; ++i)
        ASSERT_LE(std::fabs(double(lse_gpu[i]) - double(lse_cpu[i])),
                  Budget(SWA_DTYPE_BF16) * (1.0 + std::fabs(double(lse_cpu[i]))))
            << "replay " << it << " lse row " << i << ": cuda " << lse_gpu[i] << ", cpu "
            << lse_cpu[i];
    }
    dc.ComparePools();
    ASSERT_FALSE(::testing::Test::HasFatalFailure()) << "replay " << it;
  }
  swa_plan_destroy(cpu_plan);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST(CudaGraph, CapturedDecodeStepReplaysWithNewLengths) {
  SWA_SKIP_WITHOUT_DEVICE();
  CapturedReplays({SWA_FORMAT_MXFP8, 16, 1, 512, true, true}, false, 9);
}

// The soft-cap and the LSE output reach the graph path's attention kernel
// through the same params as swa_step's.
TEST(CudaGraph, CapturedDecodeStepWithSoftcapAndLse) {
  SWA_SKIP_WITHOUT_DEVICE();
  LayerCfg cfg = {SWA_FORMAT_MXFP8, 8, 1, 128, true, false};  // shared K/V, one KV head
  cfg.softcap = 1.0f;
  CapturedReplays(cfg, true, 11);
}

// RoPE layers are refused at creation (no per-token positions on this path).
TEST(CudaGraph, RopeLayerIsRefused) {
  SWA_SKIP_WITHOUT_DEVICE();
  LayerCfg cfg = {SWA_FORMAT_MXFP8, 4, 1, 128, true, false};
  cfg.rope_style = SWA_ROPE_NEOX;
  cfg.rope_dims = 64;
  DualCache dc(8, 0, {cfg}, 1, 12);
  auto step_or = swa::cuda::DeviceDecodeStep::Create(*dc.gpu()->impl, 0, 1, 1);
  ASSERT_FALSE(step_or.ok());
  EXPECT_EQ(step_or.status().code(), absl::StatusCode::kUnimplemented) << step_or.status();
  EXPECT_NE(std::string(step_or.status().message()).find("RoPE"), std::string::npos)
      << step_or.status();
}

// An invalid batch (seqlen_q > R - W + 1) makes the planner report the
// sequence and the step writes nothing.
TEST(CudaGraph, InvalidBatchWritesNothing) {
  SWA_SKIP_WITHOUT_DEVICE();
  DualCache dc(8, 0, {{SWA_FORMAT_MXFP8, 4, 1, 128, true, false}}, 2, 10);
  auto step_or = swa::cuda::DeviceDecodeStep::Create(*dc.gpu()->impl, 0, 2, 8);
  ASSERT_TRUE(step_or.ok()) << step_or.status();
  DeviceBuffer d_slot(8), d_q(8), d_k(8), dq(8 * 4 * 128 * 2), dk(8 * 128 * 2), dout(8 * 4 * 128 * 2);
  const uint32_t slots[2] = {0, 1};
  const int32_t q[2] = {1, 5}, k[2] = {1, 5};  // R - W + 1 = 2 < 5
  d_slot.Upload(slots, 8);
  d_q.Upload(q, 8);
  d_k.Upload(k, 8);
  CUDA_ASSERT(cudaMemset(dout.get(), 0x5A, dout.bytes()));
  CUDA_ASSERT(cudaMemset(dk.get(), 0x3F, dk.bytes()));
  swa::cuda::DeviceDecodeBatch b;
  b.slot = static_cast<const uint32_t*>(d_slot.get());
  b.seqlen_q = static_cast<const int32_t*>(d_q.get());
  b.seqlen_k = static_cast<const int32_t*>(d_k.get());
  b.n_seqs = 2;
  swa::StepTensors x;
  x.q_dtype = x.kv_dtype = x.out_dtype = swa::Dtype::kBf16;
  x.q = dq.get();
  x.k_new = dk.get();
  x.out = dout.get();
  ASSERT_TRUE((*step_or)->Enqueue(b, x, dc.stream()).ok());
  CUDA_ASSERT(cudaStreamSynchronize(dc.stream()));
  int32_t err = 0;
  CUDA_ASSERT(cudaMemcpy(&err, (*step_or)->error(), 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(err, 2) << "sequence 1 (1 + index) is the invalid one";
  std::vector<uint8_t> out(dout.bytes());
  dout.Download(out.data(), out.size());
  for (uint8_t v : out) ASSERT_EQ(v, 0x5A);
  dc.ComparePools();  // both pools still all zero
}

}  // namespace
}  // namespace swa_gpu
