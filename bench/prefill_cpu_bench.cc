// Chunked prefill on the CPU backend: one swa_step of T new tokens of a
// sequence that already holds a history, W 128, every token sees W keys (the
// band's work is O(T * W)). Next to, measured in the same run:
//   (a) dequantise + OpenBLAS on the band's blocks only: encode the chunk's
//       K/V in the ring format and decode it with the W - 1 history ring rows
//       (our codec), then per block of g_block query tokens sgemm against its
//       g_block + W - 1 keys, masked softmax, sgemm; blocks spread over the
//       same threads (a ThreadPool, OpenBLAS itself on one thread per call);
//   (b) PyTorch scaled_dot_product_attention with a band mask, on the band's
//       blocks (one batched call), and "full": one call over the whole chunk
//       (T x (W - 1 + T) mask, O(T^2)) for chunks up to 2048 tokens;
//   (c) PyTorch flex_attention with a sliding-window BlockMask, compiled.
// (b) and (c) run in a child python (bench/prefill_torch_baseline.py, the
// torch venv of examples/python_engine/venv.sh) that gets the dequantised KV
// for free and answers one call per request, so that every contender of a row
// is timed interleaved call by call (TimeInterleaved).
//
//   OPENBLAS_CORETYPE=SkylakeX build/bench/prefill_cpu_bench [--quick]
//       [--case N] [--chunk T] [--threads N] [--repeat N] [--no-torch] [--python PATH]
//       [--block N] [--bf16]
//
// Cases: 0 DeepSeek-V4-like (Hq 64, one shared 512-wide MXFP8 KV vector),
// 1 gpt-oss-like (Hq 64, 8 KV heads of 64, separate K and V, BF16 ring).
// Sinks off (flex_attention's CPU path returns no LSE, and a sink key column
// would cost it a whole KV block per query block). FP32 queries (the FP32
// kernels), or with --bf16 the same queries rounded to BF16 for every
// contender (the BF16 path: amx_bf16 on an AMX CPU), scale 1/sqrt(D). GFLOP counts the band: 4 * D * W * Hq per token.
// Before timing, every contender's output is compared with (a)'s (max abs
// error); a row whose contenders disagree is not timed and the bench fails.
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "cpu_bench_common.h"
#include "swacache.h"

using namespace swa_bench;  // NOLINT: a benchmark's main

namespace {

struct PrefillCase {
  const char* name;
  swa_format_t format;
  int hq, hkv, d;
  bool shared_kv;
};

constexpr int kWindow = 128, kHistory = 512;
// Query tokens per band block of (a) and (b) (--block).
int g_block = 16;
// --bf16: the queries as BF16 (q_dtype BF16; every contender gets the same,
// BF16-exact, values): the BF16 path (amx_bf16 where the CPU has AMX). Its P
// is rounded to BF16 (error < 2^-8 max|v|, |v| <= 1 here), hence the wider
// tolerance.
bool g_bf16 = false;
double Tolerance() { return g_bf16 ? 6e-3 : 1e-3; }  // max abs error against (a)

// Nearest-even BF16 bits of a finite float.
uint16_t Bf16Bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "%s: %s\n", what, swa_last_error());
  std::exit(1);
}

// The chunk's inputs, shared by every contender of a case and chunk.
struct Chunk {
  int tokens;
  std::vector<float> q, k, v;  // v empty with shared K/V
  std::vector<uint16_t> q16;   // --bf16: q as BF16 (q holds the same values)
  Chunk(const PrefillCase& c, int t) : tokens(t) {
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-1, 1);
    q.resize(size_t(t) * c.hq * c.d);
    k.resize(size_t(t) * c.hkv * c.d);
    if (!c.shared_kv) v.resize(k.size());
    for (auto* a : {&q, &k, &v})
      for (float& x : *a) x = u(rng);
    if (g_bf16) {
      q16.resize(q.size());
      for (size_t i = 0; i < q.size(); ++i) {
        q16[i] = Bf16Bits(q[i]);
        const uint32_t u32 = uint32_t(q16[i]) << 16;
        std::memcpy(&q[i], &u32, sizeof u32);
      }
    }
  }
};

