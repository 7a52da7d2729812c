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
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <cstring>
#include <ctime>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(SWA_BENCH_HAVE_OPENBLAS)
#include <cblas.h>
#endif

#include "backend/cpu/attention.h"
#include "backend/cpu/thread_pool.h"

namespace {

using swa::cpu::AttentionShape;
using swa::cpu::SeqProblem;
using swa::cpu::ThreadPool;
using Clock = std::chrono::steady_clock;

struct Timing {
  double best_s, median_s;  // wall clock
  double best_cpu_s;        // CPU time of the whole process (all threads)
};

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// Repeats fn until `budget_s` has passed (at least `min_reps` times).
Timing TimeIt(const std::function<void()>& fn, double budget_s, int min_reps) {
  fn();  // warm caches and workspaces
  std::vector<double> t;
  double best_cpu = 1e30;
  const auto start = Clock::now();
  while (static_cast<int>(t.size()) < min_reps ||
         std::chrono::duration<double>(Clock::now() - start).count() < budget_s) {
    const double c0 = CpuSeconds();
    const auto t0 = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    best_cpu = std::min(best_cpu, CpuSeconds() - c0);
  }
  std::sort(t.begin(), t.end());
  return {t.front(), t[t.size() / 2], best_cpu};
}

// ---- (a) FMA peak: 12 independent FMA chains hide the 4-cycle latency on two
// ports. Timed in thread CPU time: preemption by other work does not lower it.
#if defined(__x86_64__)
#define SWA_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
__attribute__((target("avx2,fma"))) double FmaPeakAvx2(long iters) {
#define SWA_DECL(i) __m256 a##i = _mm256_set1_ps(1.0f + (i) * 1e-3f);
  SWA_CHAINS(SWA_DECL)
  const __m256 x = _mm256_set1_ps(0.9999999f), y = _mm256_set1_ps(1e-7f);
  const double t0 = ThreadCpuSeconds();
  for (long it = 0; it < iters; ++it) {
#define SWA_FMA(i) a##i = _mm256_fmadd_ps(a##i, x, y);
    SWA_CHAINS(SWA_FMA)
  }
  const double s = ThreadCpuSeconds() - t0;
  float sink = 0;
#define SWA_SUM(i) sink += _mm256_cvtss_f32(a##i);
  SWA_CHAINS(SWA_SUM)
  if (sink == 12345.0f) std::puts("");
  return 12.0 * 8 * 2 * iters / s / 1e9;
}
__attribute__((target("avx512f"))) double FmaPeakAvx512(long iters) {
#define SWA_DECL5(i) __m512 a##i = _mm512_set1_ps(1.0f + (i) * 1e-3f);
  SWA_CHAINS(SWA_DECL5)
  const __m512 x = _mm512_set1_ps(0.9999999f), y = _mm512_set1_ps(1e-7f);
  const double t0 = ThreadCpuSeconds();
  for (long it = 0; it < iters; ++it) {
#define SWA_FMA5(i) a##i = _mm512_fmadd_ps(a##i, x, y);
    SWA_CHAINS(SWA_FMA5)
  }
  const double s = ThreadCpuSeconds() - t0;
  float sink = 0;
#define SWA_SUM5(i) sink += _mm512_reduce_add_ps(a##i);
  SWA_CHAINS(SWA_SUM5)
  if (sink == 12345.0f) std::puts("");
  return 12.0 * 16 * 2 * iters / s / 1e9;
}
#endif

double BestOf(double (*fn)(long), int reps) {
  double best = 0;
  for (int r = 0; r < reps; ++r) best = std::max(best, fn(20'000'000));
  return best;
}

// ---- The data of one benchmark case.
struct Case {
  const char* name;
  int hq, hkv, d;
  int tokens, keys, window;
  bool shared_kv;
};

struct Data {
  Case c;
  int seqs;
  float scale;
  std::vector<float> sinks, q, k, v, out, out_ref;
  std::vector<int32_t> begin, end;
  std::vector<SeqProblem> problems;
  double flops = 0;

