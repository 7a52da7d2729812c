// swa_step end to end on the CPU backend, decode steps: encode the new K/V,
// dequantise each sequence's ring rows, attend, store. Next to (a) the measured
// 1-core FMA peak and (b) the unfused pipeline an engine would otherwise run on
// the same ring: dequantise the rows (our codec), OpenBLAS sgemm for the
// scores, masked softmax with sinks, sgemm for the values.
//
//   build/bench/step_cpu_bench [--quick]
//   build/bench/step_cpu_bench --case 1 --seqs 64 --threads 1 --only bf16 --budget 10   # one row, for perf
//
// GFLOP/s counts 4 * D * W * Hq per token (every token sees W keys here), of
// each contender's best call. Also printed: flops per CPU-second of the process
// (robust to preemption). The contenders of one case and sequence count (ours
// FP32, ours BF16, the baseline; 1 and 2 threads) are timed interleaved, call
// by call, so that a ratio never compares a fast stretch of a shared machine
// with a slow one.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/attention.h"
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
constexpr int kPrefillSeqs = 4;  // sequences per prefill step while setting up

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
    // Tokens of the largest step: a prefill of kPrefillSeqs sequences or the decode.
    const int t_max = std::max(std::min(seqs, kPrefillSeqs) * kHistory, seqs * kTokens);
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
      if (int(prefill.size()) == kPrefillSeqs || s + 1 == seqs) {
        Run(prefill);
        prefill.clear();
      }
    }
  }
  ~Fixture() {
    swa_plan_destroy(plan);
    swa_cache_destroy(cache);
  }
  void Plan(const std::vector<swa_seq_t>& batch) {
    if (swa_plan_build(plan, batch.data(), uint32_t(batch.size())) != SWA_OK) {
      std::fprintf(stderr, "plan failed: %s\n", swa_last_error());
      std::exit(1);
    }
  }
  void Step() {
    if (swa_step(cache, plan, &args) != SWA_OK) {
      std::fprintf(stderr, "step failed: %s\n", swa_last_error());
      std::exit(1);
    }
  }
  void Run(const std::vector<swa_seq_t>& batch) {
    Plan(batch);
    Step();
  }
  // One timed contender: the decode step, re-planned untimed before each call
  // (a rewind of kTokens, within the ring margin). bf16: the queries go in as
  // BF16 (SWA_DTYPE_BF16), which lets the step take the AVX512-BF16 kernels on
  // an MXFP8 or BF16 ring.
  Contender DecodeStep(bool bf16) {
    return {[this] { Plan(decode); },
            [this, bf16] {
              args.q = bf16 ? static_cast<const void*>(q16.data()) : q.data();
              args.q_dtype = bf16 ? SWA_DTYPE_BF16 : SWA_DTYPE_FP32;
              Step();
            }};
  }
};

#if defined(SWA_BENCH_HAVE_OPENBLAS)
// The unfused pipeline an engine would otherwise run on the same ring rows:
// dequantise with our codec into tiles, then OpenBLAS sgemm, softmax, sgemm.
struct Baseline {
  Data x;
  std::vector<int64_t> offsets;  // byte offset of each sequence's ring rows, oldest first
  std::vector<float> out;
  BlasScratch scratch;
  const uint8_t* base;
  int64_t pitch, head_stride;
  swa::Format fmt;

