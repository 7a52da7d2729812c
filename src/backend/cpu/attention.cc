// The attention entry points: which kernel set and which block driver run
// (path selection, SWACACHE_ATTENTION), and how the work is cut into blocks
// of query rows per (sequence, KV head) and spread over the thread pool. The
// block drivers: attention_fp32.cc (FP32 kernels), attention_bf16.cc and
// attention_amx.cc (BF16 kernels).
#include "backend/cpu/attention.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cpu/attention_block.h"
#include "backend/cpu/attention_kernels.h"
#include "common/cpu_features.h"

namespace swa::cpu {
namespace {

using namespace attn;  // NOLINT: the driver's own internals

thread_local Workspace tls_workspace;
thread_local std::vector<int64_t> tls_task_prefix;

int64_t CountTasks(const SeqProblem* problems, int n_problems, int ratio, int kv_heads,
                   int block_rows, std::vector<int64_t>* prefix) {
  if (prefix != nullptr) prefix->resize(n_problems + 1);
  int64_t total = 0;
  for (int p = 0; p < n_problems; ++p) {
    if (prefix != nullptr) (*prefix)[p] = total;
    const int64_t rows = static_cast<int64_t>(std::max(problems[p].n_tokens, 0)) * ratio;
    total += CeilDiv(rows, block_rows) * static_cast<int64_t>(kv_heads);
  }
  if (prefix != nullptr) (*prefix)[n_problems] = total;
  return total;
}

Blocking ChooseBlocking(const AttentionShape& shape, const SeqProblem* problems, int n_problems,
                        unsigned threads) {
  const int d = shape.head_dim;
  const int ratio = shape.q_heads / shape.kv_heads;
  int rows = std::clamp(kBlockFloats / d / kTileRows * kTileRows, kMinBlockRows, kMaxBlockRows);
  // One KV head and every problem's keys in one chunk of a double-size block:
  // Q is read and O written in place (no block-sized buffers), so the block
  // may be twice as tall, and each sequence's keys are decoded and packed
  // half as often (once for a DeepSeek-V4-like decode step's 6 x 64 rows).
  if (shape.kv_heads == 1) {
    const int tall = 2 * rows;
    const int tall_chunk = std::min({kMaxChunkKeys, kKtFloats / d, kScoreFloats / tall});
    bool one_chunk = true;
    for (int p = 0; p < n_problems && one_chunk; ++p)
      one_chunk = problems[p].n_keys <= tall_chunk / kTileCols * kTileCols;
    if (one_chunk) rows = tall;
  }
  // Enough blocks for the threads to balance; smaller blocks repack K^T more.
  while (threads > 1 && rows > kMinBlockRows &&
         CountTasks(problems, n_problems, ratio, shape.kv_heads, rows, nullptr) < 4 * threads) {
    rows = std::max(kMinBlockRows, RoundUp(rows / 2, kTileRows));
  }
  int chunk = std::min({kMaxChunkKeys, kKtFloats / d, kScoreFloats / rows});
  chunk = std::max(64, chunk / kTileCols * kTileCols);
  return {rows, chunk};
}

// Whether the AVX512-BF16 kernels beat widening BF16 queries to FP32 for the
// AVX-512 F ones, from what is known of the cores: on Intel's (Cooper Lake,
// Sapphire / Emerald / Granite Rapids) vdpbf16ps retires half the FLOP of
// the full-width FMA ports (the benches' own probes: 65-116 vs 133-232
// GFLOP/s) and the BF16 step ran slower than the FP32 one (issue 34); on
// AMD Zen 4 / 5 it runs at the FMA rate and the BF16 step is 1.8x faster
// (docs/perf/cpu-attention-2026-12-02.md). Unknown vendors keep BF16.
bool VdpBf16OutrunsFma() { return !CpuIsIntel(); }

AttentionIsa Resolve(AttentionIsa isa) {
  if (isa != AttentionIsa::kAuto) return isa;
  isa = ForcedAttentionIsa();
  if (isa != AttentionIsa::kAuto) return isa;
  if (AmxKernelsAvailable()) return AttentionIsa::kAmx;
  return VdpBf16OutrunsFma() ? AttentionIsa::kBf16 : AttentionIsa::kAvx512;
}

// Which AVX-512 register tiles the FP32 kernels use, from what the CPU is:
// Intel cores have two full-width 512-bit FMA ports, where the Mx16 tile's
// one broadcast per FMA keeps the load ports, not the FMAs, busy (49% of the
// FMA peak, issue 34): the Mx32 tiles there. AMD Zen 4 / 5 split a zmm FMA
// over 256-bit halves and the Mx16 tile reaches 82-85% of their peak
// (docs/perf/cpu-attention-2026-12-02.md): it stays. SWACACHE_AVX512_TILES=16
// or 32 overrides (read once; for measuring).
bool Avx512WideTiles() {
  static const bool wide = [] {
    const char* env = std::getenv("SWACACHE_AVX512_TILES");
    const std::string want = env != nullptr ? env : "";
    if (want == "16") return false;
    if (want == "32") return true;
    return CpuIsIntel();
  }();
  return wide;
}

bool IsBf16Isa(AttentionIsa isa) { return isa == AttentionIsa::kBf16 || isa == AttentionIsa::kAmx; }

// The FP32 set of an ISA (kBf16, kAmx: AVX-512's, for problems without BF16
// queries and for the softmax).
const AttentionKernels& SelectKernels(AttentionIsa isa) {
  isa = Resolve(isa);
  if ((isa == AttentionIsa::kAvx512 || IsBf16Isa(isa)) && Avx512KernelsAvailable())
    return Avx512WideTiles() ? *Avx512WideAttentionKernels() : *Avx512AttentionKernels();
  if (isa != AttentionIsa::kPortable && Avx2KernelsAvailable()) return *Avx2AttentionKernels();
  return PortableAttentionKernels();
}

}  // namespace

AttentionIsa ForcedAttentionIsa() {
  static const AttentionIsa forced = [] {
    const char* env = std::getenv("SWACACHE_ATTENTION");
    const std::string want = env != nullptr ? env : "";
    if (want == "portable") return AttentionIsa::kPortable;
    if (want == "avx2") return AttentionIsa::kAvx2;
    if (want == "avx512") return AttentionIsa::kAvx512;
    if (want == "bf16") return AttentionIsa::kBf16;
    if (want == "amx") return AttentionIsa::kAmx;
    return AttentionIsa::kAuto;
  }();
  return forced;
}

bool Avx2KernelsAvailable() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool available = Avx2AttentionKernels() != nullptr &&
                                __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return available;
#else
  return false;
#endif
}

