// Decode attention on the CPU: our fused core next to (a) the single-core FMA
// peak measured here, (b) an unfused OpenBLAS pipeline on the same data
// (sgemm scores, masked softmax, sgemm values), (c) a naive triple loop.
//
//   build-attn/bench/attention_cpu_bench [--quick] [--case N] [--seqs N] [--threads N]
//
// --case/--seqs/--threads run one row only (for a profiler).
//
// GFLOP/s counts 4 * D * visible_keys * Hq per token (both GEMMs, visible keys
// only). Times are the best of several repeats (other work on the machine
// only ever slows a repeat down); the median is printed too.
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>
#include <vector>

#include "cpu_bench_common.h"

using namespace swa_bench;  // NOLINT: a benchmark's main

int main(int argc, char** argv) {
  bool quick = false;
  int only_case = -1, only_seqs = -1, only_threads = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else if (i + 1 < argc && (arg == "--case" || arg == "--seqs" || arg == "--threads")) {
      (arg == "--case" ? only_case : arg == "--seqs" ? only_seqs : only_threads) = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--case N] [--seqs N] [--threads N]\n", argv[0]);
      return 2;
    }
  }
  const double budget = quick ? 0.2 : 1.0;
  const int min_reps = quick ? 3 : 7;

  std::printf("CPU attention core, decode steps. Kernels: %s\n",
              swa::cpu::AttentionKernelName());
  double peak = 0;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    peak = BestOf(FmaPeakAvx2, quick ? 3 : 7);
    std::printf("(a) measured 1-core FMA peak, AVX2 (8 lanes):     %7.1f GFLOP/s\n", peak);
  }
  if (__builtin_cpu_supports("avx512f")) {
    std::printf("    measured 1-core FMA peak, AVX-512 (16 lanes): %7.1f GFLOP/s (for reference;"
                " our kernels use AVX2)\n", BestOf(FmaPeakAvx512, quick ? 3 : 7));
  }
#endif
#if defined(SWA_BENCH_HAVE_OPENBLAS)
  std::printf("(b) OpenBLAS %s, core kernel \"%s\" (override with OPENBLAS_CORETYPE)\n",
              OPENBLAS_VERSION, openblas_get_corename());
#else
  std::printf("(b) OpenBLAS baseline: SKIPPED (libopenblas/cblas.h not found at configure time)\n");
#endif
  std::printf("(c) naive: scalar triple loop, 1 thread\n");
  std::printf("Machine load at start (1/5/15 min): %s\n\n", LoadAverage().c_str());

  const Case cases[] = {
      {"DeepSeek-V4-like: Hq 64, 1 shared KV, D 512", 64, 1, 512, 6, 133, 128, true},
      {"gpt-oss-like: Hq 64, 8 KV, D 64, 6 tokens", 64, 8, 64, 6, 133, 128, false},
      {"gpt-oss-like: Hq 64, 8 KV, D 64, 1 token", 64, 8, 64, 1, 128, 128, false},
  };
  std::printf("%-44s %4s %3s %9s %7s %9s %6s %9s %9s %9s %8s %8s %8s\n", "case", "seqs", "thr",
              "ours GF/s", "%peak", "GF/cpu-s", "%peak", "BLAS GF/s", "ours/BLAS", "naive GF/s",
              "ours/nv", "scaling", "rel.err");
  for (int ci = 0; ci < static_cast<int>(std::size(cases)); ++ci) {
    const Case& c = cases[ci];
    if (only_case >= 0 && ci != only_case) continue;
    for (int seqs : {16, 64}) {
      if (only_seqs > 0) seqs = only_seqs;
      Data x = MakeData(c, seqs);
      x.out_ref.assign(x.out.size(), 0.0f);
      const Timing naive = TimeIt([&] { Naive(x, x.out_ref.data()); }, quick ? 0.0 : 0.3, 1);
      double ours_1thr = 0;
      for (unsigned threads : {1u, 2u}) {
        if (only_threads > 0 && threads != static_cast<unsigned>(only_threads)) continue;
        ThreadPool pool(threads);
        const std::vector<SeqProblem>& pr = x.problems;
        const AttentionShape shape = x.Shape();
        // Ours and OpenBLAS on one thread interleaved call by call (see
        // TimeInterleaved), so that their ratio compares calls made in the same
        // seconds; on 2 threads one after the other, since OpenBLAS's idle
        // workers spin for a while after each call and would steal our CPU.
        std::vector<Contender> cs{
            {nullptr, [&] { swa::cpu::Attend(shape, pr.data(), static_cast<int>(pr.size()), &pool); }}};
        double blas_gf = 0;
#if defined(SWA_BENCH_HAVE_OPENBLAS)
        openblas_set_num_threads(static_cast<int>(threads));
        std::vector<float> blas_out(x.out.size());
        BlasScratch scratch;
        const Contender blas{nullptr, [&] { OpenBlasPipeline(x, blas_out.data(), scratch); }};
        if (threads == 1) cs.push_back(blas);
#endif
        std::vector<Timing> t = TimeInterleaved(cs, budget * double(cs.size()), min_reps);
#if defined(SWA_BENCH_HAVE_OPENBLAS)
        if (threads != 1) t.push_back(TimeInterleaved({blas}, budget, min_reps)[0]);
        blas_gf = x.flops / t[1].best_s / 1e9;
        if (RelErr(blas_out, x.out_ref) > 1e-4) std::printf("  (OpenBLAS pipeline disagrees!)\n");
#endif
        const Timing& ours = t[0];
        const double err = RelErr(x.out, x.out_ref);
        const double gf = x.flops / ours.best_s / 1e9;
        if (threads == 1) ours_1thr = gf;
        const double naive_gf = x.flops / naive.best_s / 1e9;
        char pct[16] = "-", vs_blas[16] = "-", blas_str[16] = "-", scaling[16] = "-";
        const double cpu_gf = x.flops / ours.best_cpu_s / 1e9;  // per core actually used
        if (peak > 0) std::snprintf(pct, sizeof pct, "%.0f%%", 100.0 * gf / peak / threads);
        char cpu_pct[16] = "-";
        if (peak > 0) std::snprintf(cpu_pct, sizeof cpu_pct, "%.0f%%", 100.0 * cpu_gf / peak);
        if (blas_gf > 0) {
          std::snprintf(blas_str, sizeof blas_str, "%.1f", blas_gf);
          std::snprintf(vs_blas, sizeof vs_blas, "%.2fx", gf / blas_gf);
        }
        if (threads == 2) std::snprintf(scaling, sizeof scaling, "%.2fx", gf / ours_1thr);
        std::printf("%-44s %4d %3u %9.1f %7s %9.1f %6s %9s %9s %9.2f %7.0fx %8s %8.1e\n", c.name,
                    seqs, threads, gf, pct, cpu_gf, cpu_pct, blas_str, vs_blas, naive_gf,
                    gf / naive_gf, scaling, err);
        if (!quick)
          std::printf("%-44s %4s %3s (median wall %.1f GF/s)\n", "", "", "", x.flops / ours.median_s / 1e9);
      }
      if (only_seqs > 0) break;
    }
  }
  std::printf(
      "\nGF/s: wall clock, best repeat. GF/cpu-s: flops per CPU-second of the process (all its\n"
      "threads), i.e. per core actually granted; it hides preemption by other work on the machine.\n"
      "%%peak: per thread against the 1-core AVX2 FMA peak (a). scaling: 2-thread / 1-thread wall\n"
      "GF/s. rel.err: ours vs the naive loop (both FP32). Machine load (1/5/15 min): %s\n",
      LoadAverage().c_str());
  return 0;
}