// One cache (one slot) prefilled with kHistory tokens; each timed call is the
// next chunk of the same sequence (positions only grow: no rewind).
struct Fixture {
  swa_cache_t* cache = nullptr;
  swa_plan_t* plan = nullptr;
  uint32_t slot = 0;
  int32_t pos = kHistory;
  int tokens;
  swa_step_args_t args;

  Fixture(const PrefillCase& c, const Chunk& ch, float* out, unsigned threads) : tokens(ch.tokens) {
    swa_layer_desc_t l;
    swa_layer_desc_init(&l);
    l.kv_format = c.format;
    l.q_heads = c.hq;
    l.kv_heads = c.hkv;
    l.head_dim = c.d;
    l.shared_kv = c.shared_kv;
    swa_config_t cfg;
    swa_config_init(&cfg);
    cfg.window = kWindow;
    cfg.max_slots = 1;
    cfg.backend = SWA_BACKEND_CPU;
    cfg.num_threads = threads;
    cfg.num_layers = 1;
    cfg.layers = &l;
    if (swa_cache_create(&cfg, &cache) != SWA_OK || swa_plan_create(cache, &plan) != SWA_OK)
      Die("setup failed");
    if (swa_slot_alloc(cache, &slot) != SWA_OK) Die("slot");
    swa_step_args_init(&args);
    args.q = g_bf16 ? static_cast<const void*>(ch.q16.data()) : ch.q.data();
    args.q_dtype = g_bf16 ? SWA_DTYPE_BF16 : SWA_DTYPE_FP32;
    args.k_new = ch.k.data();
    args.v_new = c.shared_kv ? nullptr : ch.v.data();
    args.out = out;
    // The history: the chunk's first kHistory tokens.
    const swa_seq_t s{slot, kHistory, kHistory, 0};
    if (swa_plan_build(plan, &s, 1) != SWA_OK || swa_step(cache, plan, &args) != SWA_OK)
      Die("history prefill failed");
  }
  ~Fixture() {
    swa_plan_destroy(plan);
    swa_cache_destroy(cache);
  }
  Contender NextChunk() {
    return {[this] {
              const swa_seq_t s{slot, tokens, pos + tokens, 0};
              if (swa_plan_build(plan, &s, 1) != SWA_OK) Die("plan failed");
              pos += tokens;
            },
            [this] {
              if (swa_step(cache, plan, &args) != SWA_OK) Die("step failed");
            }};
  }
};

#if defined(SWA_BENCH_HAVE_OPENBLAS)
// (a): the W - 1 history rows as the ring holds them (copied before the first
// timed step), the chunk's K/V encoded and decoded by our codec, then the
// band's blocks through OpenBLAS.
struct BandBlas {
  PrefillCase c;
  const Chunk& ch;
  swa::Format fmt;
  int64_t pitch, head_stride;
  std::vector<uint8_t> hist, enc;  // ring rows, pitch bytes each
  std::vector<float> k, v;         // [W - 1 + T, Hkv, D] dequantised
  std::vector<int32_t> begin, end;
  std::vector<float> out;

  BandBlas(const PrefillCase& pc, const Chunk& chunk, const Fixture& f)
      : c(pc), ch(chunk), fmt(static_cast<swa::Format>(pc.format)) {
    swa_tensor_view_t view;
    view.struct_size = sizeof view;
    if (swa_cache_layer_view(f.cache, 0, &view) != SWA_OK) Die("layer view");
    pitch = view.strides[1];
    head_stride = view.strides[2];
    const auto* base = static_cast<const uint8_t*>(view.data) + f.slot * view.strides[0];
    for (int p = f.pos - kWindow + 1; p < f.pos; ++p) {
      const uint8_t* row = base + (p % view.shape[1]) * pitch;
      hist.insert(hist.end(), row, row + pitch);
    }
    enc.resize(size_t(ch.tokens) * pitch);
    const size_t rows = size_t(kWindow - 1 + ch.tokens) * c.hkv * c.d;
    k.resize(rows);
    if (!c.shared_kv) v.resize(rows);
    for (int t = 0; t < g_block; ++t) begin.push_back(t), end.push_back(t + kWindow);
    out.resize(ch.q.size());
  }