bool Avx512KernelsAvailable() {
#if defined(__x86_64__)
  static const bool available = Avx512AttentionKernels() != nullptr && Avx2KernelsAvailable() &&
                                __builtin_cpu_supports("avx512f");
  return available;
#else
  return false;
#endif
}

bool Bf16KernelsAvailable() {
#if defined(__x86_64__)
  static const bool available = Avx512Bf16AttentionKernels() != nullptr &&
                                Avx512KernelsAvailable() && __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("avx512vl") &&
                                __builtin_cpu_supports("avx512bf16");
  return available;
#else
  return false;
#endif
}

bool AmxKernelsAvailable() {
#if defined(__x86_64__)
  static const bool available = Bf16KernelsAvailable() && AmxTileDataGranted();
  return available;
#else
  return false;
#endif
}

bool AmxAttentionSelected() {
  return Resolve(AttentionIsa::kAuto) == AttentionIsa::kAmx && AmxKernelsAvailable();
}

bool Bf16AttentionSelected() {
  return IsBf16Isa(Resolve(AttentionIsa::kAuto)) && Bf16KernelsAvailable();
}

const char* AttentionKernelName() { return SelectKernels(AttentionIsa::kAuto).name; }

const char* Bf16AttentionPathName() {
  if (AmxAttentionSelected()) return "amx_bf16";
  if (Bf16AttentionSelected()) return Avx512Bf16AttentionKernels()->name;
  return AttentionKernelName();
}

