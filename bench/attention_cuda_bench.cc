// GPU benchmarks (built only with CUDA; run by tests/gpu/run.sh):
//   ceilings: device copy bandwidth, large bf16 GEMM (cuBLASLt via swa_project's backend path)
//   decode attention, DeepSeek-V4-like shape (Hq 64, one shared 512-wide MXFP8
//     vector, 6 query tokens, W 128) at batch 8 / 64 / 256 / 1024
//   prefill attention, 4096-token chunks (in-band FLOPs only)
// Prints one table row per case: time, achieved GB/s (Q + KV + O) and the
// fraction of copy bandwidth, TFLOP/s and the fraction of the GEMM rate.
// Usage: attention_cuda_bench [--quick]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/step_work.h"

namespace {

#define CK(x)                                                                      \
  do {                                                                             \
    cudaError_t e_ = (x);                                                          \
    if (e_ != cudaSuccess) {                                                       \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

template <typename Fn>
float TimeMs(cudaStream_t s, int iters, Fn&& fn) {
  fn();  // warm-up
  CK(cudaStreamSynchronize(s));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a, s));
  for (int i = 0; i < iters; ++i) fn();
  CK(cudaEventRecord(b, s));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / iters;
}

void Row(const char* name, float ms, double bytes, double flops, double bw, double gemm) {
  const double gbs = bytes / (ms * 1e-3) / 1e9;
  const double tfs = flops / (ms * 1e-3) / 1e12;
  std::printf("| %-34s | %10.4f | %9.1f | %6.1f%% | %8.2f | %6.1f%% |\n", name, ms, gbs,
              bw > 0 ? 100 * gbs / bw : 0, tfs, gemm > 0 ? 100 * tfs / gemm : 0);
  std::fflush(stdout);
}

uint16_t Bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return uint16_t((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

void* DeviceRandomBf16(size_t n, std::mt19937& rng) {
  std::vector<uint16_t> h(n);
  std::uniform_real_distribution<float> d(-1, 1);
  for (auto& x : h) x = Bf16(d(rng));
  void* p;
  CK(cudaMalloc(&p, n * 2));
  CK(cudaMemcpy(p, h.data(), n * 2, cudaMemcpyHostToDevice));
  return p;
}

// Shape of the attention benchmarks.
constexpr int kHq = 64, kD = 512, kW = 128, kN = 5, kR = kW + kN + 1, kVec = kD + kD / 32;

struct Problem {
  std::vector<swa::PlannedSeq> seqs;
  std::vector<int32_t> offset_len, pivots, store_rows;
  std::vector<swa::RowSegment> segments;
  int32_t T = 0;
  double kv_rows = 0;  // distinct KV rows read
  double band = 0;     // sum over tokens of visible keys
};

// Decode: every sequence brings 6 tokens at positions 1000..1005 (ring-only).
Problem DecodeProblem(int batch) {
  Problem p;
  for (int i = 0; i < batch; ++i) {
    const int32_t q = kN + 1, k = 1000 + q;
    p.seqs.push_back({uint32_t(i), q, k, k - q, 0, p.T});
    for (int j = 0; j < q; ++j) {
      const int32_t pos = k - q + j, lo = std::max(0, pos - kW + 1);
      p.offset_len.push_back(i * kR + lo % kR);
      p.offset_len.push_back(pos - lo + 1);
      p.store_rows.push_back(i * kR + pos % kR);
      p.band += pos - lo + 1;
    }
    p.T += q;
    p.kv_rows += kW + kN;
  }
  return p;
}

// Prefill: `n` sequences with a 4096-token chunk each after 4096 tokens of history.
Problem PrefillProblem(int n, int chunk) {
  Problem p;
  for (int i = 0; i < n; ++i) {
    const int32_t q_start = 4096, k = q_start + chunk;
    p.seqs.push_back({uint32_t(i), chunk, k, q_start, 0, p.T});
    const int32_t hb = q_start - kW;  // history rows, split where the ring wraps
    for (int32_t c = 0; c < kW;) {
      const int32_t pos = hb + c, r = pos % kR, cnt = std::min(kW - c, kR - r);
      p.segments.push_back({i * kW + c, i * kR + r, cnt});
      c += cnt;
    }
    const int32_t sec2_first = n * kW + p.T;
    for (int32_t j = 0; j < chunk; ++j) {
      const int32_t pos = q_start + j, lo = std::max(0, pos - kW + 1);
      const int32_t start = std::min(lo, q_start) - hb, k0 = std::max(0, lo - q_start);
      p.pivots.insert(p.pivots.end(), {i * kW + start, kW - start, sec2_first + k0, j - k0 + 1});
      p.band += pos - lo + 1;
    }
    for (int32_t j = 0; j < chunk; ++j)
      p.store_rows.push_back(j >= chunk - kR ? i * kR + (q_start + j) % kR : -1);
    p.T += chunk;
    p.kv_rows += kW + chunk;
  }
  return p;
}


// Ceiling 1: device-to-device copy bandwidth (read + write), GB/s.
double CopyBandwidth(cudaStream_t s, bool quick) {
  const size_t copy_bytes = size_t(1) << 30;
  void *ca, *cb;
  CK(cudaMalloc(&ca, copy_bytes));
  CK(cudaMalloc(&cb, copy_bytes));
  CK(cudaMemset(ca, 1, copy_bytes));
  const float copy_ms = TimeMs(s, quick ? 5 : 20, [&] {
    CK(cudaMemcpyAsync(cb, ca, copy_bytes, cudaMemcpyDeviceToDevice, s));
  });
  const double bw = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9;  // read + write
  Row("device copy 1 GiB (read+write)", copy_ms, 2.0 * copy_bytes, 0, bw, 0);
  CK(cudaFree(ca));
  CK(cudaFree(cb));

  return bw;
}

// Ceiling 2: a large BF16 GEMM through the backend's cuBLASLt path, TFLOP/s.
double GemmTflops(swa::Backend& be, cudaStream_t s, std::mt19937& rng, bool quick, double bw) {
  const int64_t gm = 8192, gn = 8192, gk = 8192;
  void* ga = DeviceRandomBf16(size_t(gm * gk), rng);
  void* gb = DeviceRandomBf16(size_t(gk * gn), rng);
  void* gc;
  CK(cudaMalloc(&gc, size_t(gm * gn) * 2));
  swa::ProjectWork pw;
  pw.hidden = static_cast<const uint16_t*>(ga);
  pw.weight = static_cast<const uint16_t*>(gb);
  pw.out = gc;
  pw.out_dtype = swa::Dtype::kBf16;
  pw.tokens = gm;
  pw.in_dim = gk;
  pw.out_dim = gn;
  pw.stream = s;
  const double gemm_flops = 2.0 * gm * gn * gk;
  const float gemm_ms = TimeMs(s, quick ? 3 : 10, [&] {
    const absl::Status st = be.Project(pw);
    if (!st.ok()) std::printf("FAILED: %s\n", std::string(st.message()).c_str()), std::exit(1);
  });
  const double gemm = gemm_flops / (gemm_ms * 1e-3) / 1e12;
  Row("bf16 GEMM 8192^3 (cuBLASLt)", gemm_ms, 0, gemm_flops, bw, gemm);
  CK(cudaFree(ga));
  CK(cudaFree(gb));
  CK(cudaFree(gc));
  return gemm;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  int n_dev = 0;
  if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 0;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (sm_%d%d, %d SMs)\n\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount);
  auto backend_or = swa::MakeBackend(swa::BackendKind::kCuda, 0, 0);
  if (!backend_or.ok()) {
    std::printf("FAILED: %s\n", std::string(backend_or.status().message()).c_str());
    return 1;
  }
  swa::Backend& be = **backend_or;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::mt19937 rng(1);

  std::printf("| %-34s | %10s | %9s | %7s | %8s | %7s |\n", "case", "ms", "GB/s", "of bw",
              "TFLOP/s", "of GEMM");
  std::printf("|%s|%s|%s|%s|%s|%s|\n", std::string(36, '-').c_str(), std::string(12, '-').c_str(),
              std::string(11, '-').c_str(), std::string(9, '-').c_str(),
              std::string(10, '-').c_str(), std::string(9, '-').c_str());

  const double bw = CopyBandwidth(s, quick);
  const double gemm = GemmTflops(be, s, rng, quick, bw);

  // ---- Attention ----
  auto run = [&](const char* name, const Problem& p, int slots, swa::Dtype out_dtype) {
    const uint64_t slot_bytes = (uint64_t(kR) * kVec + 31) / 32 * 32;
    std::vector<uint8_t> pool_host(slot_bytes * slots);
    std::uniform_int_distribution<int> code(0, 0x7E), sign(0, 1), scale(122, 127);
    for (int sl = 0; sl < slots; ++sl)
      for (int r = 0; r < kR; ++r) {
        uint8_t* v = pool_host.data() + sl * slot_bytes + size_t(r) * kVec;
        for (int e = 0; e < kD; ++e) v[e] = uint8_t(code(rng) | (sign(rng) << 7));
        for (int b = 0; b < kD / 32; ++b) v[kD + b] = uint8_t(scale(rng));
      }
    auto pool_or = be.Allocate(pool_host.size(), 32);
    if (!pool_or.ok()) return;
    uint8_t* pool = static_cast<uint8_t*>(*pool_or);
    CK(cudaMemcpy(pool, pool_host.data(), pool_host.size(), cudaMemcpyHostToDevice));
    void* q = DeviceRandomBf16(size_t(p.T) * kHq * kD, rng);
    void* k = DeviceRandomBf16(size_t(p.T) * kD, rng);
    void* o;
    CK(cudaMalloc(&o, size_t(p.T) * kHq * kD * (out_dtype == swa::Dtype::kBf16 ? 2 : 4)));
    swa::StepWork w;
    w.layer.ring = swa::RingRows{pool, slot_bytes, kVec, kR};
    w.layer.vec_bytes = kVec;
    w.layer.window = kW;
    w.layer.q_heads = kHq;
    w.layer.kv_heads = 1;
    w.layer.head_dim = kD;
    w.layer.shared_kv = true;
    w.plan.stamp = 1;
    w.plan.staged = !p.pivots.empty();
    w.plan.window = kW;
    w.plan.seqs = p.seqs.data();
    w.plan.n_seqs = uint32_t(p.seqs.size());
    w.plan.n_tokens = p.T;
    for (const swa::PlannedSeq& sq : p.seqs)
      w.plan.max_seqlen_q = std::max(w.plan.max_seqlen_q, sq.seqlen_q);
    w.plan.offset_len = p.offset_len.data();
    w.plan.load_segments = p.segments.data();
    w.plan.n_load_segments = p.segments.size();
    w.plan.pivots = p.pivots.data();
    w.plan.store_rows = p.store_rows.data();
    swa::StepTensors x;
    x.q = q;
    x.q_dtype = swa::Dtype::kBf16;
    x.k_new = k;
    x.kv_dtype = swa::Dtype::kBf16;
    x.out = o;
    x.out_dtype = out_dtype;
    x.stream = s;
    w.tensors = &x;
    w.scale = 0.04f;
    std::unique_ptr<swa::PreparedPlan> prepared;
    if (const absl::Status st = be.Prepare(w.plan, &prepared); !st.ok())
      std::printf("FAILED: %s\n", std::string(st.message()).c_str()), std::exit(1);
    swa::StepResult res;
    const float ms = TimeMs(s, quick ? 5 : 20, [&] {
      const absl::Status st = be.RunStep(w, *prepared, &res);
      if (!st.ok()) std::printf("FAILED: %s\n", std::string(st.message()).c_str()), std::exit(1);
    });
    const double qo = 2.0 * p.T * kHq * kD * 2;  // Q in + O out (bf16)
    const double bytes = qo + p.kv_rows * kVec + double(p.T) * kD * 2;  // + new K in
    const double flops = 4.0 * p.band * kHq * kD;  // QK^T + PV over visible keys only
    Row(name, ms, bytes, flops, bw, gemm);
    CK(cudaFree(q));
    CK(cudaFree(k));
    CK(cudaFree(o));
    be.Free(pool, pool_host.size());
  };
  for (int batch : {8, 64, 256, 1024}) {
    char name[64];
    std::snprintf(name, sizeof name, "decode B=%d (bf16 out, MMA)", batch);
    run(name, DecodeProblem(batch), batch, swa::Dtype::kBf16);
  }
  run("decode B=256 (fp32 out, precise)", DecodeProblem(256), 256, swa::Dtype::kFp32);
  run("prefill 1 x 4096 (bf16 out)", PrefillProblem(1, 4096), 1, swa::Dtype::kBf16);
  if (!quick) run("prefill 4 x 4096 (bf16 out)", PrefillProblem(4, 4096), 4, swa::Dtype::kBf16);
  std::printf("\nbytes = Q + new K + distinct KV rows + O; FLOPs = 4 * visible keys * Hq * D "
              "(in-band only). Copy bandwidth counts read + write.\n");
  cudaStreamDestroy(s);
  return 0;
}
