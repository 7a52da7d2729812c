// The tensor-core attention kernel: bf16 mma.sync m16n8k16 with FP32
// accumulation, FlashAttention-style online softmax over key tiles.
//
// CTA = kRows query rows (64, or 32/16 in the small variants) x the key band
// of those rows, kRows/16 x CS warps (CS = D/128 for D >= 256, else 1). Per
// key tile (kKeys rows, dequantised once to bf16 shared memory): S = Q K^T
// (warp = 16 rows x kKeys/CS keys) -> shared FP32; masked online softmax per
// row -> P (bf16) and row rescale factors; O += P V (warp = 16 rows x D/CS
// output columns, kept in registers).
//
// Non-finite stored values (docs/cuda_backend.md "Non-finite keys and
// values"): the MMA multiplies every row by every key of the tile, and 0 x NaN
// is NaN, so a NaN or Inf would reach rows whose band excludes its key. The
// tile holds such values as 0 and flags their keys; for the rows that do see a
// flagged key, its score is recomputed from the stored K (FP32) and its
// non-finite V values are added to the outputs outside the MMA.
#pragma once

#include "kernels/attention/attention_common.cuh"
#include "kernels/attention/attention_shapes.h"

namespace swa::kernels {

__device__ __forceinline__ void MmaBf16(float* c, uint32_t a0, uint32_t a1, uint32_t a2,
                                        uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t Ld32(const __nv_bfloat16* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

__device__ __forceinline__ uint32_t Pack2(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  return uint32_t(__bfloat16_as_ushort(lo)) | (uint32_t(__bfloat16_as_ushort(hi)) << 16);
}

// Stores eight dequantised values as bf16 with non-finite ones as 0; returns
// whether there was one.
__device__ __forceinline__ bool StoreFinite8(__nv_bfloat16* dst, const float* v, bool in) {
  bool bad = false;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const bool ok = in && isfinite(v[j]);
    bad |= in && !ok;
    dst[j] = __float2bfloat16_rn(ok ? v[j] : 0.f);
  }
  return bad;
}

__device__ __forceinline__ bool KeyFlagged(const unsigned long long* mask, int kk) {
  return (*mask >> kk) & 1ull;
}

// The score (before scale and cap) of key `key` for the query row at `q_row`
// (bf16 in shared memory) from the stored K values, non-finite ones included.
template <int D, bool kStaged, KvDecode F>
__device__ __forceinline__ float FullScore(const AttentionParams& p, const SeqKeys<kStaged>& sk,
                                           const __nv_bfloat16* q_row, int32_t key, int g) {
  const uint8_t* vec = sk.Vector(p, key, g);
  float dot = 0;
  for (int e = 0; e < D; e += 8) {
    float k[8];
    DequantAs8<F, D>(vec, p.format, e, k);
#pragma unroll
    for (int j = 0; j < 8; ++j)
      dot = fmaf(__bfloat162float(q_row[e + j]), __bfloat162float(__float2bfloat16_rn(k[j])), dot);
  }
  return dot;
}

// O += P V for the non-finite V values of the tile's flagged keys (the tile
// holds 0 there), for this thread's accumulator elements whose row sees the
// key: its rows rbase + gid (+ 8), columns obase + nt * 8 + tig * 2 (+ 1).
template <class S, bool kStaged, KvDecode F>
__device__ __forceinline__ void AddNonfiniteValues(
    const AttentionParams& p, const SeqKeys<kStaged>& sk, const unsigned long long* v_bad,
    const __nv_bfloat16* p_s, const int32_t* row_begin, const int32_t* row_end, int32_t k0,
    int rbase, int gid, int tig, int obase, int g, float (&o)[S::kOTiles][4]) {
  const int hv = S::kShared ? g : p.kv_heads + g;
  for (unsigned long long m = *v_bad; m != 0; m &= m - 1) {
    const int kk = __ffsll(static_cast<long long>(m)) - 1;
    const int32_t key = k0 + kk;
    bool vis[2];
    float pv[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = rbase + gid + 8 * h;
      vis[h] = key >= row_begin[r] && key < row_end[r];
      pv[h] = __bfloat162float(p_s[r * S::kPStride + kk]);
    }
    if (!vis[0] && !vis[1]) continue;
    const uint8_t* vec = sk.Vector(p, key, hv);
#pragma unroll
    for (int nt = 0; nt < S::kOTiles; ++nt) {
      float v[2];
      DequantAs2<F, S::kD>(vec, p.format, obase + nt * 8 + tig * 2, v);
#pragma unroll
      for (int c2 = 0; c2 < 2; ++c2) {
        const float x = v[c2];
        if (isfinite(x)) continue;
        if (vis[0]) o[nt][c2] += pv[0] * x;
        if (vis[1]) o[nt][2 + c2] += pv[1] * x;
      }
    }
  }
}

template <class S, bool kStaged, KvDecode F>
__global__ void __launch_bounds__(S::kThreads, kMmaMinBlocks<S>) MmaAttentionKernel(AttentionParams p) {
  constexpr int D = S::kD;
  constexpr bool kSharedKv = S::kShared;
  static_assert(S::kEpilogueFits);
  extern __shared__ float4 smem_f4[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(smem_f4);
  __nv_bfloat16* q_s = reinterpret_cast<__nv_bfloat16*>(smem);
  __nv_bfloat16* k_s = reinterpret_cast<__nv_bfloat16*>(smem + S::kQBytes);
  __nv_bfloat16* v_s =
      kSharedKv ? k_s : reinterpret_cast<__nv_bfloat16*>(smem + S::kQBytes + S::kKBytes);
  float* s_s = reinterpret_cast<float*>(smem + S::kQBytes + S::kKBytes + S::kVBytes);
  __nv_bfloat16* p_s = reinterpret_cast<__nv_bfloat16*>(reinterpret_cast<uint8_t*>(s_s) + S::kSBytes);
  float* row_m = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(p_s) + S::kPBytes);
  float* row_l = row_m + S::kRows;
  float* row_alpha = row_l + S::kRows;
  int32_t* row_begin = reinterpret_cast<int32_t*>(row_alpha + S::kRows);
  int32_t* row_end = row_begin + S::kRows;
  // Keys of a tile with a non-finite K / V value (bit kk): {K, V} masks for
  // even and odd tiles, so that clearing the next tile's needs no barrier.
  unsigned long long* bad_masks = reinterpret_cast<unsigned long long*>(row_end + S::kRows);

  CtaSeq<kStaged> cta;
  if (!cta.Begin(p, S::kRows)) return;  // whole CTA, before any barrier
  const SeqKeys<kStaged>& sk = cta.sk;
  const int32_t row0 = cta.row0, group = cta.group, g = cta.g, n_rows = cta.n_rows;

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int gid = lane >> 2;  // fragment row / column group
  const int tig = lane & 3;   // thread in group

  // Row state and the query tile (bf16).
  if (tid < S::kRows) {
    const int32_t r = row0 + tid;
    float m0 = kNegInf, l0 = 0;
    KeyRange kr{0, 0};
    if (r < n_rows) {
      const QueryRow qr = QueryRowOf(r, group, g);
      kr = sk.TokenKeys(p, qr.token);
      if (p.sinks != nullptr) {
        m0 = p.sinks[qr.head];
        l0 = SinkStartSum(m0);
      }
    }
    row_m[tid] = m0;
    row_l[tid] = l0;
    row_alpha[tid] = 1.0f;
    row_begin[tid] = kr.begin;
    row_end[tid] = kr.end;
    if (tid < 4) bad_masks[tid] = 0;
  }
  if (p.rope.on()) {
    // Rotated on load, one dim per thread and iteration (the pair partner
    // and the table entry are read per dim: few live values, little code).
#pragma unroll 1
    for (int idx = tid; idx < S::kRows * D; idx += S::kThreads) {
      const int rr = idx / D;
      const int e = idx % D;
      const int32_t r = row0 + rr;
      float v = 0;
      if (r < n_rows) {
        const QueryRow qr = QueryRowOf(r, group, g);
        const int64_t t = int64_t(sk.s.token_offset) + qr.token;
        v = LoadQueryDim(p, (t * p.q_heads + qr.head) * D, e, p.rope.TokenRow(t));
      }
      q_s[rr * S::kQStride + e] = __float2bfloat16_rn(v);
    }
  } else {
    for (int idx = tid; idx < S::kRows * (D / 8); idx += S::kThreads) {
      const int rr = idx / (D / 8);
      const int e = (idx % (D / 8)) * 8;
      const int32_t r = row0 + rr;
      float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      if (r < n_rows) {
        const QueryRow qr = QueryRowOf(r, group, g);
        LoadQuery8(p, ((int64_t(sk.s.token_offset) + qr.token) * p.q_heads + qr.head) * D + e, v);
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) q_s[rr * S::kQStride + e + j] = __float2bfloat16_rn(v[j]);
    }
  }
  __syncthreads();

  // The CTA's key band (rows are few; every thread scans them).
  int32_t band_lo = 0x7fffffff, band_hi = 0;
  for (int rr = 0; rr < S::kRows; ++rr)
    if (row_end[rr] > row_begin[rr]) {
      band_lo = min(band_lo, row_begin[rr]);
      band_hi = max(band_hi, row_end[rr]);
    }

  const int rg = warp % S::kRowGroups;  // row group: rows 16*rg ...
  const int cs = warp / S::kRowGroups;  // column slice
  const int rbase = rg * 16;
  float o[S::kOTiles][4];
#pragma unroll
  for (int nt = 0; nt < S::kOTiles; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0;

  for (int32_t k0 = band_lo; k0 < band_hi; k0 += S::kKeys) {
    __syncthreads();  // previous tile's K/V/P (and its masks) are consumed
    const int parity = ((k0 - band_lo) / S::kKeys) & 1;
    unsigned long long* k_bad = bad_masks + 2 * parity;
    unsigned long long* v_bad = k_bad + 1;
    if (tid == 0) bad_masks[2 * (parity ^ 1)] = bad_masks[2 * (parity ^ 1) + 1] = 0;  // next tile's
    for (int idx = tid; idx < S::kKeys * (D / 8); idx += S::kThreads) {
      const int kk = idx / (D / 8);
      const int e = (idx % (D / 8)) * 8;
      const int32_t key = k0 + kk;
      const bool in = key < band_hi;
      float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      if (in) DequantAs8<F, D>(sk.Vector(p, key, g), p.format, e, v);
      if (StoreFinite8(k_s + kk * S::kQStride + e, v, in)) {
        atomicOr(k_bad, 1ull << kk);
        if (kSharedKv) atomicOr(v_bad, 1ull << kk);
      }
      if (!kSharedKv) {
        if (in) DequantAs8<F, D>(sk.Vector(p, key, p.kv_heads + g), p.format, e, v);
        if (StoreFinite8(v_s + kk * S::kQStride + e, v, in)) atomicOr(v_bad, 1ull << kk);
      }
    }
    __syncthreads();
    const bool any_k_bad = *k_bad != 0, any_v_bad = *v_bad != 0;

    // S = Q K^T for rows rbase..+16, keys kbase..+kKeys/CS.
    {
      constexpr int kKeysPerWarp = S::kKeys / S::kColSplit;
      const int kbase = cs * kKeysPerWarp;
      float acc[S::kSTiles][4];
#pragma unroll
      for (int nt = 0; nt < S::kSTiles; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0;
#pragma unroll 4
      for (int kb = 0; kb < D; kb += 16) {
        const __nv_bfloat16* qa = q_s + (rbase + gid) * S::kQStride + kb + tig * 2;
        const uint32_t a0 = Ld32(qa), a1 = Ld32(qa + 8 * S::kQStride);
        const uint32_t a2 = Ld32(qa + 8), a3 = Ld32(qa + 8 * S::kQStride + 8);
#pragma unroll
        for (int nt = 0; nt < S::kSTiles; ++nt) {
          const __nv_bfloat16* kp = k_s + (kbase + nt * 8 + gid) * S::kQStride + kb + tig * 2;
          MmaBf16(acc[nt], a0, a1, a2, a3, Ld32(kp), Ld32(kp + 8));
        }
      }
#pragma unroll
      for (int nt = 0; nt < S::kSTiles; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = rbase + gid + 8 * h;
#pragma unroll
          for (int c2 = 0; c2 < 2; ++c2) {
            const int col = kbase + nt * 8 + tig * 2 + c2;
            const int32_t key = k0 + col;
            const bool vis = key >= row_begin[r] && key < row_end[r];
            s_s[r * S::kSStride + col] = vis ? CappedScore(p, acc[nt][2 * h + c2] * p.scale) : kNegInf;
          }
        }
      // A visible key with a non-finite K value: its score from the stored
      // values (the tile holds zeros there), like the CPU's. Rare: one rolled
      // pass over this thread's scores, rewriting its own elements.
      if (any_k_bad) {
#pragma unroll 1
        for (int i = 0; i < S::kSTiles * 4; ++i) {
          const int r = rbase + gid + 8 * ((i >> 1) & 1);
          const int col = kbase + (i >> 2) * 8 + tig * 2 + (i & 1);
          const int32_t key = k0 + col;
          if (key >= row_begin[r] && key < row_end[r] && KeyFlagged(k_bad, col))
            s_s[r * S::kSStride + col] =
                CappedScore(p, FullScore<D, kStaged, F>(p, sk, q_s + r * S::kQStride, key, g) *
                                   p.scale);
        }
      }
    }
    __syncthreads();

    // Online softmax, one warp per row.
    for (int r = warp; r < S::kRows; r += S::kWarps) {
      float sv[S::kKeys / 32];
      float mx = kNegInf;
#pragma unroll
      for (int c = 0; c < S::kKeys / 32; ++c) {
        sv[c] = s_s[r * S::kSStride + lane + 32 * c];
        mx = fmaxf(mx, sv[c]);
      }
      mx = WarpMax(mx);
      const float m_old = row_m[r];
      const float m_new = fmaxf(m_old, mx);
      float sum = 0;
#pragma unroll
      for (int c = 0; c < S::kKeys / 32; ++c) {
        const float pe = sv[c] == kNegInf ? 0.0f : __expf(sv[c] - m_new);
        const __nv_bfloat16 pb = __float2bfloat16_rn(pe);
        p_s[r * S::kPStride + lane + 32 * c] = pb;
        sum += __bfloat162float(pb);
      }
      sum = WarpSum(sum);
      if (lane == 0) {
        const float alpha = Rescale(m_old, m_new);
        row_alpha[r] = alpha;
        row_l[r] = row_l[r] * alpha + sum;
        row_m[r] = m_new;
      }
    }
    __syncthreads();

    // O = alpha * O + P V for rows rbase..+16, columns obase..+D/CS.
    {
      const int obase = cs * (D / S::kColSplit);
      const float al0 = row_alpha[rbase + gid], al1 = row_alpha[rbase + gid + 8];
#pragma unroll
      for (int nt = 0; nt < S::kOTiles; ++nt) {
        o[nt][0] *= al0;
        o[nt][1] *= al0;
        o[nt][2] *= al1;
        o[nt][3] *= al1;
      }
#pragma unroll
      for (int kb = 0; kb < S::kKeys; kb += 16) {
        const __nv_bfloat16* pa = p_s + (rbase + gid) * S::kPStride + kb + tig * 2;
        const uint32_t a0 = Ld32(pa), a1 = Ld32(pa + 8 * S::kPStride);
        const uint32_t a2 = Ld32(pa + 8), a3 = Ld32(pa + 8 * S::kPStride + 8);
        const __nv_bfloat16* vrow = v_s + (kb + tig * 2) * S::kQStride + obase + gid;
#pragma unroll
        for (int nt = 0; nt < S::kOTiles; ++nt) {
          const __nv_bfloat16* vp = vrow + nt * 8;
          const uint32_t b0 = Pack2(vp[0], vp[S::kQStride]);
          const uint32_t b1 = Pack2(vp[8 * S::kQStride], vp[9 * S::kQStride]);
          MmaBf16(o[nt], a0, a1, a2, a3, b0, b1);
        }
      }
      // The non-finite V values of flagged keys, for the rows that see them
      // (P of the others is exactly 0 and must not meet them).
      if (any_v_bad)
        AddNonfiniteValues<S, kStaged, F>(p, sk, v_bad, p_s, row_begin, row_end, k0, rbase, gid,
                                          tig, obase, g, o);
    }
  }
  __syncthreads();

  if (p.lse != nullptr && tid < S::kRows && row0 + tid < n_rows) {
    const QueryRow qr = QueryRowOf(row0 + tid, group, g);
    p.lse[(int64_t(sk.s.token_offset) + qr.token) * p.q_heads + qr.head] =
        RowLse(row_m[tid], row_l[tid]);
  }

  // Normalise and write this warp's 16 rows x D/CS columns; with de-rotation
  // they go through shared memory first (a dim's pair partner belongs to
  // another thread), then every thread rotates and stores whole dims.
  const bool derotate = p.rope.on() && p.rope.derotate_output;
  float* o_s = reinterpret_cast<float*>(smem);  // Q, K, V, S: no longer read
  const int obase = cs * (D / S::kColSplit);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int rr = rbase + gid + 8 * h;
    const int32_t r = row0 + rr;
    if (r >= n_rows) continue;
    const QueryRow qr = QueryRowOf(r, group, g);
    const int64_t elem0 = ((int64_t(sk.s.token_offset) + qr.token) * p.q_heads + qr.head) * D;
    const float lsum = row_l[rr];
    const float inv = lsum != 0.0f ? 1.0f / lsum : 0.0f;  // NaN l (a +inf sink): NaN
#pragma unroll
    for (int nt = 0; nt < S::kOTiles; ++nt) {
      const int col = obase + nt * 8 + tig * 2;
      if (derotate) {
        o_s[rr * D + col] = o[nt][2 * h] * inv;
        o_s[rr * D + col + 1] = o[nt][2 * h + 1] * inv;
      } else {
        StoreOut(p, elem0 + col, o[nt][2 * h] * inv);
        StoreOut(p, elem0 + col + 1, o[nt][2 * h + 1] * inv);
      }
    }
  }
  if (!derotate) return;
  __syncthreads();
  for (int idx = tid; idx < S::kRows * D; idx += S::kThreads) {
    const int rr = idx / D;
    const int e = idx % D;
    const int32_t r = row0 + rr;
    if (r >= n_rows) continue;
    const QueryRow qr = QueryRowOf(r, group, g);
    const int64_t elem0 = ((int64_t(sk.s.token_offset) + qr.token) * p.q_heads + qr.head) * D;
    const float* row = o_s + rr * D;
    const RopeCs* cs = p.rope.TokenRow(int64_t(sk.s.token_offset) + qr.token);
    StoreOut(p, elem0 + e,
             RopeRotatedDim(p.rope, uint32_t(e), cs, 1.0f, -1.0f, [&](uint32_t d) { return row[d]; }));
  }
}

}  // namespace swa::kernels
