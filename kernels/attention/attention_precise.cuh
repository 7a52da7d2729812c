// The precise attention kernel: FP32 FMA and accurate expf throughout, for FP32
// outputs and FP32 storage (the 1e-5 of docs/semantics.md "Error budgets"). 8 warps x 2 query rows; a
// lane owns dims lane + 32c. Key tiles of kKeys rows (32, or 16 in the small
// variant at D 512) are dequantised into FP32 shared memory once per CTA. Each
// row reads only the keys of its own band, so a non-finite value outside it
// never reaches its output.
#pragma once

#include "kernels/attention/attention_common.cuh"
#include "kernels/attention/attention_shapes.h"

namespace swa::kernels {

template <int D, bool kStaged, int kKeys, KvDecode F>
__global__ void __launch_bounds__(PreciseShape<kKeys>::kThreads, PreciseShape<kKeys>::MinBlocks(D))
    PreciseAttentionKernel(AttentionParams p) {
  using S = PreciseShape<kKeys>;
  constexpr int kC = D / 32;
  extern __shared__ float4 smem_f4[];
  float* k_tile = reinterpret_cast<float*>(smem_f4);
  float* v_tile = p.shared_kv ? k_tile : k_tile + S::kKeys * D;
  __shared__ int band[2];

  CtaSeq<kStaged> cta;
  if (!cta.Begin(p, S::kRows)) return;  // whole CTA: no barrier reached yet
  const SeqKeys<kStaged>& sk = cta.sk;
  const int32_t row0 = cta.row0, group = cta.group, g = cta.g, n_rows = cta.n_rows;

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  if (threadIdx.x == 0) {
    band[0] = 0x7fffffff;
    band[1] = 0;
  }
  __syncthreads();

  float q[S::kRowsPerWarp][kC], o[S::kRowsPerWarp][kC], m[S::kRowsPerWarp], l[S::kRowsPerWarp];
  KeyRange kr[S::kRowsPerWarp];
#pragma unroll
  for (int rr = 0; rr < S::kRowsPerWarp; ++rr) {
    const int32_t r = row0 + warp * S::kRowsPerWarp + rr;
    kr[rr] = {0, 0};
    m[rr] = kNegInf;
    l[rr] = 0;
#pragma unroll
    for (int c = 0; c < kC; ++c) o[rr][c] = q[rr][c] = 0;
    if (r >= n_rows) continue;
    const QueryRow qr = QueryRowOf(r, group, g);
    kr[rr] = sk.TokenKeys(p, qr.token);
    const int64_t t = int64_t(sk.s.token_offset) + qr.token;
    const int64_t elem0 = (t * p.q_heads + qr.head) * D;
    if (p.rope.on()) {
#pragma unroll
      for (int c = 0; c < kC; ++c)
        q[rr][c] = LoadQueryDim(p, elem0, lane + 32 * c, p.rope.TokenRow(t));
    } else if (p.q_dtype == Dtype::kFp32) {
      const float* qs = static_cast<const float*>(p.q) + elem0;
#pragma unroll
      for (int c = 0; c < kC; ++c) q[rr][c] = qs[lane + 32 * c];
    } else {
      const uint16_t* qs = static_cast<const uint16_t*>(p.q) + elem0;
#pragma unroll
      for (int c = 0; c < kC; ++c) q[rr][c] = __uint_as_float(uint32_t(qs[lane + 32 * c]) << 16);
    }
    if (p.sinks != nullptr) {
      m[rr] = p.sinks[qr.head];
      l[rr] = SinkStartSum(m[rr]);  // exp(S_h - m) with m = S_h
    }
    if (lane == 0 && kr[rr].end > kr[rr].begin) {
      atomicMin(&band[0], kr[rr].begin);
      atomicMax(&band[1], kr[rr].end);
    }
  }
  __syncthreads();
  const int32_t band_lo = band[0];
  const int32_t band_hi = band[1];

  for (int32_t k0 = band_lo; k0 < band_hi; k0 += S::kKeys) {
    __syncthreads();  // the previous tile is consumed
    constexpr int kChunks = S::kKeys * (D / 8);
    for (int idx = threadIdx.x; idx < kChunks; idx += S::kThreads) {
      const int kk = idx / (D / 8);
      const int e = (idx % (D / 8)) * 8;
      const int32_t key = k0 + kk;
      float kv[8];
      const bool in = key < band_hi;
      if (in) DequantAs8<F, D>(sk.Vector(p, key, g), p.format, e, kv);
#pragma unroll
      for (int j = 0; j < 8; ++j) k_tile[kk * D + e + j] = in ? kv[j] : 0.0f;
      if (!p.shared_kv) {
        if (in) DequantAs8<F, D>(sk.Vector(p, key, p.kv_heads + g), p.format, e, kv);
#pragma unroll
        for (int j = 0; j < 8; ++j) v_tile[kk * D + e + j] = in ? kv[j] : 0.0f;
      }
    }
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < S::kRowsPerWarp; ++rr) {
      const int32_t lo = max(kr[rr].begin, k0);
      const int32_t hi = min(kr[rr].end, k0 + S::kKeys);
      for (int32_t key = lo; key < hi; ++key) {
        const float* kv = k_tile + (key - k0) * D;
        float dot = 0;
#pragma unroll
        for (int c = 0; c < kC; ++c) dot = fmaf(q[rr][c], kv[lane + 32 * c], dot);
        const float z = CappedScore(p, WarpSum(dot) * p.scale);
        // -inf scores weigh 0 even before the first finite key (softmax_stats.h).
        const OnlineSoftmaxStep u = OnlineSoftmaxUpdate(m[rr], z);
        l[rr] = l[rr] * u.rescale + u.p;
        const float* vv = v_tile + (key - k0) * D;
#pragma unroll
        for (int c = 0; c < kC; ++c) o[rr][c] = fmaf(u.p, vv[lane + 32 * c], o[rr][c] * u.rescale);
        m[rr] = u.m;
      }
    }
  }

