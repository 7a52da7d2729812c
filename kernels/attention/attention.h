// SWA attention over stored KV rows (docs/semantics.md, "Attention"), for the ring-only path
// (decode / speculative verify, keys read from the ring) and the staged path
// (prefill / mixed, keys from the staging buffer's sections 1 and 2).
//
// One CTA = one (sequence, KV head, tile of query rows); query rows are
// token-major (kernels/attention/key_range.h) so a tile visits only the key
// tiles of its band. Each key tile is dequantised once into shared memory and
// used by every query row (heads and tokens) of the CTA.
//
// Two kernels share that structure:
//  - MMA: bf16 mma.sync m16n8k16, FP32 accumulation and online softmax
//    (error budget of BF16 outputs, docs/semantics.md "Error budgets");
//  - precise: FP32 FMA throughout, for FP32 outputs or FP32 storage (1e-5).
#pragma once

#include <cuda_runtime_api.h>
#include <stdint.h>

#include <utility>

#include "kernels/attention/attention_dims.h"
#include "kernels/step/kv_rows.h"

namespace swa::kernels {

struct AttentionParams {
  // Queries / outputs [T, Hq, D] and optional sinks [Hq]; device memory.
  const void* q = nullptr;
  Dtype q_dtype = Dtype::kFp32;
  void* out = nullptr;
  Dtype out_dtype = Dtype::kFp32;
  const float* sinks = nullptr;
  float scale = 0;
  float softcap = 0;     // > 0: scaled scores z -> softcap * tanh(z / softcap) (sinks not)
  float* lse = nullptr;  // [T, Hq] device, optional: m + ln l per row, -inf when l == 0
  // RoPE: with rope.on(), queries are rotated on load by their positions
  // (q_start + token); with rope.derotate_output the output's rotary dims are
  // rotated back by the same position before the store.
  RopeParams rope;

  int32_t q_heads = 0;
  int32_t kv_heads = 0;
  int32_t head_dim = 0;
  bool shared_kv = true;
  Format format = Format::kMxfp8;
  uint32_t vec_bytes = 0;
  uint32_t bytes_per_token = 0;
  int32_t window = 0;

  const PlannedSeq* seqs = nullptr;  // device [n_seqs]
  int32_t n_seqs = 0;
  // Work list: `tiles` (device, optional) lists (sequence, row tile) pairs, one
  // CTA each; without it the grid is every sequence x ceil(max_seqlen_q * G /
  // rows per tile) tiles and CTAs past a sequence's rows exit (graph mode).
  const int2* tiles = nullptr;
  int32_t n_tiles = 0;
  int32_t max_seqlen_q = 0;

  // Ring-only: offset_len [T, 2] (device) and the ring.
  const int32_t* offset_len = nullptr;
  RingRows ring;
  // Staged: pivots [T, 4] (device) and the staging buffer (section 1, then 2).
  const int32_t* pivots = nullptr;
  const uint8_t* staging = nullptr;

  // false: the precise FP32 kernel; true: the bf16 tensor-core kernel.
  bool use_mma = true;
  // Tile sizes (attention_dims.h). A host-built `tiles` list must use the
  // rows per CTA of the same variant (AttentionTileRows in attention_shapes.h).
  // The backend sets it on every launch (kAuto is refused): only it knows the
  // limit the choice obeys, SWACACHE_CUDA_SMEM_LIMIT included.
  AttentionVariant variant = AttentionVariant::kAuto;
};

// Ring-only path (reads offset_len and the ring).
cudaError_t LaunchDecodeAttention(const AttentionParams& p, cudaStream_t stream);
// Staged path (reads pivots and the staging buffer).
cudaError_t LaunchPrefillAttention(const AttentionParams& p, cudaStream_t stream);

}  // namespace swa::kernels