  size_t QSize() const { return static_cast<size_t>(c.tokens) * c.hq * c.d; }
  size_t KvSize() const { return static_cast<size_t>(c.keys) * c.hkv * c.d; }
  const float* V(int s) const { return (c.shared_kv ? k.data() : v.data()) + s * KvSize(); }
  AttentionShape Shape() const { return {c.hq, c.hkv, c.d, scale, sinks.data()}; }
};

Data MakeData(const Case& c, int seqs) {
  Data x;
  x.c = c;
  x.seqs = seqs;
  x.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto fill = [&](std::vector<float>& a, size_t n) {
    a.resize(n);
    for (float& f : a) f = u(rng);
  };
  fill(x.sinks, c.hq);
  fill(x.q, x.QSize() * seqs);
  fill(x.k, x.KvSize() * seqs);
  if (!c.shared_kv) fill(x.v, x.KvSize() * seqs);
  x.out.assign(x.QSize() * seqs, 0.0f);
  // Tokens at positions p..p+T-1 of a long sequence; the tile holds the last
  // keys = W + T - 1 positions, token t sees the W ending at itself.
  for (int t = 0; t < c.tokens; ++t) {
    x.end.push_back(c.keys - (c.tokens - 1 - t));
    x.begin.push_back(std::max(0, x.end.back() - c.window));
    x.flops += 4.0 * c.d * (x.end.back() - x.begin.back()) * c.hq * seqs;
  }
  for (int s = 0; s < seqs; ++s) {
    x.problems.push_back({c.tokens, x.q.data() + s * x.QSize(), c.keys, x.k.data() + s * x.KvSize(),
                          x.V(s), x.begin.data(), x.end.data(), x.out.data() + s * x.QSize()});
  }
  return x;
}

// ---- (c) The naive reference: per token and head, scores, softmax, values.
void Naive(const Data& x, float* out) {
  const Case& c = x.c;
  const int ratio = c.hq / c.hkv;
  std::vector<float> p(c.keys);
  for (int s = 0; s < x.seqs; ++s) {
    for (int t = 0; t < c.tokens; ++t) {
      for (int h = 0; h < c.hq; ++h) {
        const int g = h / ratio;
        const float* q = x.q.data() + s * x.QSize() + (static_cast<size_t>(t) * c.hq + h) * c.d;
        float m = x.sinks[h];
        for (int j = x.begin[t]; j < x.end[t]; ++j) {
          const float* kj = x.k.data() + s * x.KvSize() + (static_cast<size_t>(j) * c.hkv + g) * c.d;
          float dot = 0;
          for (int e = 0; e < c.d; ++e) dot += q[e] * kj[e];
          p[j] = x.scale * dot;
          m = std::max(m, p[j]);
        }
        float l = std::exp(x.sinks[h] - m);
        for (int j = x.begin[t]; j < x.end[t]; ++j) l += (p[j] = std::exp(p[j] - m));
        float* o = out + s * x.QSize() + (static_cast<size_t>(t) * c.hq + h) * c.d;
        for (int e = 0; e < c.d; ++e) o[e] = 0;
        for (int j = x.begin[t]; j < x.end[t]; ++j) {
          const float* vj = x.V(s) + (static_cast<size_t>(j) * c.hkv + g) * c.d;
          for (int e = 0; e < c.d; ++e) o[e] += p[j] * vj[e];
        }
        for (int e = 0; e < c.d; ++e) o[e] /= l;
      }
    }
  }
}

#if defined(SWA_BENCH_HAVE_OPENBLAS)
// ---- (b) Unfused OpenBLAS: per sequence and KV head, gather Q rows, sgemm for
// the scores, masked softmax with the sink, sgemm for the values, normalise.
struct BlasScratch {
  std::vector<float> qg, s, o;
};

void OpenBlasPipeline(const Data& x, float* out, BlasScratch& w) {
  const Case& c = x.c;
  const int ratio = c.hq / c.hkv;
  const int m = c.tokens * ratio;
  const int ldkv = c.hkv * c.d;
  w.qg.resize(static_cast<size_t>(m) * c.d);
  w.s.resize(static_cast<size_t>(m) * c.keys);
  w.o.resize(static_cast<size_t>(m) * c.d);
  for (int s = 0; s < x.seqs; ++s) {
    for (int g = 0; g < c.hkv; ++g) {
      for (int t = 0; t < c.tokens; ++t) {
        std::memcpy(&w.qg[static_cast<size_t>(t) * ratio * c.d],
                    x.q.data() + s * x.QSize() + (static_cast<size_t>(t) * c.hq + g * ratio) * c.d,
                    sizeof(float) * ratio * c.d);
      }
      const float* kg = x.k.data() + s * x.KvSize() + g * c.d;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, c.keys, c.d, x.scale, w.qg.data(),
                  c.d, kg, ldkv, 0.0f, w.s.data(), c.keys);
      std::vector<float> inv(m);
      for (int r = 0; r < m; ++r) {
        const int t = r / ratio, h = g * ratio + r % ratio;
        float* row = &w.s[static_cast<size_t>(r) * c.keys];
        float mx = x.sinks[h];
        for (int j = x.begin[t]; j < x.end[t]; ++j) mx = std::max(mx, row[j]);
        float l = std::exp(x.sinks[h] - mx);
        for (int j = 0; j < c.keys; ++j) {
          row[j] = (j >= x.begin[t] && j < x.end[t]) ? std::exp(row[j] - mx) : 0.0f;
          l += row[j];
        }
        inv[r] = 1.0f / l;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, c.d, c.keys, 1.0f, w.s.data(),
                  c.keys, x.V(s) + g * c.d, ldkv, 0.0f, w.o.data(), c.d);
      for (int r = 0; r < m; ++r) {
        const int t = r / ratio, h = g * ratio + r % ratio;
        float* dst = out + s * x.QSize() + (static_cast<size_t>(t) * c.hq + h) * c.d;
        for (int e = 0; e < c.d; ++e) dst[e] = w.o[static_cast<size_t>(r) * c.d + e] * inv[r];
      }
    }
  }
}
#endif

