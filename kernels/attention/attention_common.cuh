// Device helpers shared by the attention kernels: where a sequence's keys
// live, each query row's key range, and dequantisation of stored vectors.
#pragma once

#include <cuda_bf16.h>
#include <stdint.h>

#include "common/mxfp8_math.h"
#include "common/records.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/key_range.h"
#include "kernels/attention/softmax_stats.h"

namespace swa::kernels {

constexpr float kNegInf = -__builtin_huge_valf();

// The CTA's work item: sequence and first query row.
struct CtaWork {
  int32_t seq;
  int32_t row0;
  bool valid;
};

__device__ __forceinline__ CtaWork CtaWorkOf(const AttentionParams& p, int tile_rows) {
  CtaWork w;
  if (p.tiles != nullptr) {
    const int2 t = p.tiles[blockIdx.x];
    w.seq = t.x;
    w.row0 = t.y * tile_rows;
  } else {
    const int32_t group = p.q_heads / p.kv_heads;
    const int32_t per_seq = (p.max_seqlen_q * group + tile_rows - 1) / tile_rows;
    w.seq = static_cast<int32_t>(blockIdx.x / per_seq);
    w.row0 = static_cast<int32_t>(blockIdx.x % per_seq) * tile_rows;
  }
  w.valid = w.seq < p.n_seqs;
  return w;
}

// One sequence's key numbering (key_range.h).
template <bool kStaged>
struct SeqKeys {
  PlannedSeq s;
  int32_t seq;
  int32_t base;        // ring-only: position of key 0
  int32_t sec2_first;  // staged: section-2 row of the first new token
  int32_t n_keys;

  __device__ __forceinline__ void Init(const AttentionParams& p, int32_t i) {
    seq = i;
    s = p.seqs[i];
    if (kStaged) {
      base = 0;
      sec2_first = p.n_seqs * p.window + s.token_offset;
      n_keys = StagedKeyCount(p.window, s.seqlen_q);
    } else {
      const int32_t len0 = s.seqlen_q > 0 ? p.offset_len[2 * s.token_offset + 1] : 1;
      base = RingKeyBase(s.q_start, len0);
      sec2_first = 0;
      n_keys = RingKeyCount(s.q_start, s.seqlen_q, base);
    }
  }

  // Visible keys of the sequence's token j.
  __device__ __forceinline__ KeyRange TokenKeys(const AttentionParams& p, int32_t j) const {
    const int64_t t = s.token_offset + j;
    if (kStaged) return StagedTokenKeys(p.pivots + 4 * t, seq, p.window, sec2_first);
    return RingTokenKeys(s.q_start, j, p.offset_len[2 * t + 1], base);
  }

  // Start of stored vector `hv` (K heads, then V heads) of key k.
  __device__ __forceinline__ const uint8_t* Vector(const AttentionParams& p, int32_t k,
                                                   int hv) const {
    const uint8_t* row;
    if (kStaged) {
      row = p.staging + StagedKeyRow(seq, k, p.window, sec2_first) * p.bytes_per_token;
    } else {
      row = p.ring.Row(RingKeyRow(s.slot, base, k, p.ring.ring_len));
    }
    return row + static_cast<int64_t>(hv) * p.vec_bytes;
  }
};

// What a CTA of either attention kernel works on: its sequence's keys, its
// first query row, the KV head (blockIdx.z) and the sequence's query rows
// (seqlen_q x group, row = token * group + head in group).
template <bool kStaged>
struct CtaSeq {
  SeqKeys<kStaged> sk;
  int32_t row0;
  int32_t group;
  int32_t g;
  int32_t n_rows;

