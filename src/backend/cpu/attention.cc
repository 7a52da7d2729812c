// The attention driver: splits each (sequence, KV head) into blocks of query
// rows, and for each block runs S = Q K^T over the keys inside the block's band,
// masks and exponentiates per row (online softmax across key chunks), then
// O += P V. All arithmetic goes through an AttentionKernels table.
#include "backend/cpu/attention.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <string>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#include "backend/cpu/attention_kernels.h"

namespace swa::cpu {
namespace {

constexpr int kMaxBlockRows = 192;     // 32 register tiles
constexpr int kMinBlockRows = 24;      // below this, packing K^T dominates
constexpr int kBlockFloats = 96 * 1024;    // Q (and O) block: rows * D
constexpr int kKtFloats = 128 * 1024;      // one packed K^T chunk: keys * D
constexpr int kScoreFloats = 64 * 1024;    // scores of a block: rows * keys
constexpr int kMaxChunkKeys = 1024;
constexpr int kDepthSplit = 256;  // D is cut in slices this deep so a K^T panel stays in L1

// A float array aligned to a cache line that only ever grows.
class FloatBuffer {
 public:
  FloatBuffer() = default;
  FloatBuffer(const FloatBuffer&) = delete;
  FloatBuffer& operator=(const FloatBuffer&) = delete;
  ~FloatBuffer() { Release(); }
  float* Get(size_t n) {
    if (n > capacity_) {
      // Allocate before releasing: a bad_alloc must leave the buffer as it was
      // (it is thread-local and outlives the failed step).
      const size_t capacity = (n + 15) / 16 * 16;
      float* fresh =
          static_cast<float*>(::operator new(capacity * sizeof(float), std::align_val_t{64}));
      Release();
      data_ = fresh;
      capacity_ = capacity;
    }
    return data_;
  }