std::string LoadAverage() {
  char buf[128] = {0};
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fgets(buf, sizeof buf, f) == nullptr) buf[0] = 0;
    std::fclose(f);
  }
  std::string s(buf);
  return s.substr(0, s.find(' ', s.find(' ', s.find(' ') + 1) + 1));
}

double RelErr(const std::vector<float>& a, const std::vector<float>& ref) {
  double e = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    e += (static_cast<double>(a[i]) - ref[i]) * (static_cast<double>(a[i]) - ref[i]);
    n += static_cast<double>(ref[i]) * ref[i];
  }
  return std::isnan(e) ? std::numeric_limits<double>::infinity() : std::sqrt(e / n);
}

}  // namespace

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
              swa::cpu::Avx2KernelsAvailable() ? "avx2_fma" : "portable");
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
        const Timing ours = TimeIt(
            [&] { swa::cpu::Attend(shape, pr.data(), static_cast<int>(pr.size()), &pool); },
            budget, min_reps);
        const double err = RelErr(x.out, x.out_ref);
        const double gf = x.flops / ours.best_s / 1e9;
        if (threads == 1) ours_1thr = gf;
        double blas_gf = 0;
#if defined(SWA_BENCH_HAVE_OPENBLAS)
        openblas_set_num_threads(static_cast<int>(threads));
        std::vector<float> blas_out(x.out.size());
        BlasScratch scratch;
        const Timing blas =
            TimeIt([&] { OpenBlasPipeline(x, blas_out.data(), scratch); }, budget, min_reps);
        blas_gf = x.flops / blas.best_s / 1e9;
        if (RelErr(blas_out, x.out_ref) > 1e-4) std::printf("  (OpenBLAS pipeline disagrees!)\n");
#endif
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
