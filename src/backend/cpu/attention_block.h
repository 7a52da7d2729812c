// Shared pieces of the attention drivers (attention_fp32.cc: FP32 kernels;
// attention_bf16.cc: BF16 kernels): workspace, blocking constants, register
// tiles and their key segments, online softmax and the final rows. Internal.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/attention_kernels.h"

namespace swa::cpu::attn {

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
  FloatBuffer q, o, s, kt, vs;            // vs: V of a chunk in 16-column slabs
  FloatBuffer rows;                       // 16 decoded MXFP8 rows (FP32 kernels)
  FloatBuffer q16, kt16, v16, p16;        // BF16 path (uint16_t in float storage)
  std::vector<float> m, l;                // running max and denominator per row
  std::vector<Range> row_keys;            // per row
  std::vector<int> row_tile;              // register tile of each row
  std::vector<int> tile_row0, tile_rows;  // rows of each register tile
  std::vector<Range> tile_hull;           // keys of each register tile
  std::vector<Range> tile_segments;       // kTileRows per tile, merged and sorted
  std::vector<int> tile_segment_count;
  std::vector<unsigned char> has_output;  // O row holds contributions to rescale
  std::vector<unsigned char> tile_rowwise;  // per tile: P.V row by row in this chunk
};


struct Blocking {
  int block_rows;  // multiple of kTileRows
  int chunk_keys;  // multiple of kTileCols
};

inline int RoundUp(int x, int a) { return (x + a - 1) / a * a; }
inline int CeilDiv(int64_t x, int64_t a) { return static_cast<int>((x + a - 1) / a); }

