// The per-token RoPE cos/sin table of the CUDA step (kernels/step/rope_cos_sin.h,
// docs/cuda_backend.md "RoPE"), on the device:
//  - every row of a sequence's token holds RopeTableEntry of its position
//    (the CPU's angle fl(pos * inv_freq) and cosf/sinf; device and host
//    cosf/sinf may differ by an ulp), for host-planned batches (an empty
//    sequence in between) and device-planned ones (refused sequences with
//    seqlen_q 0), positions past 2^16, 2^24 and up to 2^31 - 1, YaRN tables
//    of real models; rows of no sequence are not written;
//  - captured into a CUDA graph, a replay reads the positions of the
//    sequences in device memory at that launch (the graph decode's case);
//  - end to end through swa_step, positions past 2^24 against the CPU
//    backend (the other table users, YaRN, partial slices, both styles and
//    de-rotation: cuda_rope_softcap_lse_test.cc).
#include <cstring>

#include "gpu/gpu_test_util.h"
#include "kernels/step/rope_apply.h"
#include "kernels/step/rope_cos_sin.h"
#include "layout/rope_table.h"
#include "unit/rope_goldens.h"

namespace swa_gpu {
namespace {

using swa::PlannedSeq;
using swa::kernels::RopeCs;

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

int64_t UlpDistance(float a, float b) {
  auto key = [](float f) {
    const int32_t i = int32_t(Bits(f));
    return i < 0 ? int64_t(INT32_MIN) - i : int64_t(i);
  };
  return std::llabs(key(a) - key(b));
}

// A plan's sequences with consecutive token offsets; seqlen_q 0 = empty or
// refused. q_start = seqlen_k - seqlen_q.
std::vector<PlannedSeq> Plan(const std::vector<std::pair<int32_t, int32_t>>& q_start_and_len,
                             int32_t fixed_stride = 0) {
  std::vector<PlannedSeq> seqs;
  int32_t off = 0;
  for (size_t i = 0; i < q_start_and_len.size(); ++i) {
    const auto [q_start, q] = q_start_and_len[i];
    PlannedSeq s{};
    s.slot = uint32_t(i);
    s.seqlen_q = q;
    s.q_start = q_start;
    s.seqlen_k = q_start + q;
    s.token_offset = fixed_stride > 0 ? int32_t(i) * fixed_stride : off;
    off += q;
    seqs.push_back(s);
  }
  return seqs;
}

constexpr uint8_t kPoison = 0x7b;

// Checks a downloaded table against the host entries of `seqs`: rows of a
// token within 2 ulp (counting exact ones), other rows still poisoned.
void CheckTable(const std::vector<RopeCs>& got, const std::vector<PlannedSeq>& seqs,
                const std::vector<float>& inv_freq, int32_t n_tokens, const char* what,
                size_t* exact, size_t* total) {
  const size_t pairs = inv_freq.size();
  for (int32_t t = 0; t < n_tokens; ++t) {
    int32_t s = -1;
    for (size_t i = 0; i < seqs.size(); ++i)
      if (t >= seqs[i].token_offset && t < seqs[i].token_offset + seqs[i].seqlen_q)
        s = int32_t(i);
    for (size_t f = 0; f < pairs; ++f) {
      const RopeCs& g = got[size_t(t) * pairs + f];
      if (s < 0) {
        uint8_t want[sizeof(RopeCs)];
        std::memset(want, kPoison, sizeof want);
        ASSERT_EQ(std::memcmp(&g, want, sizeof want), 0) << what << ": row " << t << " written";
        continue;
      }
      const int32_t pos = seqs[s].q_start + (t - seqs[s].token_offset);
      const RopeCs w = swa::kernels::RopeTableEntry(float(pos), inv_freq[f]);
      ASSERT_LE(UlpDistance(g.c, w.c), 2) << what << " pos " << pos << " freq " << f;
      ASSERT_LE(UlpDistance(g.s, w.s), 2) << what << " pos " << pos << " freq " << f;
      *exact += (Bits(g.c) == Bits(w.c)) + (Bits(g.s) == Bits(w.s));
      *total += 2;
    }
  }
}

std::vector<std::vector<float>> Frequencies() {
  namespace g = swa_rope_goldens;
  std::vector<std::vector<float>> f = {
      {g::kGptOss20b_inv_freq, g::kGptOss20b_inv_freq + 32},
      {g::kDeepseekV4Compress_inv_freq, g::kDeepseekV4Compress_inv_freq + 32}};
  swa::RopeSpec s;
  s.style = swa::RopeStyle::kNeox;
  s.dims = 40;  // a partial slice: 20 frequencies
  s.theta = 1e6f;
  s.yarn_factor = 8.0f;
  s.yarn_original_max_positions = 2048;
  f.push_back(swa::MakeRopeTable(s).inv_freq);
  return f;
}

struct Device {
  PlannedSeq* seqs = nullptr;
  float* inv_freq = nullptr;
  RopeCs* table = nullptr;
  ~Device() {
    cudaFree(seqs);
    cudaFree(inv_freq);
    cudaFree(table);
  }
};

TEST(CudaRopeTable, RowsHoldEachTokensEntries) {
  SWA_SKIP_WITHOUT_DEVICE();
  const std::vector<std::vector<PlannedSeq>> plans = {
      // Host-planned: prefill chunk crossing 2^16, an empty sequence, decode
      // and verify tokens far out.
      Plan({{65500, 70}, {12, 0}, {0, 3}, {(1 << 24) - 2, 5}, {0x7fffffff - 4, 4}}),
      // Device-planned: 4 tokens per sequence, refused ones (seqlen_q 0) between.
      Plan({{100000, 4}, {0, 0}, {7, 4}, {5, 0}, {123456789, 4}, {(1 << 24) + 1, 4}}, 4),
  };
  size_t exact = 0, total = 0;
  for (const std::vector<float>& inv : Frequencies())
    for (size_t n = 0; n < plans.size(); ++n) {
      const std::vector<PlannedSeq>& seqs = plans[n];
      const int32_t T = seqs.back().token_offset + std::max(seqs.back().seqlen_q, 4);
      const size_t entries = size_t(T) * inv.size();
      Device d;
      CUDA_ASSERT(cudaMalloc(reinterpret_cast<void**>(&d.seqs), seqs.size() * sizeof(PlannedSeq)));
      CUDA_ASSERT(cudaMalloc(reinterpret_cast<void**>(&d.inv_freq), inv.size() * 4));
      CUDA_ASSERT(cudaMalloc(reinterpret_cast<void**>(&d.table), entries * sizeof(RopeCs)));
      CUDA_ASSERT(cudaMemcpy(d.seqs, seqs.data(), seqs.size() * sizeof(PlannedSeq),
                             cudaMemcpyHostToDevice));
      CUDA_ASSERT(cudaMemcpy(d.inv_freq, inv.data(), inv.size() * 4, cudaMemcpyHostToDevice));
      CUDA_ASSERT(cudaMemset(d.table, kPoison, entries * sizeof(RopeCs)));
      swa::kernels::RopeCosSinParams p;
      p.seqs = d.seqs;
      p.n_seqs = int32_t(seqs.size());
      p.n_tokens = T;
      p.inv_freq = d.inv_freq;
      p.pairs = int32_t(inv.size());
      p.table = d.table;
      CUDA_ASSERT(swa::kernels::LaunchRopeCosSin(p, nullptr));
      CUDA_ASSERT(cudaDeviceSynchronize());
      std::vector<RopeCs> got(entries);
      CUDA_ASSERT(cudaMemcpy(got.data(), d.table, entries * sizeof(RopeCs), cudaMemcpyDeviceToHost));
      CheckTable(got, seqs, inv, T, n == 0 ? "host plan" : "device plan", &exact, &total);
      if (HasFatalFailure()) return;
    }
  RecordProperty("exact_fraction", std::to_string(double(exact) / double(total)));
}

// The graph decode captures the table launch once; every replay must read
// the sequences' positions as they are in device memory then.
TEST(CudaRopeTable, CapturedLaunchReadsPositionsAtReplay) {
  SWA_SKIP_WITHOUT_DEVICE();
  const std::vector<float> inv = Frequencies()[0];
  const int32_t tokens = 3, n_seqs = 4, T = tokens * n_seqs;
  const std::vector<PlannedSeq> a = Plan({{10, 3}, {70000, 3}, {0, 0}, {5, 3}}, tokens);
  const std::vector<PlannedSeq> b = Plan({{0, 0}, {70003, 3}, {(1 << 24) + 9, 3}, {8, 3}}, tokens);
  Device d;
  const size_t entries = size_t(T) * inv.size();
  CUDA_ASSERT(cudaMalloc(reinterpret_cast<void**>(&d.seqs), n_seqs * sizeof(PlannedSeq)));
  CUDA_ASSERT(cudaMalloc(reinterpret_cast<void**>(&d.inv_freq), inv.size() * 4));
  CUDA_ASSERT(cudaMalloc(reinterpret_cast<void**>(&d.table), entries * sizeof(RopeCs)));
  CUDA_ASSERT(cudaMemcpy(d.inv_freq, inv.data(), inv.size() * 4, cudaMemcpyHostToDevice));
  cudaStream_t stream;
  CUDA_ASSERT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  swa::kernels::RopeCosSinParams p;
  p.seqs = d.seqs;
  p.n_seqs = n_seqs;
  p.n_tokens = T;
  p.inv_freq = d.inv_freq;
  p.pairs = int32_t(inv.size());
  p.table = d.table;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_ASSERT(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  CUDA_ASSERT(swa::kernels::LaunchRopeCosSin(p, stream));
  CUDA_ASSERT(cudaStreamEndCapture(stream, &graph));
  CUDA_ASSERT(cudaGraphInstantiate(&exec, graph, 0));
  size_t exact = 0, total = 0;
  for (const std::vector<PlannedSeq>* seqs : {&a, &b, &a}) {
    CUDA_ASSERT(cudaMemcpyAsync(d.seqs, seqs->data(), n_seqs * sizeof(PlannedSeq),
                                cudaMemcpyHostToDevice, stream));
    CUDA_ASSERT(cudaMemsetAsync(d.table, kPoison, entries * sizeof(RopeCs), stream));
    CUDA_ASSERT(cudaGraphLaunch(exec, stream));
    CUDA_ASSERT(cudaStreamSynchronize(stream));
    std::vector<RopeCs> got(entries);
    CUDA_ASSERT(cudaMemcpy(got.data(), d.table, entries * sizeof(RopeCs), cudaMemcpyDeviceToHost));
    CheckTable(got, *seqs, inv, T, "replay", &exact, &total);
    if (HasFatalFailure()) break;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// Through swa_step on both backends: a prefill at 2^24 - 7 (float(pos) rounds
// to even above 2^24), then decode and verify steps across 2^24, YaRN and a
// partial slice with de-rotation; ring-only and staged paths, both kernels.
TEST(CudaRopeTable, PositionsPast2To24MatchCpu) {
  SWA_SKIP_WITHOUT_DEVICE();
  LayerCfg yarn{SWA_FORMAT_MXFP8, 8, 2, 128, false, true};
  yarn.rope_style = SWA_ROPE_NEOX;
  yarn.rope_first = 32;
  yarn.rope_dims = 64;
  yarn.rope_theta = 1e6f;
  yarn.yarn_factor = 16.0f;
  yarn.yarn_original = 4096;
  yarn.derotate = true;
  LayerCfg gptj{SWA_FORMAT_BF16, 4, 4, 64, true, false};
  gptj.rope_style = SWA_ROPE_GPTJ;
  gptj.rope_dims = 64;
  const uint32_t W = 16;
  DualCache dc(W, 3, {yarn, gptj}, 2, 31);
  dc.set_pool_tolerance(1e-4);
  dc.set_lse(true);
  const Dtypes dts[] = {{SWA_DTYPE_FP32, SWA_DTYPE_FP32, SWA_DTYPE_FP32},
                        {SWA_DTYPE_BF16, SWA_DTYPE_BF16, SWA_DTYPE_BF16}};
  const int32_t H[2] = {(1 << 24) - 7, 0x7fff0000};
  std::vector<int32_t> len(2);
  std::vector<Seq> seqs;
  for (uint32_t s = 0; s < 2; ++s) {
    seqs.push_back({s, int32_t(W), H[s], H[s] - int32_t(W)});
    len[s] = H[s];
  }
  dc.Step(seqs, dts[0]);
  if (HasFatalFailure()) return;
  for (int step = 0; step < 8; ++step) {
    seqs.clear();
    for (uint32_t s = 0; s < 2; ++s) {
      const int32_t q = step == 5 ? 20 : 1 + (step + int32_t(s)) % 4;  // 20: a staged step
      len[s] += q;
      seqs.push_back({s, q, len[s], H[s] - int32_t(W)});
    }
    dc.Step(seqs, dts[step % 2]);
    if (HasFatalFailure()) return;
  }
  RecordProperty("worst_rel_l2", std::to_string(dc.worst_error()));
}

}  // namespace
}  // namespace swa_gpu
