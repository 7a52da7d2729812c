// swa_step end to end on the CPU backend, decode steps: encode the new K/V,
// dequantise each sequence's ring rows, attend, store. Next to (a) the measured
// 1-core FMA peak and (b) the unfused pipeline an engine would otherwise run on
// the same ring: dequantise the rows (our codec), OpenBLAS sgemm for the
// scores, masked softmax with sinks, sgemm for the values.
//
//   build/bench/step_cpu_bench [--quick]
//   build/bench/step_cpu_bench --case 1 --seqs 64 --threads 1 --repeat 200   # one row, for perf
//
// GFLOP/s counts 4 * D * W * Hq per token (every token sees W keys here).
// Also printed: flops per CPU-second of the process (robust to preemption).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "cpu_bench_common.h"
#include "swacache.h"

using namespace swa_bench;  // NOLINT: a benchmark's main

namespace {

struct StepCase {
  const char* name;
  swa_format_t format;
  int hq, hkv, d;
  bool shared_kv;
};

constexpr int kWindow = 128, kDraft = 5, kTokens = kDraft + 1, kHistory = 500;

// One cache with `seqs` sequences prefilled to kHistory tokens.
struct Fixture {
  swa_cache_t* cache = nullptr;
  swa_plan_t* plan = nullptr;
  std::vector<swa_seq_t> decode;
  std::vector<float> q, kv, out, sinks;
  std::vector<uint16_t> q16;  // q as BF16 (q itself holds the same, BF16-exact, values)
  swa_step_args_t args;

  Fixture(const StepCase& c, int seqs, unsigned threads) {
    swa_layer_desc_t l;
    swa_layer_desc_init(&l);
    l.kv_format = c.format;
    l.q_heads = c.hq;
    l.kv_heads = c.hkv;
    l.head_dim = c.d;
    l.shared_kv = c.shared_kv;
    l.has_sinks = 1;
    swa_config_t cfg;
    swa_config_init(&cfg);
    cfg.window = kWindow;
    cfg.draft_tokens = kDraft;
    cfg.max_slots = seqs;
    cfg.backend = SWA_BACKEND_CPU;
    cfg.num_threads = threads;
    cfg.num_layers = 1;
    cfg.layers = &l;
    if (swa_cache_create(&cfg, &cache) != SWA_OK || swa_plan_create(cache, &plan) != SWA_OK) {
      std::fprintf(stderr, "setup failed: %s\n", swa_last_error());
      std::exit(1);
    }
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1, 1);
    const int t_max = seqs * kHistory;
    q.resize(size_t(t_max) * c.hq * c.d);
    kv.resize(size_t(t_max) * c.hkv * c.d * (c.shared_kv ? 1 : 2));
    out.resize(q.size());
    sinks.resize(c.hq);
    q16.resize(q.size());
    for (size_t i = 0; i < q.size(); ++i) {
      uint32_t bits;
      const float x = u(rng);
      std::memcpy(&bits, &x, 4);
      bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000u;  // nearest even
      std::memcpy(&q[i], &bits, 4);
      q16[i] = uint16_t(bits >> 16);
    }
    for (float& x : kv) x = u(rng);
    for (float& x : sinks) x = u(rng);
    swa_step_args_init(&args);
    args.q = q.data();
    args.k_new = kv.data();
    args.v_new = c.shared_kv ? nullptr : kv.data() + kv.size() / 2;
    args.out = out.data();
    args.sinks = sinks.data();
    std::vector<swa_seq_t> prefill;
    for (int s = 0; s < seqs; ++s) {
      uint32_t slot;
      swa_slot_alloc(cache, &slot);
      prefill.push_back({slot, kHistory, kHistory, 0});
      decode.push_back({slot, kTokens, kHistory + kTokens, 0});
    }
    Run(prefill);
  }
  ~Fixture() {
    swa_plan_destroy(plan);
    swa_cache_destroy(cache);
  }
  void Run(const std::vector<swa_seq_t>& batch) {
    if (swa_plan_build(plan, batch.data(), uint32_t(batch.size())) != SWA_OK ||
        swa_step(cache, plan, &args) != SWA_OK) {
      std::fprintf(stderr, "step failed: %s\n", swa_last_error());
      std::exit(1);
    }
  }
};

