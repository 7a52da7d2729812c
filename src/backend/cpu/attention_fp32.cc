// The FP32 block driver (RunBlock): rows of one KV head of one problem, run
// as S = Q K^T over the keys inside the block's band, masked and exponentiated
// per row (online softmax across key chunks), then O += P V, all through an
// AttentionKernels table. K^T panels and V slabs are packed (MXFP8 and BF16
// rows decoded or widened on the way) one key chunk at a time, and the next KV
// head's block is prefetched while this one's GEMMs run. attention.cc picks
// the kernels and hands it the blocks.
#include <algorithm>
#include <cstring>

#include "backend/cpu/attention_block.h"
#include "codec/codec.h"

namespace swa::cpu::attn {
namespace {

// n rows of d floats at src (ld apart) into 16-column slabs: row r's columns
// [j, j + 16) at dst + (j / 16) * slab + r * 16.
void ToSlabs(const float* src, ptrdiff_t ld, int n, int d, float* dst, ptrdiff_t slab) {
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < d; j += kTileCols)
      std::memcpy(dst + (j / kTileCols) * slab + r * kTileCols, src + r * ld + j,
                  sizeof(float) * kTileCols);
}

// Rows [r0, r0 + n) of an MXFP8 (or BF16: pr.mx.bf16) problem's KV head g
// (the vectors at `offset` in each row) decoded into n rows of d floats.
void DecodeMxfpRows(const SeqProblem& pr, size_t offset, int g, int r0, int n, int d, float* dst) {
  const codec::RowKernels& codec = codec::ActiveKernels();
  for (int r = 0; r < n; ++r) {
    const uint8_t* row = pr.mx.rows[r0 + r];
    float* out = dst + static_cast<ptrdiff_t>(r) * d;
    if (row == nullptr) {
      std::memset(out, 0, sizeof(float) * d);
    } else if (pr.mx.bf16) {
      codec.bf16_to_f32(reinterpret_cast<const uint16_t*>(
                            row + offset + static_cast<size_t>(g) * pr.mx.vec_bytes),
                        static_cast<uint32_t>(d), out);
    } else {
      codec.mxfp8_decode_f32(row + offset + static_cast<size_t>(g) * pr.mx.vec_bytes,
                             static_cast<uint32_t>(d), out);
    }
  }
}

// Lines NextHeadPrefetch asks for per register tile's GEMM call (~60 calls
// of a gpt-oss-like block ask for its ~900 lines).
constexpr int kPrefetchLinesPerTile = 16;

// What the block of KV head g + 1 reads first (its K and V vectors in rows
// [r0, r1), its query rows) and writes (its output rows), asked for a few
// lines at a time (Step) while head g's GEMMs run, when that block is the
// next task (this block holds all of the problem's rows). The ring rows are
// cold and a KV head's vectors are a few lines among many in each: no
// hardware prefetcher follows them, and the next block would wait on every
// panel; a GQA decode block (48 x 133 x 64 for gpt-oss-like) is short enough
// that those waits were a tenth of its time.
class NextHeadPrefetch {
 public:
  NextHeadPrefetch(const AttentionShape& shape, const SeqProblem& pr, int g, int r0, int r1,
                   bool whole_problem)
      : pr_(pr) {
    if (!whole_problem || g + 1 >= shape.kv_heads || r0 >= r1) return;
    const int d = shape.head_dim;
    const int ratio = shape.q_heads / shape.kv_heads;
    if (pr.mx.rows != nullptr) {
      const size_t bytes = pr.mx.bf16 ? sizeof(uint16_t) * d : pr.mx.vec_bytes;
      const size_t head = static_cast<size_t>(g + 1) * pr.mx.vec_bytes;
      k_ = pr.mx.k_offset + head;
      v_ = pr.mx.v_offset + head;
      vecs_ = pr.mx.k_offset == pr.mx.v_offset ? 1 : 2;
      lines_ = static_cast<int>((bytes + 63) / 64);
    } else {
      ldkv_ = static_cast<ptrdiff_t>(shape.kv_heads) * d;
      k_ = v_ = static_cast<size_t>(g + 1) * d;
      vecs_ = pr.k == pr.v ? 1 : 2;
      lines_ = static_cast<int>(sizeof(float) * d / 64);
    }
    row_ = r0;
    end_ = r1;
    q_ = pr.q + static_cast<ptrdiff_t>(g + 1) * ratio * d;
    o_ = pr.out + static_cast<ptrdiff_t>(g + 1) * ratio * d;
    token_stride_ = static_cast<ptrdiff_t>(shape.q_heads) * d;
    token_lines_ = static_cast<int>(sizeof(float) * ratio * d / 64);
    tokens_ = pr.n_tokens;
  }
  // Asks for about n more lines.
  void Step(int n) {
    for (; n > 0 && row_ < end_; n -= vecs_ * lines_, ++row_) {
      const uint8_t *k, *v;
      if (pr_.mx.rows != nullptr) {
        const uint8_t* row = pr_.mx.rows[row_];
        if (row == nullptr) continue;
        k = row + k_;
        v = row + v_;
      } else {
        k = reinterpret_cast<const uint8_t*>(pr_.k + row_ * ldkv_ + k_);
        v = reinterpret_cast<const uint8_t*>(pr_.v + row_ * ldkv_ + v_);
      }
      for (int l = 0; l < lines_; ++l) {
        __builtin_prefetch(k + 64 * l, 0, 2);
        if (vecs_ == 2) __builtin_prefetch(v + 64 * l, 0, 2);
      }
    }
    for (; n > 0 && token_ < tokens_; n -= 2 * token_lines_, ++token_) {
      const float* q = q_ + token_ * token_stride_;
      const float* o = o_ + token_ * token_stride_;
      for (int l = 0; l < token_lines_; ++l) {
        __builtin_prefetch(q + 16 * l, 0, 2);
        __builtin_prefetch(o + 16 * l, 1, 2);
      }
    }
  }

