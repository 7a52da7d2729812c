// Pieces shared by the CPU attention benchmarks: timing, the measured FMA peak,
// the benchmark cases, the naive loop and the unfused OpenBLAS pipeline.
#pragma once

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

namespace swa_bench {


using swa::cpu::AttentionShape;
using swa::cpu::SeqProblem;
using swa::cpu::ThreadPool;
using Clock = std::chrono::steady_clock;

struct Timing {
  double best_s, median_s;  // wall clock
  double best_cpu_s;        // CPU time of the whole process (all threads)
};

inline double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

inline double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// One contender of TimeInterleaved: `prepare` (may be empty) runs untimed
// before each timed call of `run`.
struct Contender {
  std::function<void()> prepare, run;
};

// Times several contenders in rounds: every round calls each one once, in
// turn, after one untimed warm-up round; rounds go on until `budget_s` has
// passed and at least `min_rounds` ran. The speed of a shared VM drifts by
// 20 % and more over seconds; timed in separate windows, two contenders'
// best calls can fall in a fast and a slow stretch and their ratio then
// measures the machine. Interleaved, every contender's calls come from the
// same seconds, so their ratios compare the code.
inline std::vector<Timing> TimeInterleaved(const std::vector<Contender>& cs, double budget_s,
                                           int min_rounds) {
  std::vector<std::vector<double>> t(cs.size());
  std::vector<double> best_cpu(cs.size(), 1e30);
  for (const Contender& c : cs) {
    if (c.prepare) c.prepare();
    c.run();
  }
  const auto start = Clock::now();
  for (int round = 0;
       round < min_rounds || std::chrono::duration<double>(Clock::now() - start).count() < budget_s;
       ++round) {
    for (size_t i = 0; i < cs.size(); ++i) {
      if (cs[i].prepare) cs[i].prepare();
      const double c0 = CpuSeconds();
      const auto t0 = Clock::now();
      cs[i].run();
      t[i].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      best_cpu[i] = std::min(best_cpu[i], CpuSeconds() - c0);
    }
  }
  std::vector<Timing> out;
  for (size_t i = 0; i < cs.size(); ++i) {
    std::sort(t[i].begin(), t[i].end());
    out.push_back({t[i].front(), t[i][t[i].size() / 2], best_cpu[i]});
  }
  return out;
}

// Repeats fn until `budget_s` has passed (at least `min_reps` times), after
// one untimed warm-up call: TimeInterleaved with one contender.
inline Timing TimeIt(const std::function<void()>& fn, double budget_s, int min_reps) {
  return TimeInterleaved({{nullptr, fn}}, budget_s, min_reps)[0];
}

// ---- (a) FMA peak: 12 independent FMA chains hide the 4-cycle latency on two
// ports. Timed in thread CPU time: preemption by other work does not lower it.
#if defined(__x86_64__)
#define SWA_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
__attribute__((target("avx2,fma"))) inline double FmaPeakAvx2(long iters) {
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
__attribute__((target("avx512f"))) inline double FmaPeakAvx512(long iters) {
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
// vdpbf16ps peak: 12 independent chains, 32 BF16 products (64 FLOP) each.
__attribute__((target("avx512f,avx512bf16"))) inline double Bf16DotPeakAvx512(long iters) {
#define SWA_DECL6(i) __m512 a##i = _mm512_set1_ps(1.0f + (i) * 1e-3f);
  SWA_CHAINS(SWA_DECL6)
  const __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
  const __m512bh y = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-4f), _mm512_set1_ps(1e-4f));
  const double t0 = ThreadCpuSeconds();
  for (long it = 0; it < iters; ++it) {
#define SWA_DOT6(i) a##i = _mm512_dpbf16_ps(a##i, x, y);
    SWA_CHAINS(SWA_DOT6)
  }
  const double s = ThreadCpuSeconds() - t0;
  float sink = 0;
#define SWA_SUM6(i) sink += _mm512_reduce_add_ps(a##i);
  SWA_CHAINS(SWA_SUM6)
  if (sink == 12345.0f) std::puts("");
  return 12.0 * 32 * 2 * iters / s / 1e9;
}
// tdpbf16ps peak (AMX-BF16): 6 independent accumulator tiles of 16 x 16
// FP32 over one A (16 x 32 BF16) and one B tile, 16 * 16 * 32 products
// (16384 FLOP) per instruction. Needs the tile data the library asked Linux
// for (swa::cpu::AmxKernelsAvailable()); iters / 16 rounds of 6.
struct AmxTileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
__attribute__((target("amx-tile,amx-bf16"))) inline double AmxBf16Peak(long iters) {
  alignas(64) AmxTileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  alignas(64) static uint16_t a[16 * 32], b[16 * 32];
  alignas(64) static float c[16 * 16];
  for (int i = 0; i < 16 * 32; ++i) a[i] = b[i] = 0x3a83;  // 1e-3 in BF16
  _tile_loadconfig(&cfg);
  _tile_loadd(6, a, 64);
  _tile_loadd(7, b, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_zero(4);
  _tile_zero(5);
  const long rounds = iters / 16;
  const double t0 = ThreadCpuSeconds();
  for (long it = 0; it < rounds; ++it) {
    _tile_dpbf16ps(0, 6, 7);
    _tile_dpbf16ps(1, 6, 7);
    _tile_dpbf16ps(2, 6, 7);
    _tile_dpbf16ps(3, 6, 7);
    _tile_dpbf16ps(4, 6, 7);
    _tile_dpbf16ps(5, 6, 7);
  }
  const double s = ThreadCpuSeconds() - t0;
  _tile_stored(0, c, 64);
  _tile_release();
  if (c[0] == 12345.0f) std::puts("");
  return 6.0 * 16 * 16 * 32 * 2 * rounds / s / 1e9;
}
#endif

inline double BestOf(double (*fn)(long), int reps) {
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

inline Data MakeData(const Case& c, int seqs) {
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
inline void Naive(const Data& x, float* out) {
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
// ---- (b) Unfused OpenBLAS: per KV head, gather Q rows, sgemm for the scores,
// masked softmax with the sink, sgemm for the values, normalise.
struct BlasScratch {
  std::vector<float> qg, s, o, inv;
};

// One tile of keys and the tokens that read it: token t sees tile rows
// [begin[t], end[t]) (non-empty). K and V rows are kv_stride floats apart.
struct BlasTile {
  int tokens, keys, hq, hkv, d;
  float scale;
  const float* sinks;  // [hq] or nullptr
  const float* q;      // [tokens, hq, d]
  const float* k;      // [keys] rows, KV head g at + g * d
  const float* v;
  size_t kv_stride;
  const int32_t* begin;
  const int32_t* end;
  float* out;  // [tokens, hq, d]
};

inline void OpenBlasTile(const BlasTile& x, BlasScratch& w) {
  const int ratio = x.hq / x.hkv;
  const int m = x.tokens * ratio;
  w.qg.resize(static_cast<size_t>(m) * x.d);
  w.s.resize(static_cast<size_t>(m) * x.keys);
  w.o.resize(static_cast<size_t>(m) * x.d);
  w.inv.resize(m);
  for (int g = 0; g < x.hkv; ++g) {
    for (int t = 0; t < x.tokens; ++t) {
      std::memcpy(&w.qg[static_cast<size_t>(t) * ratio * x.d],
                  x.q + (static_cast<size_t>(t) * x.hq + g * ratio) * x.d,
                  sizeof(float) * ratio * x.d);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, x.keys, x.d, x.scale, w.qg.data(), x.d,
                x.k + g * x.d, static_cast<int>(x.kv_stride), 0.0f, w.s.data(), x.keys);
    for (int r = 0; r < m; ++r) {
      const int t = r / ratio, h = g * ratio + r % ratio;
      float* row = &w.s[static_cast<size_t>(r) * x.keys];
      const float sink = x.sinks != nullptr ? x.sinks[h] : -std::numeric_limits<float>::infinity();
      float mx = sink;
      for (int j = x.begin[t]; j < x.end[t]; ++j) mx = std::max(mx, row[j]);
      float l = x.sinks != nullptr ? std::exp(sink - mx) : 0.0f;
      for (int j = 0; j < x.keys; ++j) {
        row[j] = (j >= x.begin[t] && j < x.end[t]) ? std::exp(row[j] - mx) : 0.0f;
        l += row[j];
      }
      w.inv[r] = 1.0f / l;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, x.d, x.keys, 1.0f, w.s.data(), x.keys,
                x.v + g * x.d, static_cast<int>(x.kv_stride), 0.0f, w.o.data(), x.d);
    for (int r = 0; r < m; ++r) {
      const int t = r / ratio, h = g * ratio + r % ratio;
      float* dst = x.out + (static_cast<size_t>(t) * x.hq + h) * x.d;
      for (int e = 0; e < x.d; ++e) dst[e] = w.o[static_cast<size_t>(r) * x.d + e] * w.inv[r];
    }
  }
}

// The whole tile of every sequence of a Data (decode benchmarks).
inline void OpenBlasPipeline(const Data& x, float* out, BlasScratch& w) {
  const Case& c = x.c;
  for (int s = 0; s < x.seqs; ++s) {
    OpenBlasTile({c.tokens, c.keys, c.hq, c.hkv, c.d, x.scale, x.sinks.data(),
                  x.q.data() + s * x.QSize(), x.k.data() + s * x.KvSize(), x.V(s),
                  static_cast<size_t>(c.hkv) * c.d, x.begin.data(), x.end.data(),
                  out + s * x.QSize()},
                 w);
  }
}
#endif

inline std::string LoadAverage() {
  char buf[128] = {0};
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fgets(buf, sizeof buf, f) == nullptr) buf[0] = 0;
    std::fclose(f);
  }
  std::string s(buf);
  return s.substr(0, s.find(' ', s.find(' ', s.find(' ') + 1) + 1));
}

inline double RelErr(const std::vector<float>& a, const std::vector<float>& ref) {
  double e = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    e += (static_cast<double>(a[i]) - ref[i]) * (static_cast<double>(a[i]) - ref[i]);
    n += static_cast<double>(ref[i]) * ref[i];
  }
  return std::isnan(e) ? std::numeric_limits<double>::infinity() : std::sqrt(e / n);
}

}  // namespace swa_bench