  Baseline(const StepCase& c, const Fixture& f, int seqs)
      : x(MakeData({c.name, c.hq, c.hkv, c.d, kTokens, kWindow + kTokens - 1, kWindow, c.shared_kv},
                   seqs)),
        fmt(static_cast<swa::Format>(c.format)) {
    swa_tensor_view_t v;
    v.struct_size = sizeof v;
    swa_cache_layer_view(f.cache, 0, &v);
    base = static_cast<const uint8_t*>(v.data);
    pitch = v.strides[1];
    head_stride = v.strides[2];
    const int n_rows = x.c.keys;
    offsets.resize(size_t(seqs) * n_rows);
    for (int s = 0; s < seqs; ++s)
      for (int j = 0; j < n_rows; ++j)
        offsets[size_t(s) * n_rows + j] =
            s * v.strides[0] + ((kHistory + kTokens - n_rows + j) % v.shape[1]) * pitch;
    out.resize(x.out.size());
  }
  // K vectors (and V vectors after them in each token) of every row, one codec
  // call per run of rows contiguous in the ring; then the OpenBLAS pipeline.
  void Run() {
    const Case& c = x.c;
    const size_t stride = size_t(c.hkv) * c.d;
    for (size_t i = 0; i < offsets.size();) {
      size_t n = 1;
      while (i + n < offsets.size() && offsets[i + n] == offsets[i] + int64_t(n) * pitch) ++n;
      for (int g = 0; g < c.hkv; ++g) {
        const uint8_t* first = base + offsets[i] + int64_t(g) * head_stride;
        swa::codec::DecodeRows(fmt, c.d, n, {.base = first, .stride = size_t(pitch)},
                               {x.k.data() + i * stride + size_t(g) * c.d, swa::Dtype::kFp32, stride});
        if (!c.shared_kv)
          swa::codec::DecodeRows(
              fmt, c.d, n, {.base = first + int64_t(c.hkv) * head_stride, .stride = size_t(pitch)},
              {x.v.data() + i * stride + size_t(g) * c.d, swa::Dtype::kFp32, stride});
      }
      i += n;
    }
    OpenBlasPipeline(x, out.data(), scratch);
  }
};
#endif

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int only_case = -1, only_seqs = -1, only_threads = -1, repeat = 0;
  double budget_arg = 0;  // --budget S: seconds per contender (profiling)
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
    else if (arg == "--budget" && has_value) budget_arg = std::atof(argv[++a]);
    else {
      std::fprintf(stderr, "usage: %s [--quick] [--case N] [--seqs N] [--threads N] [--repeat N] [--only fp32|bf16] [--budget S]\n",
                   argv[0]);
      return 2;
    }
  }
  const double budget = budget_arg > 0 ? budget_arg : quick ? 0.2 : 1.0;
  const int reps = repeat > 0 ? repeat : quick ? 3 : 7;
  double peak = 0, peak2 = 0, peak512 = 0, peak_bf16 = 0, peak_amx = 0;
  bool have_bf16 = false;