 private:
  void Release() {
    if (data_ != nullptr) ::operator delete(data_, std::align_val_t{64});
    data_ = nullptr;
    capacity_ = 0;
  }
  float* data_ = nullptr;
  size_t capacity_ = 0;
};

struct Range {
  int begin, end;  // [begin, end); empty when begin >= end
};

// Per-thread scratch, reused by every block this thread runs.
struct Workspace {
  FloatBuffer q, o, s, kt;
  std::vector<float> m, l;                // running max and denominator per row
  std::vector<Range> row_keys;            // per row
  std::vector<int> row_tile;              // register tile of each row
  std::vector<int> tile_row0, tile_rows;  // rows of each register tile
  std::vector<Range> tile_hull;           // keys of each register tile
  std::vector<Range> tile_segments;       // kTileRows per tile, merged and sorted
  std::vector<int> tile_segment_count;
  std::vector<unsigned char> has_output;  // O row holds contributions to rescale
};

thread_local Workspace tls_workspace;
thread_local std::vector<int64_t> tls_task_prefix;

struct Blocking {
  int block_rows;  // multiple of kTileRows
  int chunk_keys;  // multiple of kTileCols
};

inline int RoundUp(int x, int a) { return (x + a - 1) / a * a; }
inline int CeilDiv(int64_t x, int64_t a) { return static_cast<int>((x + a - 1) / a); }

// Merges the key ranges of one register tile's rows (nearly always one or two
// adjacent bands). P.V runs only over these keys, so a key that no row sees
// (e.g. a NaN between two disjoint ranges) never multiplies into an output.
int MergeRanges(const Range* rows, int n, Range* out) {
  int count = 0;
  for (int i = 0; i < n; ++i) {
    if (rows[i].begin >= rows[i].end) continue;
    out[count++] = rows[i];
  }
  std::sort(out, out + count, [](const Range& a, const Range& b) { return a.begin < b.begin; });
  int merged = 0;
  for (int i = 0; i < count; ++i) {
    if (merged > 0 && out[i].begin <= out[merged - 1].end) {
      out[merged - 1].end = std::max(out[merged - 1].end, out[i].end);
    } else {
      out[merged++] = out[i];
    }
  }
  return merged;
}

inline Range Intersect(Range a, int lo, int hi) {
  return {std::max(a.begin, lo), std::min(a.end, hi)};
}

// Cuts `rows` rows into register tiles of at most kTileRows. A remainder of
// 1..3 rows is merged with the last full tile and the two are split evenly
// (8 = 4 + 4, not 6 + 2): a tile of 4+ rows keeps the FMA ports busy, one of
// 1-2 rows does not.
int CutTiles(int rows, Workspace& ws) {
  ws.tile_row0.clear();
  ws.tile_rows.clear();
  int full = rows / kTileRows;
  const int rem = rows % kTileRows;
  int tail_a = 0, tail_b = 0;
  if (rem == 0) {
  } else if (rem <= 3 && full > 0) {
    --full;
    tail_a = (kTileRows + rem + 1) / 2;
    tail_b = kTileRows + rem - tail_a;
  } else {
    tail_a = rem;
  }
  int row = 0;
  for (int t = 0; t < full; ++t, row += kTileRows) {
    ws.tile_row0.push_back(row);
    ws.tile_rows.push_back(kTileRows);
  }
  for (int n : {tail_a, tail_b}) {
    if (n == 0) continue;
    ws.tile_row0.push_back(row);
    ws.tile_rows.push_back(n);
    row += n;
  }
  ws.row_tile.resize(rows);
  for (size_t t = 0; t < ws.tile_rows.size(); ++t)
    for (int i = 0; i < ws.tile_rows[t]; ++i) ws.row_tile[ws.tile_row0[t] + i] = static_cast<int>(t);
  return static_cast<int>(ws.tile_rows.size());
}

// Asks for rows that P.V reads once the scores are done (the tile is usually
// cold): the loads overlap the score GEMM instead of stalling the value GEMM.
void PrefetchRows(const float* x, ptrdiff_t ld, int n, int d) {
  for (int r = 0; r < n; ++r)
    for (int e = 0; e < d; e += 16) __builtin_prefetch(x + r * ld + e, 0, 2);
}

// Logit soft-cap in place: x = cap * tanh(x / cap).
void SoftCap(float* x, int n, float cap) {
  const float inv = 1.0f / cap;
  for (int j = 0; j < n; ++j) x[j] = cap * std::tanh(x[j] * inv);
}

// Online softmax over keys [c0, c1) of the chunk's scores `s` (row i at
// s + i * lds): P = exp(S - m) inside each row's keys, 0 elsewhere in its
// tile's hull (P.V reads exactly that hull's segments); rescales the rows'
// running sums and outputs when their maximum grows.
void OnlineSoftmax(const AttentionKernels& kn, const AttentionShape& shape, int rows, int c0,
                   int c1, int lds, float* s, float* o, int d, Workspace& ws) {
  for (int i = 0; i < rows; ++i) {
    const Range th = Intersect(ws.tile_hull[ws.row_tile[i]], c0, c1);
    if (th.begin >= th.end) continue;
    float* srow = s + static_cast<ptrdiff_t>(i) * lds - c0;  // indexed by key
    const Range rk = Intersect(ws.row_keys[i], c0, c1);
    if (rk.begin >= rk.end) {
      std::fill(srow + th.begin, srow + th.end, 0.0f);
      continue;
    }
    std::fill(srow + th.begin, srow + rk.begin, 0.0f);
    std::fill(srow + rk.end, srow + th.end, 0.0f);
    if (shape.softcap > 0) SoftCap(srow + rk.begin, rk.end - rk.begin, shape.softcap);
    const float chunk_max = kn.row_max(srow + rk.begin, rk.end - rk.begin);
    if (chunk_max > ws.m[i]) {
      const float factor = std::exp(ws.m[i] - chunk_max);
      ws.l[i] *= factor;
      float* orow = o + static_cast<ptrdiff_t>(i) * d;
      if (ws.has_output[i]) kn.scale_row(orow, orow, d, factor);
      ws.m[i] = chunk_max;
    }
    ws.l[i] += kn.exp_sum(srow + rk.begin, rk.end - rk.begin, ws.m[i]);
    ws.has_output[i] = 1;
  }
}

// Normalised outputs (and LSEs) of the block's rows.
void WriteRows(const AttentionKernels& kn, const SeqProblem& pr, int g, int row0, int rows,
               int ratio, int hq, int d, const float* o, const Workspace& ws) {
  for (int i = 0; i < rows; ++i) {
    const int t = (row0 + i) / ratio;
    const int h = g * ratio + (row0 + i) % ratio;
    float* dst = pr.out + (static_cast<ptrdiff_t>(t) * hq + h) * d;
    // l == 0 only for a row with no key and no sink: the result is 0. A NaN l
    // fails the test and propagates.
    if (ws.l[i] != 0.0f) {
      kn.scale_row(dst, o + static_cast<ptrdiff_t>(i) * d, d, 1.0f / ws.l[i]);
    } else {
      std::memset(dst, 0, sizeof(float) * d);
    }
    if (pr.lse != nullptr)
      pr.lse[static_cast<ptrdiff_t>(t) * hq + h] =
          ws.l[i] != 0.0f ? ws.m[i] + std::log(ws.l[i]) : -std::numeric_limits<float>::infinity();
  }
}

// Rows [row0, row1) of KV head g of one problem; row i is token i / ratio,
// query head g * ratio + i % ratio.
void RunBlock(const AttentionKernels& kn, const AttentionShape& shape, const SeqProblem& pr, int g,
              int row0, int row1, const Blocking& blocking, Workspace& ws) {
  const int d = shape.head_dim;
  const int hq = shape.q_heads;
  const int ratio = shape.q_heads / shape.kv_heads;
  const ptrdiff_t ldkv = static_cast<ptrdiff_t>(shape.kv_heads) * d;
  const int rows = row1 - row0;
  const int tiles = CutTiles(rows, ws);

  ws.row_keys.resize(rows);
  ws.m.resize(rows);
  ws.l.resize(rows);
  ws.has_output.resize(rows);
  ws.tile_hull.resize(tiles);
  ws.tile_segments.resize(static_cast<size_t>(tiles) * kTileRows);
  ws.tile_segment_count.resize(tiles);

  for (int i = 0; i < rows; ++i) {
    const int t = (row0 + i) / ratio;
    Range keys{std::max(pr.key_begin[t], 0), std::min(pr.key_end[t], pr.n_keys)};
    if (keys.begin >= keys.end) keys = {0, 0};
    ws.row_keys[i] = keys;
  }
  Range hull{std::numeric_limits<int>::max(), std::numeric_limits<int>::min()};
  for (int tile = 0; tile < tiles; ++tile) {
    Range* segs = &ws.tile_segments[static_cast<size_t>(tile) * kTileRows];
    const int n = MergeRanges(&ws.row_keys[ws.tile_row0[tile]], ws.tile_rows[tile], segs);
    ws.tile_segment_count[tile] = n;
    ws.tile_hull[tile] = n > 0 ? Range{segs[0].begin, segs[n - 1].end} : Range{0, 0};
    if (n > 0) hull = {std::min(hull.begin, segs[0].begin), std::max(hull.end, segs[n - 1].end)};
  }

  // Q, pre-scaled.
  float* q = ws.q.Get(static_cast<size_t>(rows) * d);
  float* o = ws.o.Get(static_cast<size_t>(rows) * d);
  std::memset(o, 0, sizeof(float) * rows * d);
  for (int i = 0; i < rows; ++i) {
    float* dst = q + static_cast<ptrdiff_t>(i) * d;
    const int t = (row0 + i) / ratio;
    const int h = g * ratio + (row0 + i) % ratio;
    kn.scale_row(dst, pr.q + (static_cast<ptrdiff_t>(t) * hq + h) * d, d, shape.scale);
    // The sink enters as a key with logit S_h and no value: m starts at S_h
    // with denominator exp(S_h - m) = 1.
    ws.m[i] = shape.sinks != nullptr ? shape.sinks[h] : -std::numeric_limits<float>::infinity();
    ws.l[i] = shape.sinks != nullptr ? 1.0f : 0.0f;
    ws.has_output[i] = 0;
  }

  if (hull.begin < hull.end) {
    const int span = hull.end - hull.begin;
    const int n_chunks = CeilDiv(span, blocking.chunk_keys);
    const int chunk = RoundUp(CeilDiv(span, n_chunks), kTileCols);
    float* kt = ws.kt.Get(static_cast<size_t>(chunk) * d);
    float* s = ws.s.Get(static_cast<size_t>(rows) * chunk);
    const float* k_head = pr.k + static_cast<ptrdiff_t>(g) * d;
    const float* v_head = pr.v + static_cast<ptrdiff_t>(g) * d;

    for (int c0 = hull.begin; c0 < hull.end; c0 += chunk) {
      const int c1 = std::min(c0 + chunk, hull.end);
      const int lds = RoundUp(c1 - c0, kTileCols);
      kn.pack_kt(k_head + c0 * ldkv, ldkv, c1 - c0, d, kt);
      if (v_head != k_head) PrefetchRows(v_head + c0 * ldkv, ldkv, c1 - c0, d);

      // Scores: only the 16-key panels that meet a tile's own keys. The K^T
      // panel stays hot while every tile of the block passes over it.
      for (int d0 = 0; d0 < d; d0 += kDepthSplit) {
        const int depth = std::min(kDepthSplit, d - d0);
        for (int p = 0; p < lds; p += kTileCols) {
          for (int tile = 0; tile < tiles; ++tile) {
            const Range th = Intersect(ws.tile_hull[tile], c0 + p, c0 + p + kTileCols);
            if (th.begin >= th.end) continue;
            const int r0 = ws.tile_row0[tile];
            kn.gemm(ws.tile_rows[tile], depth, q + static_cast<ptrdiff_t>(r0) * d + d0, d,
                    kt + static_cast<ptrdiff_t>(p) * d + d0 * kTileCols, kTileCols,
                    s + static_cast<ptrdiff_t>(r0) * lds + p, lds, d0 > 0);
          }
        }
      }

      OnlineSoftmax(kn, shape, rows, c0, c1, lds, s, o, d, ws);

      // O += P V over each tile's merged key segments; a 16-column V panel
      // stays hot across the tiles.
      for (int j = 0; j < d; j += kTileCols) {
        for (int tile = 0; tile < tiles; ++tile) {
          const Range* segs = &ws.tile_segments[static_cast<size_t>(tile) * kTileRows];
          for (int n = 0; n < ws.tile_segment_count[tile]; ++n) {
            const Range seg = Intersect(segs[n], c0, c1);
            if (seg.begin >= seg.end) continue;
            const int r0 = ws.tile_row0[tile];
            kn.gemm(ws.tile_rows[tile], seg.end - seg.begin,
                    s + static_cast<ptrdiff_t>(r0) * lds + (seg.begin - c0), lds,
                    v_head + seg.begin * ldkv + j, ldkv, o + static_cast<ptrdiff_t>(r0) * d + j, d,
                    true);
          }
        }
      }
    }
  }

  WriteRows(kn, pr, g, row0, rows, ratio, hq, d, o, ws);
}

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
  // Enough blocks for the threads to balance; smaller blocks repack K^T more.
  while (threads > 1 && rows > kMinBlockRows &&
         CountTasks(problems, n_problems, ratio, shape.kv_heads, rows, nullptr) < 4 * threads) {
    rows = std::max(kMinBlockRows, RoundUp(rows / 2, kTileRows));
  }
  int chunk = std::min({kMaxChunkKeys, kKtFloats / d, kScoreFloats / rows});
  chunk = std::max(64, chunk / kTileCols * kTileCols);
  return {rows, chunk};
}

// SWACACHE_ATTENTION, read once.
AttentionIsa ForcedIsa() {
  static const AttentionIsa forced = [] {
    const char* env = std::getenv("SWACACHE_ATTENTION");
    const std::string want = env != nullptr ? env : "";
    if (want == "portable") return AttentionIsa::kPortable;
    if (want == "avx2") return AttentionIsa::kAvx2;
    return AttentionIsa::kAvx512;
  }();
  return forced;
}

const AttentionKernels& SelectKernels(AttentionIsa isa) {
  if (isa == AttentionIsa::kAuto) isa = ForcedIsa();
  if (isa == AttentionIsa::kAvx512 && Avx512KernelsAvailable()) return *Avx512AttentionKernels();
  if (isa != AttentionIsa::kPortable && Avx2KernelsAvailable()) return *Avx2AttentionKernels();
  return PortableAttentionKernels();
}

}  // namespace

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