  // False: nothing for this CTA (past the batch, or past its sequence's
  // rows); the whole CTA returns then, before any barrier.
  __device__ __forceinline__ bool Begin(const AttentionParams& p, int tile_rows) {
    const CtaWork work = CtaWorkOf(p, tile_rows);
    if (!work.valid) return false;
    sk.Init(p, work.seq);
    row0 = work.row0;
    group = p.q_heads / p.kv_heads;
    g = blockIdx.z;
    n_rows = sk.s.seqlen_q * group;
    return row0 < n_rows;
  }
};

// Eight consecutive values (element e, a multiple of 8) of a stored vector.
template <int D>
__device__ __forceinline__ void Dequant8(const uint8_t* vec, Format format, int e, float* out) {
  if (format == Format::kMxfp8) {
    const uint8_t scale = vec[D + e / 32];
    const uint8_t* c = vec + e;
    uint32_t w0, w1;
    if ((reinterpret_cast<uintptr_t>(c) & 3) == 0) {
      w0 = *reinterpret_cast<const uint32_t*>(c);
      w1 = *reinterpret_cast<const uint32_t*>(c + 4);
    } else {
      w0 = uint32_t(c[0]) | (uint32_t(c[1]) << 8) | (uint32_t(c[2]) << 16) | (uint32_t(c[3]) << 24);
      w1 = uint32_t(c[4]) | (uint32_t(c[5]) << 8) | (uint32_t(c[6]) << 16) | (uint32_t(c[7]) << 24);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      out[j] = codec::DecodeElement(static_cast<uint8_t>(w0 >> (8 * j)), scale);
      out[4 + j] = codec::DecodeElement(static_cast<uint8_t>(w1 >> (8 * j)), scale);
    }
  } else if (format == Format::kBf16) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(vec) + e;
#pragma unroll
    for (int j = 0; j < 8; ++j) out[j] = __uint_as_float(uint32_t(h[j]) << 16);
  } else {
    const float* f = reinterpret_cast<const float*>(vec) + e;
#pragma unroll
    for (int j = 0; j < 8; ++j) out[j] = f[j];
  }
}

// Two consecutive values (element e, even) of a stored vector: Dequant8's
// values of those elements.
template <int D>
__device__ __forceinline__ void Dequant2(const uint8_t* vec, Format format, int e, float* out) {
  if (format == Format::kMxfp8) {
    const uint8_t scale = vec[D + e / 32];
    out[0] = codec::DecodeElement(vec[e], scale);
    out[1] = codec::DecodeElement(vec[e + 1], scale);
  } else if (format == Format::kBf16) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(vec) + e;
    out[0] = __uint_as_float(uint32_t(h[0]) << 16);
    out[1] = __uint_as_float(uint32_t(h[1]) << 16);
  } else {
    const float* f = reinterpret_cast<const float*>(vec) + e;
    out[0] = f[0];
    out[1] = f[1];
  }
}

// Stored formats an attention instantiation decodes: a template parameter of
// the kernels, so that each instantiation holds only its formats' decode
// (docs/codec.md, "fp8_ds_mla"). kRuntime: MXFP8, BF16 or FP32, as
// p.format says at run time (every head dim); kDsMla: FP8_DS_MLA only (D 512,
// common/ds_mla_math.h; the small tiles only, attention_dispatch.cuh).
enum class KvDecode : int { kRuntime = 0, kDsMla = 1 };

// Eight consecutive values (element e, a multiple of 8) of an FP8_DS_MLA
// record: E4M3 codes times their group's UE8M0 scale below dim 448 (the CPU
// codec's DecodeElement, so values and NaN rules agree bit for bit), the
// stored BF16 RoPE dims from 448 on. Records are 8-byte aligned: 584-byte
// vectors in rows of 584 or 1168 bytes, in rings aligned to at least 16
// bytes or in the staging buffer (a pool allocation).
__device__ __forceinline__ void DequantDsMla8(const uint8_t* vec, int e, float* out) {
  if (e < int(kDsMlaNopeDims)) {
    const uint8_t scale = vec[kDsMlaScaleOffset + e / int(kDsMlaGroup)];
    const uint2 w = *reinterpret_cast<const uint2*>(vec + e);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      out[j] = codec::DecodeElement(static_cast<uint8_t>(w.x >> (8 * j)), scale);
      out[4 + j] = codec::DecodeElement(static_cast<uint8_t>(w.y >> (8 * j)), scale);
    }
  } else {
    const uint2* r = reinterpret_cast<const uint2*>(vec + kDsMlaRopeOffset +
                                                   2 * (e - int(kDsMlaNopeDims)));
    const uint2 w0 = r[0], w1 = r[1];  // 8-byte aligned only (584 = 8 x 73)
    const uint32_t h[4] = {w0.x, w0.y, w1.x, w1.y};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      out[2 * j] = __uint_as_float(h[j] << 16);
      out[2 * j + 1] = __uint_as_float(h[j] & 0xFFFF0000u);
    }
  }
}