  // Row r of the tile: a history ring row (r < W - 1) or chunk token r - W + 1
  // (encoded first, as the step stores it).
  void DecodeRow(int r) {
    const size_t stride = size_t(c.hkv) * c.d;
    const uint8_t* row;
    if (r < kWindow - 1) {
      row = hist.data() + size_t(r) * pitch;
    } else {
      const size_t t = size_t(r - (kWindow - 1));
      uint8_t* dst = enc.data() + t * pitch;
      swa::codec::EncodeRows(fmt, swa::ScaleMode::kCeil, c.d, c.hkv,
                             {ch.k.data() + t * stride, swa::Dtype::kFp32, size_t(c.d)},
                             {.base = dst, .stride = size_t(head_stride)});
      if (!c.shared_kv)
        swa::codec::EncodeRows(fmt, swa::ScaleMode::kCeil, c.d, c.hkv,
                               {ch.v.data() + t * stride, swa::Dtype::kFp32, size_t(c.d)},
                               {.base = dst + c.hkv * head_stride, .stride = size_t(head_stride)});
      row = dst;
    }
    swa::codec::DecodeRows(fmt, c.d, c.hkv, {.base = row, .stride = size_t(head_stride)},
                           {k.data() + size_t(r) * stride, swa::Dtype::kFp32, size_t(c.d)});
    if (!c.shared_kv)
      swa::codec::DecodeRows(fmt, c.d, c.hkv,
                             {.base = row + c.hkv * head_stride, .stride = size_t(head_stride)},
                             {v.data() + size_t(r) * stride, swa::Dtype::kFp32, size_t(c.d)});
  }

  void Run(ThreadPool& pool) {
    pool.ParallelFor(size_t(kWindow - 1 + ch.tokens), 64, [this](size_t b, size_t e) {
      for (size_t r = b; r < e; ++r) DecodeRow(int(r));
    });
    const size_t kv_stride = size_t(c.hkv) * c.d, q_stride = size_t(c.hq) * c.d;
    const float* vv = c.shared_kv ? k.data() : v.data();
    pool.ParallelFor(size_t(ch.tokens / g_block), [&](size_t b, size_t e) {
      thread_local BlasScratch scratch;
      for (size_t i = b; i < e; ++i) {
        const size_t t0 = i * g_block;
        OpenBlasTile({g_block, g_block + kWindow - 1, c.hq, c.hkv, c.d,
                      1.0f / std::sqrt(float(c.d)), nullptr, ch.q.data() + t0 * q_stride,
                      k.data() + t0 * kv_stride, vv + t0 * kv_stride, kv_stride, begin.data(),
                      end.data(), out.data() + t0 * q_stride},
                     scratch);
      }
    });
  }
};
#endif

// The python child that runs (b) and (c): one request line, one answer line.
class TorchChild {
 public:
  bool Start(const std::string& python, const std::string& script) {
    int to[2], from[2];
    if (pipe(to) != 0 || pipe(from) != 0) return false;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(to[0], 0);
      dup2(from[1], 1);
      close(to[1]);
      close(from[0]);
      execl(python.c_str(), python.c_str(), script.c_str(), static_cast<char*>(nullptr));
      std::printf("err cannot run %s\n", python.c_str());
      std::fflush(stdout);
      _exit(127);
    }
    close(to[0]);
    close(from[1]);
    out_ = fdopen(to[1], "w");
    in_ = fdopen(from[0], "r");
    hello_ = Read();
    return hello_.rfind("hello", 0) == 0;
  }
  ~TorchChild() {
    if (pid_ <= 0) return;
    Ask("quit", false);
    std::fclose(out_);
    std::fclose(in_);
    waitpid(pid_, nullptr, 0);
  }
  const std::string& hello() const { return hello_; }
  std::string Ask(const std::string& line, bool answer = true) {
    std::fprintf(out_, "%s\n", line.c_str());
    std::fflush(out_);
    return answer ? Read() : "";
  }

 private:
  std::string Read() {
    char buf[1024];
    if (std::fgets(buf, sizeof buf, in_) == nullptr) return "err the python child exited";
    std::string s(buf);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  }
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
  FILE* in_ = nullptr;
  std::string hello_;
};