  const bool derotate = p.rope.on() && p.rope.derotate_output;
  // De-rotation reads the pair partner from another lane: the warp's rows go
  // through shared memory (the K tile, free once every warp has finished).
  float* o_s = k_tile + warp * S::kRowsPerWarp * D;
  if (derotate) __syncthreads();
#pragma unroll
  for (int rr = 0; rr < S::kRowsPerWarp; ++rr) {
    // The row's indices again, rather than live registers through the key loop.
    const int32_t r = row0 + warp * S::kRowsPerWarp + rr;
    if (r >= n_rows) continue;
    const QueryRow qr = QueryRowOf(r, group, g);
    const int64_t t = int64_t(sk.s.token_offset) + qr.token;
    const int64_t elem0 = (t * p.q_heads + qr.head) * D;
    if (p.lse != nullptr && lane == 0) p.lse[t * p.q_heads + qr.head] = RowLse(m[rr], l[rr]);
    const float inv = l[rr] != 0.0f ? 1.0f / l[rr] : 0.0f;  // NaN l (a +inf sink): NaN
    if (!derotate) {
#pragma unroll
      for (int c = 0; c < kC; ++c) StoreOut(p, elem0 + lane + 32 * c, o[rr][c] * inv);
      continue;
    }
    float* row = o_s + rr * D;
#pragma unroll
    for (int c = 0; c < kC; ++c) row[lane + 32 * c] = o[rr][c] * inv;
    __syncwarp();
#pragma unroll
    for (int c = 0; c < kC; ++c)
      StoreOut(p, elem0 + lane + 32 * c,
               RopeRotatedDim(p.rope, uint32_t(lane + 32 * c), p.rope.TokenRow(t), 1.0f, -1.0f,
                              [&](uint32_t d) { return row[d]; }));
  }
}

}  // namespace swa::kernels