// Two consecutive values (element e, even) of an FP8_DS_MLA record.
__device__ __forceinline__ void DequantDsMla2(const uint8_t* vec, int e, float* out) {
  if (e < int(kDsMlaNopeDims)) {
    const uint8_t scale = vec[kDsMlaScaleOffset + e / int(kDsMlaGroup)];
    out[0] = codec::DecodeElement(vec[e], scale);
    out[1] = codec::DecodeElement(vec[e + 1], scale);
  } else {
    const uint32_t h =
        *reinterpret_cast<const uint32_t*>(vec + kDsMlaRopeOffset + 2 * (e - int(kDsMlaNopeDims)));
    out[0] = __uint_as_float(h << 16);
    out[1] = __uint_as_float(h & 0xFFFF0000u);
  }
}

// Dequant8 / Dequant2 of the instantiation's formats.
template <KvDecode F, int D>
__device__ __forceinline__ void DequantAs8(const uint8_t* vec, Format format, int e, float* out) {
  if constexpr (F == KvDecode::kDsMla) {
    static_assert(D == int(kDsMlaDim), "FP8_DS_MLA holds 512-dim vectors only");
    DequantDsMla8(vec, e, out);
  } else {
    Dequant8<D>(vec, format, e, out);
  }
}
template <KvDecode F, int D>
__device__ __forceinline__ void DequantAs2(const uint8_t* vec, Format format, int e, float* out) {
  if constexpr (F == KvDecode::kDsMla) {
    static_assert(D == int(kDsMlaDim), "FP8_DS_MLA holds 512-dim vectors only");
    DequantDsMla2(vec, e, out);
  } else {
    Dequant2<D>(vec, format, e, out);
  }
}

// Eight query values as FP32.
__device__ __forceinline__ void LoadQuery8(const AttentionParams& p, int64_t elem, float* out) {
  if (p.q_dtype == Dtype::kFp32) {
    const float* f = static_cast<const float*>(p.q) + elem;
#pragma unroll
    for (int j = 0; j < 8; ++j) out[j] = f[j];
  } else {
    const uint16_t* h = static_cast<const uint16_t*>(p.q) + elem;
#pragma unroll
    for (int j = 0; j < 8; ++j) out[j] = __uint_as_float(uint32_t(h[j]) << 16);
  }
}

// One query value as FP32.
__device__ __forceinline__ float LoadQuery1(const AttentionParams& p, int64_t elem) {
  return p.q_dtype == Dtype::kFp32 ? static_cast<const float*>(p.q)[elem]
                                   : codec::Bf16ToFloat(static_cast<const uint16_t*>(p.q)[elem]);
}

// Dim e of the query vector starting at element `vec0`, rotated by its
// token's table row `cs` when the layer has RoPE (the partner dim is read from
// memory too).
__device__ __forceinline__ float LoadQueryDim(const AttentionParams& p, int64_t vec0, int e,
                                              const RopeCs* cs) {
  if (!p.rope.on()) return LoadQuery1(p, vec0 + e);
  return RopeRotatedDim(p.rope, uint32_t(e), cs, p.rope.attention_factor, 1.0f,
                        [&](uint32_t d) { return LoadQuery1(p, vec0 + d); });
}

// A scaled score after the layer's soft-cap (if any).
__device__ __forceinline__ float CappedScore(const AttentionParams& p, float z) {
  return p.softcap > 0 ? SoftCapScore(z, p.softcap, 1.0f / p.softcap) : z;
}

__device__ __forceinline__ void StoreOut(const AttentionParams& p, int64_t elem, float v) {
  if (p.out_dtype == Dtype::kFp32)
    static_cast<float*>(p.out)[elem] = v;
  else
    static_cast<uint16_t*>(p.out)[elem] = codec::Bf16FromFloat(v);
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Online-softmax rescale factor exp(m_old - m_new), safe for -inf maxima.
__device__ __forceinline__ float Rescale(float m_old, float m_new) {
  return m_old == m_new ? 1.0f : expf(m_old - m_new);
}

}  // namespace swa::kernels