std::string ShmPath(const char* what) {
  const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  return std::string(dir) + "/swa_prefill_" + std::to_string(getpid()) + "_" + what + ".f32";
}

void WriteFloats(const std::string& path, const float* p, size_t n) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(p, sizeof(float), n, f) != n) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
  std::fclose(f);
}

bool ReadFloats(const std::string& path, std::vector<float>& dst) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  const size_t n = std::fread(dst.data(), sizeof(float), dst.size(), f);
  std::fclose(f);
  std::remove(path.c_str());
  return n == dst.size();
}

double MaxAbsErr(const std::vector<float>& a, const std::vector<float>& ref) {
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(double(a[i]) - ref[i]);
    if (!(d <= e)) e = std::isnan(d) ? std::numeric_limits<double>::infinity() : d;
  }
  return e;
}

const char* const kTorchNames[] = {"sdpa", "sdpa_full", "flex"};

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, use_torch = true;
  int only_case = -1, only_chunk = -1, only_threads = -1, repeat = 0;
  std::string python;
  if (const char* p = std::getenv("SWA_TORCH_PYTHON")) python = p;
  if (python.empty() && std::getenv("HOME") != nullptr)
    python = std::string(std::getenv("HOME")) +
             "/.cache/swacache-torch-venv-torch2.15.0-transformers5.24.0/bin/python";
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    const bool v = a + 1 < argc;
    if (arg == "--quick") quick = true;
    else if (arg == "--no-torch") use_torch = false;
    else if (arg == "--case" && v) only_case = std::atoi(argv[++a]);
    else if (arg == "--chunk" && v) only_chunk = std::atoi(argv[++a]);
    else if (arg == "--threads" && v) only_threads = std::atoi(argv[++a]);
    else if (arg == "--repeat" && v) repeat = std::atoi(argv[++a]);
    else if (arg == "--python" && v) python = argv[++a];
    else if (arg == "--block" && v) g_block = std::atoi(argv[++a]);
    else if (arg == "--bf16") g_bf16 = true;
    else {
      std::fprintf(stderr,
                   "usage: %s [--quick] [--case N] [--chunk T] [--threads N] [--repeat N] "
                   "[--no-torch] [--python PATH] [--block N] [--bf16]\n",
                   argv[0]);
      return 2;
    }
  }
  std::signal(SIGPIPE, SIG_IGN);  // a dead python child must not kill the bench
  if (g_block < 1 || g_block > 4096) {
    std::fprintf(stderr, "--block %d: want 1 ... 4096\n", g_block);
    return 2;
  }
  const double budget = quick ? 0.2 : 1.0;
  const int reps = repeat > 0 ? repeat : quick ? 2 : 3;

  double peak2 = 0, peak512 = 0;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    peak2 = BestOf(FmaPeakAvx2, reps);
  if (__builtin_cpu_supports("avx512f")) peak512 = BestOf(FmaPeakAvx512, reps);
#endif
  double peak = std::max(peak2, peak512);
  // --bf16: %pk against the BF16 path's own peak (tdpbf16ps or vdpbf16ps),
  // or the FMA peak where BF16 queries are widened to FP32.
  const std::string bf16_path = swa::cpu::Bf16AttentionPathName();
  double peak16 = 0;
#if defined(__x86_64__)
  if (g_bf16 && bf16_path == "amx_bf16") peak16 = BestOf(AmxBf16Peak, reps);
  else if (g_bf16 && bf16_path == "avx512_bf16") peak16 = BestOf(Bf16DotPeakAvx512, reps);