// Merges the key ranges of one register tile's rows (nearly always one or two
// adjacent bands). P.V runs only over these keys, so a key that no row sees
// (e.g. a NaN between two disjoint ranges) never multiplies into an output.
inline int MergeRanges(const Range* rows, int n, Range* out) {
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

// True when one of the d values at `row` is a NaN or an Inf (FP32 bits, or
// BF16 bits stored as uint16_t).
inline bool NonFiniteRow(const float* row, int d) {
  unsigned bad = 0;
  for (int e = 0; e < d; ++e) {
    uint32_t u;
    std::memcpy(&u, row + e, sizeof u);
    bad |= (u & 0x7f800000u) == 0x7f800000u;
  }
  return bad != 0;
}
inline bool NonFiniteRow(const uint16_t* row, int d) {
  unsigned bad = 0;
  for (int e = 0; e < d; ++e) bad |= (row[e] & 0x7f80u) == 0x7f80u;
  return bad != 0;
}

// Marks, for keys [c0, c1) of a chunk, the register tiles whose P.V must run
// row by row: a value that some but not all of the tile's rows see is a NaN or
// an Inf (nonfinite(key) says whether the value row of `key` holds one). P is
// 0 for the rows that do not see it, and 0 x NaN = NaN would put it into their
// outputs (a row's output depends on its own keys only). Only keys outside the
// intersection of the tile's row ranges are asked about, so a tile of one
// token's heads (every DeepSeek-V4-like tile) costs nothing.
template <typename NonFinite>
inline void MarkRowwiseTiles(int tiles, int c0, int c1, NonFinite&& nonfinite, Workspace& ws) {
  ws.tile_rowwise.assign(tiles, 0);
  for (int tile = 0; tile < tiles; ++tile) {
    Range common{c0, c1};
    for (int i = 0; i < ws.tile_rows[tile]; ++i) {
      const Range rk = ws.row_keys[ws.tile_row0[tile] + i];
      common = {std::max(common.begin, rk.begin), std::min(common.end, rk.end)};
    }
    const Range* segs = &ws.tile_segments[static_cast<size_t>(tile) * kTileRows];
    for (int n = 0; n < ws.tile_segment_count[tile] && !ws.tile_rowwise[tile]; ++n) {
      const Range seg = Intersect(segs[n], c0, c1);
      for (int key = seg.begin; key < seg.end; ++key) {
        if (key >= common.begin && key < common.end) key = common.end;
        if (key >= seg.end) break;
        if (nonfinite(key)) {
          ws.tile_rowwise[tile] = 1;
          break;
        }
      }
    }
  }
}

// Cuts `rows` rows into register tiles of at most kTileRows. A remainder of
// 1..3 rows is merged with the last full tile and the two are split evenly
// (8 = 4 + 4, not 6 + 2): a tile of 4+ rows keeps the FMA ports busy, one of
// 1-2 rows does not.
inline int CutTiles(int rows, Workspace& ws) {
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
inline void PrefetchRows(const float* x, ptrdiff_t ld, int n, int d) {
  for (int r = 0; r < n; ++r)
    for (int e = 0; e < d; e += 16) __builtin_prefetch(x + r * ld + e, 0, 2);
}

// Logit soft-cap in place: x = cap * tanh(x / cap).
inline void SoftCap(float* x, int n, float cap) {
  const float inv = 1.0f / cap;
  for (int j = 0; j < n; ++j) x[j] = cap * std::tanh(x[j] * inv);
}

// Online softmax over keys [c0, c1) of the chunk's scores `s` (row i at
// s + i * lds; the logits are score_scale * s, so raw Q.K products need no
// scaling pass of their own): P = exp(logit - m) inside each row's keys, 0
// elsewhere in its tile's hull (P.V reads exactly that hull's segments);
// rescales the rows' running sums and outputs when their maximum grows.
inline void OnlineSoftmax(const AttentionKernels& kn, const AttentionShape& shape, int rows, int c0,
                          int c1, int lds, float score_scale, float* s, float* o, int d,
                          Workspace& ws) {
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
    float* x = srow + rk.begin;
    const int n = rk.end - rk.begin;
    float scale = score_scale;
    // max(scale * x) = scale * max(x) needs scale > 0 (rounding is monotonic).
    if (shape.softcap > 0 || !(scale > 0.0f)) {
      if (scale != 1.0f) kn.scale_row(x, x, n, scale);
      if (shape.softcap > 0) SoftCap(x, n, shape.softcap);
      scale = 1.0f;
    }
    const float chunk_max = scale * kn.row_max(x, n);
    if (chunk_max > ws.m[i]) {
      const float factor = std::exp(ws.m[i] - chunk_max);
      ws.l[i] *= factor;
      float* orow = o + static_cast<ptrdiff_t>(i) * d;
      if (ws.has_output[i]) kn.scale_row(orow, orow, d, factor);
      ws.m[i] = chunk_max;
    }
    if (ws.m[i] == -std::numeric_limits<float>::infinity()) {
      // No sink and no finite score yet: every score here is -inf or NaN, and
      // exp(-inf - -inf) would be NaN. A -inf score weighs 0 (as the CUDA
      // kernels' OnlineSoftmaxUpdate); a NaN one still poisons the row.
      float nan_sum = 0.0f;
      for (int j = 0; j < n; ++j) {
        if (x[j] == -std::numeric_limits<float>::infinity()) {
          x[j] = 0.0f;
        } else {
          x[j] = std::numeric_limits<float>::quiet_NaN();
          nan_sum = x[j];
        }
      }
      ws.l[i] += nan_sum;
    } else {
      ws.l[i] += kn.exp_sum(x, n, scale, ws.m[i]);
    }
    ws.has_output[i] = 1;
  }
}

// A FloatBuffer holding at least n uint16_t (BF16 values in float storage).
inline uint16_t* U16(FloatBuffer& b, size_t n) {
  return reinterpret_cast<uint16_t*>(b.Get((n + 1) / 2));
}

// The block's BF16 query rows as given (unscaled: the scale multiplies the
// FP32 scores), row i at the result + i * d. With one KV head the block's rows
// are consecutive rows of pr.q_bf16, read in place (*in_place = true);
// otherwise they are gathered into ws.q16.
inline const uint16_t* BlockQueryBf16(const AttentionShape& shape, const SeqProblem& pr, int g,
                                      int row0, int rows, Workspace& ws, bool* in_place) {
  const int d = shape.head_dim, hq = shape.q_heads, ratio = shape.q_heads / shape.kv_heads;
  *in_place = shape.kv_heads == 1;
  if (*in_place) return pr.q_bf16 + static_cast<ptrdiff_t>(row0) * d;
  uint16_t* qc = U16(ws.q16, static_cast<size_t>(rows) * d);
  for (int i = 0; i < rows; ++i) {
    const int t = (row0 + i) / ratio;
    const int h = g * ratio + (row0 + i) % ratio;
    std::memcpy(qc + static_cast<ptrdiff_t>(i) * d,
                pr.q_bf16 + (static_cast<ptrdiff_t>(t) * hq + h) * d, sizeof(uint16_t) * d);
  }
  return qc;
}

// Where a block accumulates its outputs. In place (one KV head: the block's
// output rows are consecutive rows of pr.out; one key chunk: every row's
// denominator is final once the chunk's softmax has run): P.V writes pr.out
// directly, tile by tile, and each tile's rows are divided by l while still
// in L1 (NormaliseRows). Otherwise a cleared O buffer that WriteRows
// normalises into pr.out.
struct BlockOutput {
  int span = 0;      // keys of the block's hull
  int n_chunks = 0;  // key chunks (0: no keys at all)
  bool in_place = false;
  float* o = nullptr;  // row i at o + i * d
};
inline BlockOutput SetUpOutput(const SeqProblem& pr, Range hull, int row0, int rows, int d,
                               bool q_in_place, const Blocking& blocking, Workspace& ws) {
  BlockOutput out;
  out.span = hull.begin < hull.end ? hull.end - hull.begin : 0;
  out.n_chunks = out.span > 0 ? CeilDiv(out.span, blocking.chunk_keys) : 0;
  out.in_place = q_in_place && out.n_chunks == 1;
  if (out.in_place) {
    out.o = pr.out + static_cast<ptrdiff_t>(row0) * d;
  } else {
    out.o = ws.o.Get(static_cast<size_t>(rows) * d);
    std::memset(out.o, 0, sizeof(float) * rows * d);
  }
  return out;
}

// Rows [r0, r0 + n) of a block's output, written in place at o (row i at
// o + i * d), divided by their final denominators: the same bits WriteRows
// gives from an O buffer (l == 0: a row with no key and no sink, all zero).
inline void NormaliseRows(const AttentionKernels& kn, float* o, int d, int r0, int n,
                          const Workspace& ws) {
  for (int i = r0; i < r0 + n; ++i) {
    float* row = o + static_cast<ptrdiff_t>(i) * d;
    if (ws.l[i] != 0.0f) {
      kn.scale_row(row, row, d, 1.0f / ws.l[i]);
    } else {
      std::memset(row, 0, sizeof(float) * d);
    }
  }
}

// The in-place output of a block, before P.V of its only chunk: the output
// rows of the tiles whose P.V does not start with a full-tile write (no keys
// in the chunk, or row by row) cleared. The others' first segment writes
// without reading (the P.V kernels' `accumulate` = false).
inline void ClearUnwrittenTiles(int tiles, int c0, int c1, float* o, int d, const Workspace& ws) {
  for (int tile = 0; tile < tiles; ++tile) {
    bool written = false;  // by a segment's full-tile gemm
    const Range* segs = &ws.tile_segments[static_cast<size_t>(tile) * kTileRows];
    for (int n = 0; n < ws.tile_segment_count[tile]; ++n) {
      const Range seg = Intersect(segs[n], c0, c1);
      written = written || seg.begin < seg.end;
    }
    if (written && !ws.tile_rowwise[tile]) continue;
    std::memset(o + static_cast<ptrdiff_t>(ws.tile_row0[tile]) * d, 0,
                sizeof(float) * ws.tile_rows[tile] * d);
  }
}

// Calls seg_fn(seg, accumulate, scale) for each of a register tile's merged
// key segments within [c0, c1), in order: accumulate is `accumulate` for the
// first and true after it; `scale` goes with the last only (nullptr to the
// others). Returns whether the last got it (`scale` != nullptr and the tile
// has keys in the chunk).
template <typename SegFn>
inline bool ForTileSegments(int tile, int c0, int c1, bool accumulate, const float* scale,
                            const Workspace& ws, SegFn&& seg_fn) {
  const Range* segs = &ws.tile_segments[static_cast<size_t>(tile) * kTileRows];
  int last = -1;
  for (int n = 0; n < ws.tile_segment_count[tile]; ++n) {
    const Range seg = Intersect(segs[n], c0, c1);
    if (seg.begin < seg.end) last = n;
  }
  for (int n = 0; n <= last; ++n) {
    const Range seg = Intersect(segs[n], c0, c1);
    if (seg.begin >= seg.end) continue;
    seg_fn(seg, accumulate, n == last ? scale : nullptr);
    accumulate = true;
  }
  return last >= 0 && scale != nullptr;
}

// P.V of a chunk over every register tile; pv(tile, j, cols, scale) runs one
// tile's P.V for output columns [j, j + cols) and, given `scale` (1 / l of
// the tile's rows, in place only), multiplies the rows by it in their last
// write, returning whether it did. In place: tile by tile, each output row
// written once, front to back, by one pv over all its columns (a cold row
// written 64 bytes at a time across the tiles stalls on every line; the V
// slabs come from L2), and divided by its final l in that write or right
// after (NormaliseRows), while in L1. Otherwise `cols` columns (a multiple
// of 16 dividing d) at a time: their V slabs stay in L1 across the tiles.
template <typename Pv>
inline void RunPv(const AttentionKernels& kn, bool in_place, int tiles, int d, float* o,
                  const Workspace& ws, Pv&& pv, int cols = kTileCols) {
  if (!in_place) {
    for (int j = 0; j < d; j += cols)
      for (int tile = 0; tile < tiles; ++tile) pv(tile, j, cols, nullptr);
    return;
  }
  for (int tile = 0; tile < tiles; ++tile) {
    const int r0 = ws.tile_row0[tile], n = ws.tile_rows[tile];
    float inv[kTileRows];
    bool fuse = true;  // l == 0 (no key, no sink) is a zero row: NormaliseRows
    for (int i = 0; i < n; ++i) {
      fuse = fuse && ws.l[r0 + i] != 0.0f;
      inv[i] = fuse ? 1.0f / ws.l[r0 + i] : 0.0f;
    }
    if (!pv(tile, 0, d, fuse ? inv : nullptr)) NormaliseRows(kn, o, d, r0, n, ws);
  }
}

// Normalised outputs (and LSEs) of the block's rows. With `in_place` the
// outputs are already in pr.out (NormaliseRows): only the LSEs.
inline void WriteRows(const AttentionKernels& kn, const SeqProblem& pr, int g, int row0, int rows,
                      int ratio, int hq, int d, const float* o, const Workspace& ws,
                      bool in_place = false) {
  for (int i = 0; i < rows; ++i) {
    const int t = (row0 + i) / ratio;
    const int h = g * ratio + (row0 + i) % ratio;
    float* dst = pr.out + (static_cast<ptrdiff_t>(t) * hq + h) * d;
    // l == 0 only for a row with no key and no sink: the result is 0. A NaN l
    // fails the test and propagates.
    if (in_place) {
    } else if (ws.l[i] != 0.0f) {
      kn.scale_row(dst, o + static_cast<ptrdiff_t>(i) * d, d, 1.0f / ws.l[i]);
    } else {
      std::memset(dst, 0, sizeof(float) * d);
    }
    if (pr.lse != nullptr)
      pr.lse[static_cast<ptrdiff_t>(t) * hq + h] =
          ws.l[i] != 0.0f ? ws.m[i] + std::log(ws.l[i]) : -std::numeric_limits<float>::infinity();
  }
}

// Row key ranges, register tiles and their merged key segments, and the
// running max / denominator of rows [row0, row0 + rows) of KV head g (the sink
// enters as a key with logit S_h and no value: m starts at S_h with
// denominator exp(S_h - m) = 1). Returns the block's key hull.
inline Range SetUpBlock(const AttentionShape& shape, const SeqProblem& pr, int g, int row0,
                        int rows, int tiles, Workspace& ws) {
  const int ratio = shape.q_heads / shape.kv_heads;

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
  for (int i = 0; i < rows; ++i) {
    const int h = g * ratio + (row0 + i) % ratio;
    ws.m[i] = shape.sinks != nullptr ? shape.sinks[h] : -std::numeric_limits<float>::infinity();
    // exp(S_h - m) with m = S_h: 1, but NaN for a +inf sink (exp(inf - inf)),
    // so that it shows in the row instead of an output of 0 and LSE +inf
    // (which a merge would take for an empty part). As the CUDA kernels.
    ws.l[i] = shape.sinks == nullptr ? 0.0f
              : shape.sinks[h] == std::numeric_limits<float>::infinity()
                  ? std::numeric_limits<float>::quiet_NaN()
                  : 1.0f;
    ws.has_output[i] = 0;
  }
  return hull;
}

// The FP32 block driver (attention_fp32.cc): rows [row0, row1) of KV head g
// of one problem; row i is token i / ratio, query head g * ratio + i % ratio.
void RunBlock(const AttentionKernels& kn, const AttentionShape& shape, const SeqProblem& pr, int g,
              int row0, int row1, const Blocking& blocking, Workspace& ws);

// RunBlock of the BF16 kernels (attention_bf16.cc): rows [row0, row1) of KV
// head g of a problem whose q_bf16 is set; fp32 supplies the softmax helpers.
void RunBlockBf16(const Bf16AttentionKernels& kb, const AttentionKernels& fp32,
                  const AttentionShape& shape, const SeqProblem& pr, int g, int row0, int row1,
                  const Blocking& blocking, Workspace& ws);

// RunBlockBf16 with AMX-BF16 tiles (attention_amx.cc; only after
// AmxKernelsAvailable()). Same inputs, same error bound; a block whose band
// holds a non-finite value runs RunBlockBf16 instead.
// MXFP8 rows (pr.mx) too: decoded 16 at a time straight into the tile layout,
// once MxfpValuesFinite(pr, g, d) (no NaN code or NaN scale in any value
// vector of KV head g; otherwise the FP32 RunBlock keeps a NaN in the rows
// that see it). BF16 rows (pr.mx.bf16) too, packed straight from the rows; a
// non-finite value in the band runs RunBlockBf16 on a BF16 copy of them.
bool MxfpValuesFinite(const SeqProblem& pr, int g, int d);
void RunBlockAmx(const Bf16AttentionKernels& kb, const AttentionKernels& fp32,
                 const AttentionShape& shape, const SeqProblem& pr, int g, int row0, int row1,
                 const Blocking& blocking, Workspace& ws);

}  // namespace swa::cpu::attn
