// Everything a backend needs to run one layer of one planned step, as plain
// data (no planner or cache types, so backends stay below them).
#pragma once

#include <cstddef>
#include <cstdint>

#include "layout/model_spec.h"

namespace swa {

enum class Dtype : uint32_t { kFp32 = 0, kBf16 = 1 };  // == swa_dtype_t

struct StepSeq {
  uint32_t slot;
  int32_t seqlen_q;
  int32_t seqlen_k;
  int32_t q_start;       // seqlen_k - seqlen_q
  int32_t valid_start;   // effective for this step
  int32_t token_offset;  // new tokens of the sequences before this one
};

struct RowSegment {  // same layout as the planner's (dst_row, src_row or -1, count)
  int32_t dst_row;
  int32_t src_row;
  int32_t count;
};

struct StepWork {
  // ---- The layer ----
  uint8_t* ring_base = nullptr;  // pool + ring offset of this layer (slot 0)
  uint64_t slot_bytes = 0;
  uint32_t bytes_per_token = 0;
  uint32_t vec_bytes = 0;
  int32_t ring_len = 0;
  int32_t window = 0;
  Format format = Format::kMxfp8;
  ScaleMode scale_mode = ScaleMode::kCeil;
  int q_heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  bool shared_kv = true;

  // ---- The plan ----
  bool staged = false;
  const StepSeq* seqs = nullptr;
  uint32_t n_seqs = 0;
  int32_t n_tokens = 0;
  const int32_t* offset_len = nullptr;  // ring-only path: [T, 2]
  const RowSegment* load_segments = nullptr;  // staged path
  size_t n_load_segments = 0;
  const int32_t* pivots = nullptr;      // staged path: [T, 4]
  const int32_t* store_rows = nullptr;  // [T]: ring row of each new token, -1 = not stored

  // ---- The tensors (validated by the caller) ----
  const void* q = nullptr;      // [T, Hq, D]
  Dtype q_dtype = Dtype::kFp32;
  const void* k_new = nullptr;  // [T, Hkv, D]
  const void* v_new = nullptr;  // [T, Hkv, D] or nullptr for shared K/V
  Dtype kv_dtype = Dtype::kFp32;
  void* out = nullptr;          // [T, Hq, D]
  Dtype out_dtype = Dtype::kFp32;
  const float* sinks = nullptr;  // [Hq] or nullptr
  float scale = 0;               // resolved softmax scale
  void* stream = nullptr;

  // Address of flat ring row `row` of this layer.
  uint8_t* RowAddress(int64_t row) const {
    return ring_base + static_cast<uint64_t>(row / ring_len) * slot_bytes +
           static_cast<uint64_t>(row % ring_len) * bytes_per_token;
  }
};

struct StepResult {
  uint64_t nonfinite_blocks = 0;  // NaN/Inf blocks met while encoding new K/V
};

}  // namespace swa