 private:
  const SeqProblem& pr_;
  size_t k_ = 0, v_ = 0;
  ptrdiff_t ldkv_ = 0, token_stride_ = 0;
  int vecs_ = 1, lines_ = 0, row_ = 0, end_ = 0;
  const float* q_ = nullptr;
  float* o_ = nullptr;
  int token_lines_ = 0, token_ = 0, tokens_ = 0;
};

// K^T panels and V slabs of keys [c0, c0 + n) of KV head g. V goes in
// 16-column slabs (slab stride chunk * 16): P.V then streams 64-byte rows
// instead of striding by Hkv * D floats, which aliases to a few L1 sets once
// D is 512. MXFP8 rows are decoded 16 at a time into a buffer of 16 x D
// floats that stays in cache and packed from there: no FP32 tile of the
// whole sequence is written or read back.
void PackChunk(const AttentionKernels& kn, const SeqProblem& pr, int g, int c0, int n, int d,
               ptrdiff_t ldkv, float* kt, float* vs, ptrdiff_t slab, Workspace& ws) {
  if (pr.mx.rows == nullptr) {
    const ptrdiff_t first = static_cast<ptrdiff_t>(g) * d + c0 * ldkv;
    kn.pack_kt(pr.k + first, ldkv, n, d, kt);
    ToSlabs(pr.v + first, ldkv, n, d, vs, slab);
    return;
  }
  float* buf = ws.rows.Get(static_cast<size_t>(kTileCols) * d);
  const bool shared = pr.mx.k_offset == pr.mx.v_offset;
  for (int p0 = 0; p0 < n; p0 += kTileCols) {
    const int m = std::min(kTileCols, n - p0);
    if (pr.mx.bf16 && kn.pack_kt_bf16 != nullptr) {
      // BF16 rows widened straight into the panel and the slabs.
      const uint8_t* const* rows = pr.mx.rows + c0 + p0;
      const size_t head = static_cast<size_t>(g) * pr.mx.vec_bytes;
      kn.pack_kt_bf16(rows, pr.mx.k_offset + head, m, d, kt + static_cast<ptrdiff_t>(p0) * d);
      kn.slabs_bf16(rows, pr.mx.v_offset + head, m, d, vs + p0 * kTileCols, slab);
      continue;
    }
    DecodeMxfpRows(pr, pr.mx.k_offset, g, c0 + p0, m, d, buf);
    kn.pack_kt(buf, d, m, d, kt + static_cast<ptrdiff_t>(p0) * d);
    if (!shared) DecodeMxfpRows(pr, pr.mx.v_offset, g, c0 + p0, m, d, buf);
    ToSlabs(buf, d, m, d, vs + p0 * kTileCols, slab);
  }
}

}  // namespace

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
  const Range hull = SetUpBlock(shape, pr, g, row0, rows, tiles, ws);

  // Q, pre-scaled. With one KV head the block's rows are consecutive rows of
  // pr.q (row i is (token, head) = i / Hq, i % Hq): they are read in place and
  // the softmax applies the scale to the raw scores instead (no pass of its
  // own).
  const bool q_in_place = shape.kv_heads == 1;
  const float* q = pr.q + static_cast<ptrdiff_t>(row0) * d;
  if (!q_in_place) {
    float* qs = ws.q.Get(static_cast<size_t>(rows) * d);
    for (int i = 0; i < rows; ++i) {
      const int t = (row0 + i) / ratio;
      const int h = g * ratio + (row0 + i) % ratio;
      kn.scale_row(qs + static_cast<ptrdiff_t>(i) * d,
                   pr.q + (static_cast<ptrdiff_t>(t) * hq + h) * d, d, shape.scale);
    }
    q = qs;
  }

  // In place or through the O buffer (no copy, no final pass over the rows
  // for an MQA decode step: SetUpOutput).
  const BlockOutput out = SetUpOutput(pr, hull, row0, rows, d, q_in_place, blocking, ws);
  const int span = out.span, n_chunks = out.n_chunks;
  const bool in_place = out.in_place;
  float* const o = out.o;

  NextHeadPrefetch next_head(shape, pr, g, hull.begin, hull.end,
                             row0 == 0 && row1 == pr.n_tokens * ratio);
  if (n_chunks > 0) {
    const int chunk = RoundUp(CeilDiv(span, n_chunks), kTileCols);
    float* kt = ws.kt.Get(static_cast<size_t>(chunk) * d);
    float* s = ws.s.Get(static_cast<size_t>(rows) * chunk);
    float* vs = ws.vs.Get(static_cast<size_t>(chunk) * d);
    const ptrdiff_t slab = static_cast<ptrdiff_t>(chunk) * kTileCols;

    for (int c0 = hull.begin; c0 < hull.end; c0 += chunk) {
      const int c1 = std::min(c0 + chunk, hull.end);
      const int lds = RoundUp(c1 - c0, kTileCols);
      PackChunk(kn, pr, g, c0, c1 - c0, d, ldkv, kt, vs, slab, ws);

      // Scores: only the 16-key panels that meet a tile's own keys. The K^T
      // panel stays hot while every tile of the block passes over it.
      for (int d0 = 0; d0 < d; d0 += kDepthSplit) {
        const int depth = std::min(kDepthSplit, d - d0);
        // The scores of one tile over one panel.
        auto panel = [&](int tile, int p) {
          const Range th = Intersect(ws.tile_hull[tile], c0 + p, c0 + p + kTileCols);
          if (th.begin >= th.end) return;
          next_head.Step(kPrefetchLinesPerTile);
          const int r0 = ws.tile_row0[tile];
          // A panel the tile's hull meets in one half only (its first or
          // last): that half alone. Scores outside the hull are never read.
          int col = 0;
          auto* gemm = kn.gemm;
          if (kn.gemm_half != nullptr) {
            const int half = c0 + p + kTileCols / 2;
            if (th.end <= half) {
              gemm = kn.gemm_half;
            } else if (th.begin >= half) {
              gemm = kn.gemm_half;
              col = kTileCols / 2;
            }
          }
          gemm(ws.tile_rows[tile], depth, q + static_cast<ptrdiff_t>(r0) * d + d0, d,
               kt + static_cast<ptrdiff_t>(p) * d + d0 * kTileCols + col, kTileCols,
               s + static_cast<ptrdiff_t>(r0) * lds + p + col, lds, d0 > 0);
        };
        if (kn.gemm2 == nullptr) {
          for (int p = 0; p < lds; p += kTileCols)
            for (int tile = 0; tile < tiles; ++tile) panel(tile, p);
          continue;
        }
        // Two adjacent panels that a tile's keys both meet in one Mx32 tile.
        for (int p = 0; p < lds; p += 2 * kTileCols) {
          for (int tile = 0; tile < tiles; ++tile) {
            const Range th = Intersect(ws.tile_hull[tile], c0 + p, c0 + p + 2 * kTileCols);
            if (p + kTileCols >= lds || th.begin >= c0 + p + kTileCols ||
                th.end <= c0 + p + kTileCols) {
              panel(tile, p);
              if (p + kTileCols < lds) panel(tile, p + kTileCols);
              continue;
            }
            const int r0 = ws.tile_row0[tile];
            const float* b0 = kt + static_cast<ptrdiff_t>(p) * d + d0 * kTileCols;
            next_head.Step(kPrefetchLinesPerTile);
            kn.gemm2(ws.tile_rows[tile], depth, q + static_cast<ptrdiff_t>(r0) * d + d0, d, b0,
                     b0 + kTileCols * d, kTileCols, s + static_cast<ptrdiff_t>(r0) * lds + p, lds,
                     d0 > 0);
          }
        }
      }

      OnlineSoftmax(kn, shape, rows, c0, c1, lds, q_in_place ? shape.scale : 1.0f, s, o, d, ws);
      MarkRowwiseTiles(
          tiles, c0, c1,
          [&](int key) {
            for (int j = 0; j < d; j += kTileCols)
              if (NonFiniteRow(vs + (j / kTileCols) * slab + (key - c0) * kTileCols, kTileCols))
                return true;
            return false;
          },
          ws);
      if (in_place) ClearUnwrittenTiles(tiles, c0, c1, o, d, ws);

      // O += P V over each tile's merged key segments. In place, a tile's
      // first segment writes its rows (ClearUnwrittenTiles cleared the rows of
      // the others) and, with a gemm_pv kernel, its last divides them by l
      // (RunPv).
      auto pv = [&](int tile, int j, int cols, const float* scale) {
        next_head.Step(kPrefetchLinesPerTile);
        const int r0 = ws.tile_row0[tile];
        const float* vj = vs + (j / kTileCols) * slab;
        // Columns [j, j + cols) of rows at c, keys from `key` on.
        auto gemm = [&](int m, int key, int k, const float* a, float* c, bool accumulate,
                        const float* row_scale) {
          const float* b = vj + (key - c0) * kTileCols;
          if (kn.gemm_pv != nullptr) {
            kn.gemm_pv(m, k, a, lds, b, slab, cols, c, d, accumulate, row_scale);
            return;
          }
          for (int jj = 0; jj < cols; jj += kTileCols)
            kn.gemm(m, k, a, lds, b + (jj / kTileCols) * slab, kTileCols, c + jj, d, accumulate);
        };
        if (ws.tile_rowwise[tile]) {  // a non-finite value not every row sees
          for (int i = r0; i < r0 + ws.tile_rows[tile]; ++i) {
            const Range rk = Intersect(ws.row_keys[i], c0, c1);
            if (rk.begin >= rk.end) continue;
            gemm(1, rk.begin, rk.end - rk.begin,
                 s + static_cast<ptrdiff_t>(i) * lds + (rk.begin - c0),
                 o + static_cast<ptrdiff_t>(i) * d + j, true, nullptr);
          }
          return false;
        }
        if (kn.gemm_pv == nullptr) scale = nullptr;
        return ForTileSegments(tile, c0, c1, !in_place, scale, ws,
                               [&](Range seg, bool accumulate, const float* seg_scale) {
                                 gemm(ws.tile_rows[tile], seg.begin, seg.end - seg.begin,
                                      s + static_cast<ptrdiff_t>(r0) * lds + (seg.begin - c0),
                                      o + static_cast<ptrdiff_t>(r0) * d + j, accumulate,
                                      seg_scale);
                               });
      };
      // With the Mx32 tiles (gemm2) two slabs at a time: one broadcast of P
      // feeds two FMAs, and 2 x chunk x 64 bytes of V still fit L1.
      const bool wide = kn.gemm2 != nullptr && kn.gemm_pv != nullptr;
      RunPv(kn, in_place, tiles, d, o, ws, pv, wide ? 2 * kTileCols : kTileCols);
    }
  }

  WriteRows(kn, pr, g, row0, rows, ratio, hq, d, o, ws, in_place);
}

}  // namespace swa::cpu::attn
