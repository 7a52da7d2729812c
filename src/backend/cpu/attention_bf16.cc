// The BF16 attention driver: RunBlock (attention_fp32.cc) for problems whose
// queries arrive in BF16 and whose keys and values are exact in BF16 (an MXFP8
// or BF16 ring). Scores are scale * (q . k) with exact products and FP32 sums;
// the online softmax is the FP32 one; P is rounded to BF16 (nearest even) for
// P.V, which adds less than 2^-8 * max|v| per output element
// (docs/cpu_attention.md, "Paths").
#include <algorithm>
#include <cstring>

#include "backend/cpu/attention_block.h"

namespace swa::cpu::attn {

namespace {
// BF16 K^T panels are half the bytes of FP32 ones: a whole 512-deep panel
// (16 KiB) stays in L1.
constexpr int kBf16DepthSplit = 2 * kDepthSplit;
// Whether the scores of a register tile's n keys in a K^T panel are cheaper
// from their rows (gemm_qk_rows) than from the whole panel (gemm_qk). Per row
// and depth D, the panel costs D / 2 vdpbf16ps whatever n is; the rows cost
// n * D / 32, plus one horizontal sum per score (about 6 cycles). Taken below
// two thirds of the panel's cost: n <= 7 at D = 512, 2 at D = 64.
inline bool EdgeByRows(int n, int d) { return n * (d / 32 + 6) * 3 <= d; }

}  // namespace

void RunBlockBf16(const Bf16AttentionKernels& kb, const AttentionKernels& kn,
                  const AttentionShape& shape, const SeqProblem& pr, int g, int row0, int row1,
                  const Blocking& blocking, Workspace& ws) {
  const int d = shape.head_dim;
  const int hq = shape.q_heads;
  const int ratio = shape.q_heads / shape.kv_heads;
  const ptrdiff_t ldkv = static_cast<ptrdiff_t>(shape.kv_heads) * d;
  const int rows = row1 - row0;
  const int tiles = CutTiles(rows, ws);
  const Range hull = SetUpBlock(shape, pr, g, row0, rows, tiles, ws);

  bool q_in_place = false;
  const uint16_t* q = BlockQueryBf16(shape, pr, g, row0, rows, ws, &q_in_place);

  // In place or through the O buffer (no copy, no final pass over the rows
  // for an MQA decode step: SetUpOutput).
  const BlockOutput out = SetUpOutput(pr, hull, row0, rows, d, q_in_place, blocking, ws);
  const int span = out.span, n_chunks = out.n_chunks;
  const bool in_place = out.in_place;
  float* const o = out.o;

  if (n_chunks > 0) {
    const int chunk = RoundUp(CeilDiv(span, n_chunks), kTileCols);
    uint16_t* kt = U16(ws.kt16, static_cast<size_t>(chunk) * d);
    uint16_t* vp = U16(ws.v16, static_cast<size_t>(chunk) * d);
    float* s = ws.s.Get(static_cast<size_t>(rows) * chunk);
    uint16_t* p16 = U16(ws.p16, static_cast<size_t>(rows) * chunk);
    // FP32 tiles, or BF16 ones (k16 / v16) that pack without converting.
    const ptrdiff_t head = static_cast<ptrdiff_t>(g) * d;
    const bool tile16 = pr.k16 != nullptr;

    for (int c0 = hull.begin; c0 < hull.end; c0 += chunk) {
      const int c1 = std::min(c0 + chunk, hull.end);
      const int lds = RoundUp(c1 - c0, kTileCols);
      if (tile16) {
        kb.pack_kt16(pr.k16 + head + c0 * ldkv, ldkv, c1 - c0, d, kt);
        kb.pack_v16(pr.v16 + head + c0 * ldkv, ldkv, c1 - c0, d, vp);
      } else {
        kb.pack_kt(pr.k + head + c0 * ldkv, ldkv, c1 - c0, d, kt);
        kb.pack_v(pr.v + head + c0 * ldkv, ldkv, c1 - c0, d, vp);
      }

      for (int d0 = 0; d0 < d; d0 += kBf16DepthSplit) {
        const int depth = std::min(kBf16DepthSplit, d - d0);
        for (int p = 0; p < lds; p += kTileCols) {
          for (int tile = 0; tile < tiles; ++tile) {
            const Range th = Intersect(ws.tile_hull[tile], c0 + p, c0 + p + kTileCols);
            if (th.begin >= th.end) continue;
            const int r0 = ws.tile_row0[tile];
            // A panel the tile's keys meet in a few columns only (a band's
            // edge): those keys' scores from their rows, the whole depth at
            // once. Scores outside the hull are never read.
            const int n = th.end - th.begin;
            if (EdgeByRows(n, d)) {
              if (d0 > 0) continue;
              float* st = s + static_cast<ptrdiff_t>(r0) * lds + (th.begin - c0);
              const uint16_t* qt = q + static_cast<ptrdiff_t>(r0) * d;
              if (tile16)
                kb.gemm_qk_rows16(ws.tile_rows[tile], n, d / 2, qt, d,
                                  pr.k16 + head + th.begin * ldkv, ldkv, shape.scale, st, lds);
              else
                kb.gemm_qk_rows(ws.tile_rows[tile], n, d / 2, qt, d,
                                pr.k + head + th.begin * ldkv, ldkv, shape.scale, st, lds);
              continue;
            }
            kb.gemm_qk(ws.tile_rows[tile], depth / 2, q + static_cast<ptrdiff_t>(r0) * d + d0, d,
                       kt + static_cast<ptrdiff_t>(p) * d + d0 * kTileCols, shape.scale,
                       s + static_cast<ptrdiff_t>(r0) * lds + p, lds, d0 > 0);
          }
        }
      }

      OnlineSoftmax(kn, shape, rows, c0, c1, lds, 1.0f, s, o, d, ws);

      // P in BF16 over each row's tile hull (zeros outside the row's keys).
      for (int i = 0; i < rows; ++i) {
        const Range th = Intersect(ws.tile_hull[ws.row_tile[i]], c0, c1);
        if (th.begin >= th.end) continue;
        const ptrdiff_t at = static_cast<ptrdiff_t>(i) * lds + (th.begin - c0);
        kb.to_bf16(s + at, th.end - th.begin, p16 + at);
      }

      MarkRowwiseTiles(
          tiles, c0, c1,
          [&](int key) {
            return tile16 ? NonFiniteRow(pr.v16 + head + key * ldkv, d)
                          : NonFiniteRow(pr.v + head + key * ldkv, d);
          },
          ws);
      if (in_place) ClearUnwrittenTiles(tiles, c0, c1, o, d, ws);
      // O += P V over each tile's merged key segments. In place, a tile's
      // first segment writes its rows (ClearUnwrittenTiles cleared the rows of
      // the others) and its last divides them by l (RunPv).
      const ptrdiff_t slab = PairSlabStride(c1 - c0);
      auto pv = [&](int tile, int j, int cols, const float* scale) {
        const int r0 = ws.tile_row0[tile];
        const uint16_t* vj = vp + (j / kTileCols) * slab;
        if (ws.tile_rowwise[tile]) {  // a non-finite value not every row sees
          for (int i = r0; i < r0 + ws.tile_rows[tile]; ++i) {
            const Range rk = Intersect(ws.row_keys[i], c0, c1);
            if (rk.begin >= rk.end) continue;
            kb.gemm_pv(1, rk.begin - c0, rk.end - c0, p16 + static_cast<ptrdiff_t>(i) * lds, lds,
                       vj, slab, cols, o + static_cast<ptrdiff_t>(i) * d + j, d, true, nullptr);
          }
          return false;
        }
        return ForTileSegments(tile, c0, c1, !in_place, scale, ws,
                               [&](Range seg, bool accumulate, const float* seg_scale) {
                                 kb.gemm_pv(ws.tile_rows[tile], seg.begin - c0, seg.end - c0,
                                            p16 + static_cast<ptrdiff_t>(r0) * lds, lds, vj, slab,
                                            cols, o + static_cast<ptrdiff_t>(r0) * d + j, d,
                                            accumulate, seg_scale);
                               });
      };
      RunPv(kn, in_place, tiles, d, o, ws, pv);
    }
  }

  WriteRows(kn, pr, g, row0, rows, ratio, hq, d, o, ws, in_place);
}

}  // namespace swa::cpu::attn