#endif
  if (peak16 > 0) peak = peak16;
  std::printf("Chunked prefill, swa_step on the CPU backend: W %d, %d-token history, %s "
              "queries, no sinks; kernels %s\n",
              kWindow, kHistory, g_bf16 ? "BF16" : "FP32",
              g_bf16 ? bf16_path.c_str() : swa::cpu::AttentionKernelName());
  std::printf("peak: measured 1-core FMA peak AVX2 %.1f, AVX-512 %.1f GFLOP/s; BF16 path peak "
              "%.1f (%%pk uses %s, per thread)\n",
              peak2, peak512, peak16, peak16 > 0 ? "the BF16 path's" : "the larger FMA one");
#if defined(SWA_BENCH_HAVE_OPENBLAS)
  openblas_set_num_threads(1);
  std::printf("(a) dequantise (our codec) + OpenBLAS %s (\"%s\"), band blocks of %d queries x "
              "%d keys, blocks over the threads\n",
              OPENBLAS_VERSION, openblas_get_corename(), g_block, g_block + kWindow - 1);
#else
  std::printf("(a) OpenBLAS baseline: SKIPPED (not found at configure time)\n");
#endif
  TorchChild torch;
  std::string torch_why;
  if (use_torch) {
    const std::string script = std::string(SWA_BENCH_SOURCE_DIR) + "/prefill_torch_baseline.py";
    if (access(python.c_str(), X_OK) != 0) torch_why = "no python at " + python;
    else if (!torch.Start(python, script)) torch_why = "python child: " + torch.hello();
  } else {
    torch_why = "--no-torch";
  }
  if (torch_why.empty())
    std::printf("(b) sdpa: PyTorch SDPA, band mask, the same band blocks (one batched call); "
                "full: one call over the whole chunk\n(c) flex: torch.compile(flex_attention), "
                "sliding-window BlockMask; %s\n",
                torch.hello().c_str());
  else
    std::printf("(b), (c) PyTorch: SKIPPED (%s)\n", torch_why.c_str());
  std::printf("machine load (1/5/15 min): %s\n\n", LoadAverage().c_str());
  std::printf("%-28s %5s %3s | %7s %7s %7s %7s %7s | %7s %8s | %5s %5s | %7s %6s\n", "case", "T",
              "thr", "ours", "(a)blas", "(b)sdpa", "full", "(c)flex", "best", "ours/bst",
              "%pk", "%pkc", "us/tok", "vs512");
  std::printf("%-28s %5s %3s | %-39s | %-16s | %-11s |\n", "", "", "",
              "GFLOP/s of the band, wall clock, best call", "best of (a)-(c)", "ours: %peak");

  const PrefillCase cases[] = {
      {"DeepSeek-V4-like MXFP8 1xD512", SWA_FORMAT_MXFP8, 64, 1, 512, true},
      {"gpt-oss-like BF16 8xD64 K+V", SWA_FORMAT_BF16, 64, 8, 64, false},
  };
  int failures = 0;
  std::vector<std::string> notes;
  for (int ci = 0; ci < int(std::size(cases)); ++ci) {
    const PrefillCase& c = cases[ci];
    if (only_case >= 0 && ci != only_case) continue;
    std::map<unsigned, double> us_512;  // ours, per thread count
    std::vector<int> chunks = quick ? std::vector<int>{512} : std::vector<int>{512, 2048, 8192};
    if (only_chunk > 0) chunks = {only_chunk};
    for (int T : chunks) {
      if (T < kHistory || T % g_block != 0) {
        std::fprintf(stderr, "--chunk %d: want a multiple of the block %d, >= %d\n", T, g_block,
                     kHistory);
        return 2;
      }
      const double flops = 4.0 * c.d * kWindow * c.hq * T;
      Chunk ch(c, T);
      std::vector<float> out(ch.q.size()), check(ch.q.size());
      std::vector<unsigned> threads;
      for (unsigned n : {1u, 2u})
        if (only_threads <= 0 || int(n) == only_threads) threads.push_back(n);
      std::vector<std::unique_ptr<Fixture>> fixtures;
      std::vector<std::unique_ptr<ThreadPool>> pools;
      for (unsigned n : threads) {
        fixtures.push_back(std::make_unique<Fixture>(c, ch, out.data(), n));
        pools.push_back(std::make_unique<ThreadPool>(n));
      }
      // ---- Correctness first: everyone against (a) on the first chunk.
      std::vector<float>* ref = nullptr;
      std::string errs;
      char buf[160];
#if defined(SWA_BENCH_HAVE_OPENBLAS)
      BandBlas blas(c, ch, *fixtures[0]);
      blas.Run(*pools[0]);
      ref = &blas.out;
#endif
      std::vector<float> first_out;  // without OpenBLAS: the 2-thread step against the 1-thread one
      bool ok = true;
      for (size_t i = 0; i < fixtures.size(); ++i) {
        Contender first = fixtures[i]->NextChunk();
        first.prepare();
        first.run();
        if (ref == nullptr) {
          first_out = out;
          ref = &first_out;
          continue;
        }
        const double e = MaxAbsErr(out, *ref);
        ok = ok && e <= Tolerance();
        std::snprintf(buf, sizeof buf, " ours %uthr %.1e;", threads[i], e);
        errs += buf;
      }
      std::map<std::string, bool> torch_on;
#if defined(SWA_BENCH_HAVE_OPENBLAS)
      if (torch_why.empty()) {
        const std::string qf = ShmPath("q"), kf = ShmPath("k"), vf = ShmPath("v");
        WriteFloats(qf, ch.q.data(), ch.q.size());
        WriteFloats(kf, blas.k.data(), blas.k.size());
        if (!c.shared_kv) WriteFloats(vf, blas.v.data(), blas.v.size());
        std::snprintf(buf, sizeof buf, "load %d %d %d %d %d %d ", c.hq, c.hkv, c.d, T, kWindow,
                      g_block);
        const std::string ans =
            torch.Ask(buf + qf + " " + kf + " " + (c.shared_kv ? kf : vf));
        std::remove(qf.c_str());
        std::remove(kf.c_str());
        std::remove(vf.c_str());
        if (ans != "ok") notes.push_back(std::string(c.name) + " T " + std::to_string(T) + ": " + ans);
        for (const char* name : kTorchNames) {
          if (ans != "ok") break;
          const std::string of = ShmPath("out");
          const std::string a = torch.Ask(std::string("check ") + name + " " + of);
          if (a != "ok" || !ReadFloats(of, check)) {
            notes.push_back(std::string(c.name) + " T " + std::to_string(T) + " " + name + ": " + a);
            continue;
          }
          const double e = MaxAbsErr(check, *ref);
          ok = ok && e <= Tolerance();
          std::snprintf(buf, sizeof buf, " %s %.1e;", name, e);
          errs += buf;
          torch_on[name] = true;
        }
      }
#endif  // the torch contenders get (a)'s dequantised KV
      std::printf("%-28.28s %5d     check: max abs error against (a):%s%s\n", c.name, T,
                  errs.c_str(), ok ? "" : "  ** MISMATCH: not timed **");
      if (!ok) {
        ++failures;
        continue;
      }
      // ---- Timing: every contender of this case and chunk, on 1 and 2
      // threads, interleaved call by call.
      std::vector<Contender> cs;
      std::vector<std::pair<size_t, int>> slot_of;  // (thread index, column)
      std::map<std::pair<size_t, int>, std::vector<double>> child_wall;
      for (size_t i = 0; i < threads.size(); ++i) {
        cs.push_back(fixtures[i]->NextChunk());
        slot_of.push_back({i, 0});
#if defined(SWA_BENCH_HAVE_OPENBLAS)
        ThreadPool* pool = pools[i].get();
        cs.push_back({nullptr, [&blas, pool] { blas.Run(*pool); }});
        slot_of.push_back({i, 1});
#endif
        for (int n = 0; n < 3; ++n) {
          if (!torch_on[kTorchNames[n]]) continue;
          const std::pair<size_t, int> key{i, 2 + n};
          const std::string req =
              std::string("run ") + kTorchNames[n] + " " + std::to_string(threads[i]);
          std::vector<double>* walls = &child_wall[key];
          TorchChild* child = &torch;
          cs.push_back({nullptr, [child, req, walls] {
                          const std::string a = child->Ask(req);
                          walls->push_back(std::atof(a.c_str()));
                          if (a.rfind("err", 0) == 0) {
                            std::fprintf(stderr, "%s: %s\n", req.c_str(), a.c_str());
                            std::exit(1);
                          }
                        }});
          slot_of.push_back(key);
        }
      }
      // Long calls (a round of the 8192-token DeepSeek-V4 chunk takes tens of
      // seconds): fewer rounds, never a smaller case.
      const int rounds = flops > 20e9 ? std::min(reps, 2) : reps;
      const std::vector<Timing> t = TimeInterleaved(cs, quick ? 0.0 : budget * cs.size(), rounds);
      for (size_t i = 0; i < threads.size(); ++i) {
        double best_s[5] = {0, 0, 0, 0, 0}, best_cpu = 0;
        for (size_t j = 0; j < cs.size(); ++j) {
          if (slot_of[j].first != i) continue;
          const int col = slot_of[j].second;
          if (col < 2) {
            best_s[col] = t[j].best_s;
            if (col == 0) best_cpu = t[j].best_cpu_s;
          } else {
            // The child's own clock around the call (no pipe), warm-up call dropped.
            std::vector<double>& w = child_wall[slot_of[j]];
            best_s[col] = *std::min_element(w.begin() + 1, w.end());
          }
        }
        auto gf = [&](double s) { return s > 0 ? flops / s / 1e9 : 0.0; };
        auto col = [](double g) {
          char b[16] = "      -";
          if (g > 0) std::snprintf(b, sizeof b, "%7.1f", g);
          return std::string(b);
        };
        double best_base = 0;
        for (int k = 1; k < 5; ++k) best_base = std::max(best_base, gf(best_s[k]));
        const double ours = gf(best_s[0]);
        const double us_tok = best_s[0] / T * 1e6;
        if (T == 512) us_512[threads[i]] = us_tok;
        char ratio[16] = "-", vs512[16] = "-", pk[16] = "-", pkc[16] = "-";
        if (best_base > 0) std::snprintf(ratio, sizeof ratio, "%.2fx", ours / best_base);
        if (us_512.count(threads[i]))
          std::snprintf(vs512, sizeof vs512, "%.2fx", us_tok / us_512[threads[i]]);
        if (peak > 0) {
          std::snprintf(pk, sizeof pk, "%.0f%%", 100 * ours / peak / threads[i]);
          std::snprintf(pkc, sizeof pkc, "%.0f%%", 100 * gf(best_cpu) / peak);
        }
        std::printf("%-28.28s %5d %3u | %s %s %s %s %s | %s %8s | %5s %5s | %7.2f %6s\n", c.name, T,
                    threads[i], col(ours).c_str(), col(gf(best_s[1])).c_str(),
                    col(gf(best_s[2])).c_str(), col(gf(best_s[3])).c_str(),
                    col(gf(best_s[4])).c_str(), col(best_base).c_str(), ratio, pk, pkc, us_tok,
                    vs512);
        std::fflush(stdout);
      }
    }
  }
  std::printf(
      "\nGFLOP/s: 4 * D * W * Hq per token (the band), best call, wall clock; the PyTorch columns\n"
      "by the child's own clock around the call. All contenders of a case and chunk (1 and 2\n"
      "threads) timed interleaved, call by call. %%pk: ours per thread against the larger 1-core\n"
      "FMA peak (--bf16: the BF16 path's peak, tdpbf16ps or vdpbf16ps); %%pkc: ours per CPU-second of the process. us/tok: ours, microseconds per\n"
      "token; vs512: against the 512-token chunk on the same threads (1.00x = flat).\n"
      "ours: the whole swa_step (encode the chunk, dequantise history, attend, store); (a) also\n"
      "encodes and decodes; (b), (c) get the dequantised FP32 KV for free.\n");
  for (const std::string& n : notes) std::printf("note: %s\n", n.c_str());
  std::printf("machine load (1/5/15 min): %s\n", LoadAverage().c_str());
  return failures == 0 ? 0 : 1;
}