void AttendWithIsa(AttentionIsa isa, const AttentionShape& shape, const SeqProblem* problems,
                   int n_problems, ThreadPool* pool) {
  assert(shape.q_heads > 0 && shape.kv_heads > 0 && shape.q_heads % shape.kv_heads == 0);
  assert(HeadDimSupported(shape.head_dim));
  if (n_problems <= 0) return;
  const AttentionKernels& kn = SelectKernels(isa);
  const Bf16AttentionKernels* kb =
      IsBf16Isa(Resolve(isa)) && Bf16KernelsAvailable() ? Avx512Bf16AttentionKernels() : nullptr;
  const bool amx = kb != nullptr && Resolve(isa) == AttentionIsa::kAmx && AmxKernelsAvailable();
  const unsigned threads = pool != nullptr ? pool->num_threads() : 1;
  const Blocking blocking = ChooseBlocking(shape, problems, n_problems, threads);
  const int ratio = shape.q_heads / shape.kv_heads;

  std::vector<int64_t>& prefix = tls_task_prefix;
  const int64_t n_tasks =
      CountTasks(problems, n_problems, ratio, shape.kv_heads, blocking.block_rows, &prefix);

  struct Context {
    const AttentionKernels* kn;
    const Bf16AttentionKernels* kb;
    bool amx;
    const AttentionShape* shape;
    const SeqProblem* problems;
    const int64_t* prefix;
    int n_problems, ratio;
    Blocking blocking;
  } ctx{&kn, kb, amx, &shape, problems, prefix.data(), n_problems, ratio, blocking};

  // One pointer of capture: std::function keeps it inline (no allocation).
  const Context* c = &ctx;
  auto run = [c](size_t begin, size_t end) {
    Workspace& ws = tls_workspace;
    for (size_t task = begin; task < end; ++task) {
      const int64_t* it = std::upper_bound(c->prefix, c->prefix + c->n_problems + 1,
                                           static_cast<int64_t>(task));
      const int p = static_cast<int>(it - c->prefix) - 1;
      const SeqProblem& pr = c->problems[p];
      const int rows = pr.n_tokens * c->ratio;
      const int blocks = CeilDiv(rows, c->blocking.block_rows);
      const int local = static_cast<int>(static_cast<int64_t>(task) - c->prefix[p]);
      const int g = local / blocks;
      const int row0 = (local % blocks) * c->blocking.block_rows;
      const int row1 = std::min(rows, row0 + c->blocking.block_rows);
      const bool bf16 = c->kb != nullptr && pr.q_bf16 != nullptr;
      if (bf16 && pr.mx.rows == nullptr) {
        if (c->amx)
          RunBlockAmx(*c->kb, *c->kn, *c->shape, pr, g, row0, row1, c->blocking, ws);
        else
          RunBlockBf16(*c->kb, *c->kn, *c->shape, pr, g, row0, row1, c->blocking, ws);
      } else if (bf16 && c->amx &&
                 (pr.mx.bf16 || MxfpValuesFinite(pr, g, c->shape->head_dim))) {
        RunBlockAmx(*c->kb, *c->kn, *c->shape, pr, g, row0, row1, c->blocking, ws);
      } else {
        assert((pr.mx.rows != nullptr || (pr.k != nullptr && pr.v != nullptr)) && pr.q != nullptr);
        RunBlock(*c->kn, *c->shape, pr, g, row0, row1, c->blocking, ws);
      }
    }
  };
  if (pool == nullptr || threads == 1) {
    run(0, static_cast<size_t>(n_tasks));
  } else {
    const ThreadPool::RangeFn fn(run);
    pool->ParallelFor(static_cast<size_t>(n_tasks), 1, fn);
  }
}

void Attend(const AttentionShape& shape, const SeqProblem* problems, int n_problems,
            ThreadPool* pool) {
  AttendWithIsa(AttentionIsa::kAuto, shape, problems, n_problems, pool);
}

}  // namespace swa::cpu