#if defined(__x86_64__)
  if (only.empty() && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    peak2 = BestOf(FmaPeakAvx2, reps);
  if (only.empty() && __builtin_cpu_supports("avx512f")) peak512 = BestOf(FmaPeakAvx512, reps);
  have_bf16 = __builtin_cpu_supports("avx512bf16");
  if (only.empty() && have_bf16) peak_bf16 = BestOf(Bf16DotPeakAvx512, reps);
  if (only.empty() && swa::cpu::AmxKernelsAvailable()) peak_amx = BestOf(AmxBf16Peak, reps);
#endif
  // The BF16 path's own peak: %dpbf compares with it.
  const std::string bf16_path = swa::cpu::Bf16AttentionPathName();
  const double peak_bf16_path = bf16_path == "amx_bf16" ? peak_amx : peak_bf16;
  peak = std::max(peak2, peak512);
  const char* forced = std::getenv("SWACACHE_ATTENTION");
  std::printf("swa_step decode on the CPU backend: W %d, %d tokens per sequence, %d-token history\n",
              kWindow, kTokens, kHistory);
  std::printf("(a) measured 1-core FMA peak: AVX2 %.1f, AVX-512 %.1f GFLOP/s (%%peak uses the "
              "larger); vdpbf16ps peak %.1f GFLOP/s; tdpbf16ps (AMX-BF16) peak %.1f GFLOP/s\n",
              peak2, peak512, peak_bf16, peak_amx);
  std::printf("ours fp32: FP32 queries (SWACACHE_ATTENTION=%s: %s kernels); ours bf16: the same "
              "queries as BF16 (path chosen: %s)\n",
              forced != nullptr ? forced : "unset", swa::cpu::AttentionKernelName(),
              bf16_path.c_str());
#if defined(SWA_BENCH_HAVE_OPENBLAS)
  std::printf("(b) dequantise (our codec) + OpenBLAS %s (\"%s\") sgemm, softmax, sgemm\n",
              OPENBLAS_VERSION, openblas_get_corename());
#else
  std::printf("(b) OpenBLAS baseline: SKIPPED (not found at configure time)\n");
#endif
  std::printf("machine load (1/5/15 min): %s\n\n", LoadAverage().c_str());
  std::printf("%-32s %4s %3s | %7s %7s %7s %7s %7s %7s | %7s %7s %7s %7s %7s %7s %6s %6s | %6s %6s | %6s %7s %6s %6s\n",
              "case", "seqs", "thr", "fp32", "bf16", "base", "fp/base", "bf/base", "bf/fp",
              "fp32", "bf16", "base", "fp/base", "bf/base", "bf/fp", "%FMA", "%dpbf", "scal32",
              "scal16", "pkFMA", "pk16", "%FMAr", "%pk16r");
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
      // Every contender of this case and sequence count (ours fp32, ours bf16
      // and the baseline, on 1 and on 2 threads) interleaved call by call (see
      // TimeInterleaved), each for about `budget` seconds in all: every ratio
      // printed compares calls made in the same seconds. All but the baseline
      // on 2 threads, timed afterwards on its own: OpenBLAS's idle workers spin
      // for a while after each multithreaded call and would steal the CPU from
      // whichever contender came next.
      std::vector<unsigned> thread_counts;
      for (unsigned threads : {1u, 2u})
        if (only_threads <= 0 || int(threads) == only_threads) thread_counts.push_back(threads);
      // Per thread count: ours fp32, ours bf16, baseline; best_s 0 = not run.
      std::vector<std::array<Timing, 3>> times(thread_counts.size(), std::array<Timing, 3>{});
      std::vector<std::unique_ptr<Fixture>> fixtures;
      std::vector<Contender> cs, alone;
      std::vector<Timing*> cs_to, alone_to;
#if defined(SWA_BENCH_HAVE_OPENBLAS)
      std::vector<std::unique_ptr<Baseline>> baselines;
#endif
      for (size_t i = 0; i < thread_counts.size(); ++i) {
        const unsigned threads = thread_counts[i];
        fixtures.push_back(std::make_unique<Fixture>(c, seqs, threads));
        Fixture& f = *fixtures.back();
        if (only != "bf16") cs.push_back(f.DecodeStep(false)), cs_to.push_back(&times[i][0]);
        if (only != "fp32") cs.push_back(f.DecodeStep(true)), cs_to.push_back(&times[i][1]);
#if defined(SWA_BENCH_HAVE_OPENBLAS)
        if (only.empty()) {
          baselines.push_back(std::make_unique<Baseline>(c, f, seqs));
          Baseline* b = baselines.back().get();
          const Contender base{[threads] { openblas_set_num_threads(int(threads)); },
                               [b] { b->Run(); }};
          if (threads == 1) cs.push_back(base), cs_to.push_back(&times[i][2]);
          else alone.push_back({nullptr, [b] { b->Run(); }}), alone_to.push_back(&times[i][2]);
        }
#endif
      }
      // The FMA probe and the chosen BF16 path's probe (tdpbf16ps or
      // vdpbf16ps), about 1 ms a call, interleaved with the steps: on a shared
      // VM the probes' own rate moves by 2x with the load of the other vCPUs
      // (a register-only tdpbf16ps loop: 16 to 36 cycles per instruction, see
      // docs/perf/cpu-attention-2026-12-03-amx.md), so %FMAr and %pk16r set
      // each row against peaks measured in the same seconds.
      double run_fma = 0, run_pk16 = 0;
      Timing probe_timing;
#if defined(__x86_64__)
      if (only.empty() && peak512 > 0)
        cs.push_back({nullptr, [&run_fma] { run_fma = std::max(run_fma, FmaPeakAvx512(300'000)); }}),
            cs_to.push_back(&probe_timing);
      if (only.empty() && bf16_path == "amx_bf16" && peak_amx > 0)
        cs.push_back({nullptr, [&run_pk16] { run_pk16 = std::max(run_pk16, AmxBf16Peak(320'000)); }}),
            cs_to.push_back(&probe_timing);
      else if (only.empty() && peak_bf16 > 0)
        cs.push_back(
            {nullptr, [&run_pk16] { run_pk16 = std::max(run_pk16, Bf16DotPeakAvx512(150'000)); }}),
            cs_to.push_back(&probe_timing);
#endif
      const std::vector<Timing> together = TimeInterleaved(cs, budget * double(cs.size()), reps);
      for (size_t i = 0; i < cs.size(); ++i) *cs_to[i] = together[i];
      for (size_t i = 0; i < alone.size(); ++i) {
        openblas_set_num_threads(2);
        *alone_to[i] = TimeInterleaved({alone[i]}, budget, reps)[0];
      }

      const double flops = 4.0 * c.d * kWindow * c.hq * kTokens * seqs;
      double one_thread = 0, one_thread16 = 0;
      for (size_t i = 0; i < thread_counts.size(); ++i) {
        const unsigned threads = thread_counts[i];
        // Wall clock, and CPU time of the process: robust to preemption on a
        // shared machine. 0 where a contender did not run.
        auto gflops = [&](double s) { return s > 0 ? flops / s / 1e9 : 0.0; };
        const double gf = gflops(times[i][0].best_s), gf16 = gflops(times[i][1].best_s),
                     base_gf = gflops(times[i][2].best_s), gf_cpu = gflops(times[i][0].best_cpu_s),
                     gf16_cpu = gflops(times[i][1].best_cpu_s),
                     base_cpu = gflops(times[i][2].best_cpu_s);
        if (threads == 1) one_thread = gf, one_thread16 = gf16;
        auto ratio = [](double x, double y) {
          char buf[16] = "-";
          if (x > 0 && y > 0) std::snprintf(buf, sizeof buf, "%.2fx", x / y);
          return std::string(buf);
        };
        std::string scal32 = "-", scal16 = "-";
        if (threads == 2) scal32 = ratio(gf, one_thread), scal16 = ratio(gf16, one_thread16);
        char pct[16] = "-", pct16[16] = "-";
        if (peak > 0 && gf_cpu > 0) std::snprintf(pct, sizeof pct, "%.0f%%", 100 * gf_cpu / peak);
        if (peak_bf16_path > 0 && gf16_cpu > 0)
          std::snprintf(pct16, sizeof pct16, "%.0f%%", 100 * gf16_cpu / peak_bf16_path);
        char pctr[16] = "-", pct16r[16] = "-";
        if (run_fma > 0 && gf_cpu > 0) std::snprintf(pctr, sizeof pctr, "%.0f%%", 100 * gf_cpu / run_fma);
        if (run_pk16 > 0 && gf16_cpu > 0)
          std::snprintf(pct16r, sizeof pct16r, "%.0f%%", 100 * gf16_cpu / run_pk16);
        std::printf("%-32.32s %4d %3u | %7.1f %7.1f %7.1f %7s %7s %7s | %7.1f %7.1f %7.1f %7s %7s %7s %6s %6s | %6s %6s | %6.1f %7.1f %6s %6s\n",
                    c.name, seqs, threads, gf, gf16, base_gf, ratio(gf, base_gf).c_str(),
                    ratio(gf16, base_gf).c_str(), ratio(gf16, gf).c_str(), gf_cpu, gf16_cpu,
                    base_cpu, ratio(gf_cpu, base_cpu).c_str(), ratio(gf16_cpu, base_cpu).c_str(),
                    ratio(gf16_cpu, gf_cpu).c_str(), pct, pct16, scal32.c_str(), scal16.c_str(),
                    run_fma, run_pk16, pctr, pct16r);
      }
    }
  }
  std::printf("\nfp32: FP32 queries; bf16: the same queries as BF16; base: (b) on the same threads.\n"
              "All but the 2-thread base timed interleaved, call by call; that one alone, after.\n"
              "%%FMA: fp32 per CPU-second against the larger 1-core FMA peak of (a); %%dpbf: bf16\n"
              "against the peak of the chosen BF16 path (tdpbf16ps for amx_bf16, else vdpbf16ps). scal32, scal16: 2 threads vs 1, wall clock (only meaningful\n"
              "on an otherwise idle machine). pkFMA, pk16: the AVX-512 FMA probe and the chosen BF16\n"
              "path's probe, 1 core, timed interleaved with the row's steps (best call); %%FMAr, %%pk16r:\n"
              "fp32 and bf16 per CPU-second against them (per core on 2-thread rows).\n"
              "CPU-second figures ignore time the process was not\n"
              "running (robust to other load), not the caches it shares.\nmachine load (1/5/15 min): %s\n",
              LoadAverage().c_str());
  return 0;
}