// The unfused pipeline an engine would otherwise run on the same ring rows:
// dequantise with our codec into tiles, then OpenBLAS sgemm, softmax, sgemm.
// GFLOP/s of its best repeat; 0 without OpenBLAS.
// *gf_cpu: the same per CPU-second of the process (best repeat).
double BaselineGflops(const StepCase& c, const Fixture& f, int seqs, unsigned threads,
                      double flops, double budget, int reps, double* gf_cpu) {
  *gf_cpu = 0;
#if defined(SWA_BENCH_HAVE_OPENBLAS)
    // The same ring rows, dequantised into the tiles the pipeline multiplies.
    openblas_set_num_threads(int(threads));
    const Case bc{c.name, c.hq, c.hkv, c.d, kTokens, kWindow + kTokens - 1, kWindow, c.shared_kv};
    Data x = MakeData(bc, seqs);
    swa_tensor_view_t v;
    v.struct_size = sizeof v;
    swa_cache_layer_view(f.cache, 0, &v);
    const auto fmt = static_cast<swa::Format>(c.format);
    const int n_rows = bc.keys;
    std::vector<int64_t> offsets(size_t(seqs) * n_rows);
    for (int s = 0; s < seqs; ++s)
      for (int j = 0; j < n_rows; ++j)
        offsets[size_t(s) * n_rows + j] =
            s * v.strides[0] + ((kHistory + kTokens - n_rows + j) % v.shape[1]) * v.strides[1];
    BlasScratch scratch;
    std::vector<float> blas_out(x.out.size());
    const uint8_t* base = static_cast<const uint8_t*>(v.data);
    const size_t vecs = size_t(seqs) * n_rows;
    const Timing t = TimeIt(
        [&] {
          // K vectors (and V vectors after them in each token) of every row,
          // one codec call per run of rows contiguous in the ring.
          const int64_t pitch = v.strides[1];
          const size_t stride = size_t(c.hkv) * c.d;
          for (size_t i = 0; i < vecs;) {
            size_t n = 1;
            while (i + n < vecs && offsets[i + n] == offsets[i] + int64_t(n) * pitch) ++n;
            for (int g = 0; g < c.hkv; ++g) {
              const uint8_t* first = base + offsets[i] + int64_t(g) * v.strides[2];
              swa::codec::DecodeRows(fmt, c.d, n, {.base = first, .stride = size_t(pitch)},
                                     {x.k.data() + i * stride + size_t(g) * c.d,
                                      swa::Dtype::kFp32, stride});
              if (!c.shared_kv)
                swa::codec::DecodeRows(
                    fmt, c.d, n,
                    {.base = first + int64_t(c.hkv) * v.strides[2], .stride = size_t(pitch)},
                    {x.v.data() + i * stride + size_t(g) * c.d, swa::Dtype::kFp32, stride});
            }
            i += n;
          }
          OpenBlasPipeline(x, blas_out.data(), scratch);
        },
        budget, reps);
    *gf_cpu = flops / t.best_cpu_s / 1e9;
    return flops / t.best_s / 1e9;
#else
  (void)c, (void)f, (void)seqs, (void)threads, (void)flops, (void)budget, (void)reps;
  return 0;
#endif
}