const char* AttentionKernelName() { return SelectKernels(AttentionIsa::kAuto).name; }

void AttendWithIsa(AttentionIsa isa, const AttentionShape& shape, const SeqProblem* problems,
                   int n_problems, ThreadPool* pool) {
  assert(shape.q_heads > 0 && shape.kv_heads > 0 && shape.q_heads % shape.kv_heads == 0);
  assert(HeadDimSupported(shape.head_dim));
  if (n_problems <= 0) return;
  const AttentionKernels& kn = SelectKernels(isa);
  const unsigned threads = pool != nullptr ? pool->num_threads() : 1;
  const Blocking blocking = ChooseBlocking(shape, problems, n_problems, threads);
  const int ratio = shape.q_heads / shape.kv_heads;

  std::vector<int64_t>& prefix = tls_task_prefix;
  const int64_t n_tasks =
      CountTasks(problems, n_problems, ratio, shape.kv_heads, blocking.block_rows, &prefix);

  struct Context {
    const AttentionKernels* kn;
    const AttentionShape* shape;
    const SeqProblem* problems;
    const int64_t* prefix;
    int n_problems, ratio;
    Blocking blocking;
  } ctx{&kn, &shape, problems, prefix.data(), n_problems, ratio, blocking};

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
      RunBlock(*c->kn, *c->shape, pr, g, row0, std::min(rows, row0 + c->blocking.block_rows),
               c->blocking, ws);
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