// Best wall and CPU seconds of swa_step calls, each re-planning the same step
// (a rewind of kTokens, within the ring margin): one untimed warm-up call, then
// at least `reps` calls and `budget_s` seconds, as the baseline's TimeIt.
// bf16: the queries go in as BF16 (SWA_DTYPE_BF16), which lets the step take
// the AVX512-BF16 kernels on an MXFP8 or BF16 ring.
bool TimeStep(Fixture& f, int seqs, int reps, double budget_s, bool bf16, double* best,
              double* best_cpu) {
  f.args.q = bf16 ? static_cast<const void*>(f.q16.data()) : f.q.data();
  f.args.q_dtype = bf16 ? SWA_DTYPE_BF16 : SWA_DTYPE_FP32;
  *best = *best_cpu = 1e30;
  const auto start = Clock::now();
  for (int r = -1; r < reps || std::chrono::duration<double>(Clock::now() - start).count() < budget_s;
       ++r) {
    if (swa_plan_build(f.plan, f.decode.data(), uint32_t(seqs)) != SWA_OK) return false;
    if (r < 0) {  // warm-up: workspaces, page faults, clocks
      if (swa_step(f.cache, f.plan, &f.args) != SWA_OK) return false;
      continue;
    }
    const double c0 = CpuSeconds();
    const auto t0 = Clock::now();
    if (swa_step(f.cache, f.plan, &f.args) != SWA_OK) return false;
    *best = std::min(*best, std::chrono::duration<double>(Clock::now() - t0).count());
    *best_cpu = std::min(*best_cpu, CpuSeconds() - c0);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int only_case = -1, only_seqs = -1, only_threads = -1, repeat = 0;
  std::string only;  // "fp32" or "bf16": time that step alone, no peaks, no baseline (profiling)
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    const bool has_value = a + 1 < argc;
    if (arg == "--quick") quick = true;
    else if (arg == "--case" && has_value) only_case = std::atoi(argv[++a]);
    else if (arg == "--seqs" && has_value) only_seqs = std::atoi(argv[++a]);
    else if (arg == "--threads" && has_value) only_threads = std::atoi(argv[++a]);
    else if (arg == "--repeat" && has_value) repeat = std::atoi(argv[++a]);
    else if (arg == "--only" && has_value) only = argv[++a];
    else {
      std::fprintf(stderr, "usage: %s [--quick] [--case N] [--seqs N] [--threads N] [--repeat N] [--only fp32|bf16]\n",
                   argv[0]);
      return 2;
    }
  }
  const double budget = quick ? 0.2 : 1.0;
  const int reps = repeat > 0 ? repeat : quick ? 3 : 7;
  double peak = 0, peak2 = 0, peak512 = 0, peak_bf16 = 0;
  bool have_bf16 = false;
#if defined(__x86_64__)
  if (only.empty() && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    peak2 = BestOf(FmaPeakAvx2, reps);
  if (only.empty() && __builtin_cpu_supports("avx512f")) peak512 = BestOf(FmaPeakAvx512, reps);
  have_bf16 = __builtin_cpu_supports("avx512bf16");
  if (only.empty() && have_bf16) peak_bf16 = BestOf(Bf16DotPeakAvx512, reps);
#endif
  peak = std::max(peak2, peak512);
  const char* forced = std::getenv("SWACACHE_ATTENTION");
  std::printf("swa_step decode on the CPU backend: W %d, %d tokens per sequence, %d-token history\n",
              kWindow, kTokens, kHistory);
  std::printf("(a) measured 1-core FMA peak: AVX2 %.1f, AVX-512 %.1f GFLOP/s (%%peak uses the "
              "larger); vdpbf16ps peak %.1f GFLOP/s\n",
              peak2, peak512, peak_bf16);
  std::printf("ours fp32: FP32 queries (SWACACHE_ATTENTION=%s); ours bf16: the same queries "
              "as BF16 (%s)\n",
              forced != nullptr ? forced : "unset: avx512 if the CPU has it",
              have_bf16 ? "AVX512-BF16 kernels on MXFP8/BF16 rings" : "no AVX512-BF16: FP32 kernels");
#if defined(SWA_BENCH_HAVE_OPENBLAS)
  std::printf("(b) dequantise (our codec) + OpenBLAS %s (\"%s\") sgemm, softmax, sgemm\n",
              OPENBLAS_VERSION, openblas_get_corename());
#else
  std::printf("(b) OpenBLAS baseline: SKIPPED (not found at configure time)\n");
#endif
  std::printf("machine load (1/5/15 min): %s\n\n", LoadAverage().c_str());
  std::printf("%-32s %4s %3s | %7s %7s %7s %7s %7s %7s | %7s %7s %7s %7s %7s %7s %6s %6s | %6s %6s\n",
              "case", "seqs", "thr", "fp32", "bf16", "base", "fp/base", "bf/base", "bf/fp",
              "fp32", "bf16", "base", "fp/base", "bf/base", "bf/fp", "%FMA", "%dpbf", "scal32",
              "scal16");
  std::printf("%-32s %4s %3s | %-47s | %-63s |\n", "", "", "", "wall clock GFLOP/s, best repeat",
              "GFLOP per CPU-second of the process, best repeat");

  const StepCase cases[] = {
      {"DeepSeek-V4-like MXFP8 Hq64 1xD512 shared", SWA_FORMAT_MXFP8, 64, 1, 512, true},
      {"gpt-oss-like BF16 Hq64 8xD64 K+V", SWA_FORMAT_BF16, 64, 8, 64, false},
  };
  for (int ci = 0; ci < int(std::size(cases)); ++ci) {
    const StepCase& c = cases[ci];
    if (only_case >= 0 && ci != only_case) continue;
    for (int seqs : {16, 64}) {
      if (only_seqs > 0 && seqs != only_seqs) continue;
      double one_thread = 0, one_thread16 = 0;
      for (unsigned threads : {1u, 2u}) {
        if (only_threads > 0 && int(threads) != only_threads) continue;
        Fixture f(c, seqs, threads);
        const double flops = 4.0 * c.d * kWindow * c.hq * kTokens * seqs;
        // CPU time of the process too: robust to preemption on a shared machine.
        double best, best_cpu, best16, best16_cpu;
        best = best_cpu = best16 = best16_cpu = 1e30;
        if (only != "bf16" && !TimeStep(f, seqs, reps, budget, false, &best, &best_cpu)) return 1;
        if (only != "fp32" && !TimeStep(f, seqs, reps, budget, true, &best16, &best16_cpu)) return 1;
        const double gf = flops / best / 1e9, gf16 = flops / best16 / 1e9;  // 0-ish if skipped
        const double gf_cpu = flops / best_cpu / 1e9, gf16_cpu = flops / best16_cpu / 1e9;
        if (threads == 1) one_thread = gf, one_thread16 = gf16;

        double base_cpu = 0;
        const double base_gf =
            only.empty() ? BaselineGflops(c, f, seqs, threads, flops, budget, reps, &base_cpu) : 0;
        auto ratio = [](double x, double y) {
          char buf[16] = "-";
          if (x > 0 && y > 0 && x < 1e12 && y < 1e12) std::snprintf(buf, sizeof buf, "%.2fx", x / y);
          return std::string(buf);
        };
        std::string scal32 = "-", scal16 = "-";
        if (threads == 2) scal32 = ratio(gf, one_thread), scal16 = ratio(gf16, one_thread16);
        char pct[16] = "-", pct16[16] = "-";
        if (peak > 0) std::snprintf(pct, sizeof pct, "%.0f%%", 100 * gf_cpu / peak);
        if (peak_bf16 > 0)
          std::snprintf(pct16, sizeof pct16, "%.0f%%", 100 * gf16_cpu / peak_bf16);
        std::printf("%-32.32s %4d %3u | %7.1f %7.1f %7.1f %7s %7s %7s | %7.1f %7.1f %7.1f %7s %7s %7s %6s %6s | %6s %6s\n",
                    c.name, seqs, threads, gf, gf16, base_gf, ratio(gf, base_gf).c_str(),
                    ratio(gf16, base_gf).c_str(), ratio(gf16, gf).c_str(), gf_cpu, gf16_cpu,
                    base_cpu, ratio(gf_cpu, base_cpu).c_str(), ratio(gf16_cpu, base_cpu).c_str(),
                    ratio(gf16_cpu, gf_cpu).c_str(), pct, pct16, scal32.c_str(), scal16.c_str());
      }
    }
  }
  std::printf("\nfp32: FP32 queries; bf16: the same queries as BF16; base: (b) on the same threads.\n"
              "%%FMA: fp32 per CPU-second against the larger 1-core FMA peak of (a); %%dpbf: bf16\n"
              "against the vdpbf16ps peak. scal32, scal16: 2 threads vs 1, wall clock (only meaningful\n"
              "on an otherwise idle machine). CPU-second figures ignore time the process was not\n"
              "running (robust to other load), not the caches it shares.\nmachine load (1/5/15 min): %s\n",
              LoadAverage().c_str());
  return 0;
}
