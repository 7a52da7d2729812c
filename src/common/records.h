// The plain records every layer of the library shares, each defined once:
// element types, storage formats, the sequence of a step, a run of rows, and
// where a ring row lives. Host+device: the planner writes them, the CPU step
// reads them, the CUDA kernels read the same bytes after one upload. Only the
// C edge (src/capi/) checks them against the public header's mirrors.
#pragma once

#include <stdint.h>

#include "common/host_device.h"

namespace swa {

// Element type of tensors exchanged with the library (== swa_dtype_t).
enum class Dtype : uint32_t { kFp32 = 0, kBf16 = 1 };
// Storage format of stored KV vectors (== swa_format_t).
enum class Format : uint32_t { kMxfp8 = 0, kBf16 = 1, kFp32 = 2, kFp8DsMla = 3 };
// MXFP8 scale rule (== swa_scale_mode_t).
enum class ScaleMode : uint32_t { kCeil = 0, kFloor = 1 };

// How a layer's rotary dims pair up (== swa_rope_style_t).
enum class RopeStyle : uint32_t { kNone = 0, kNeox = 1, kGptj = 2 };

// Values per MXFP8 block (one E8M0 scale each).
inline constexpr uint32_t kMxfp8Block = 32;

// DeepSeek-V4's fp8_ds_mla record (docs/codec.md, "fp8_ds_mla"): the one
// vector size it holds and where its parts lie in its 584 bytes.
inline constexpr uint32_t kDsMlaDim = 512;        // the only head_dim
inline constexpr uint32_t kDsMlaNopeDims = 448;   // dims 0..447: E4M3 codes
inline constexpr uint32_t kDsMlaRopeDims = 64;    // dims 448..511: BF16
inline constexpr uint32_t kDsMlaGroup = 64;       // NoPE dims per UE8M0 scale
inline constexpr uint32_t kDsMlaGroups = kDsMlaNopeDims / kDsMlaGroup;     // 7
inline constexpr uint32_t kDsMlaRopeOffset = kDsMlaNopeDims;              // 448
inline constexpr uint32_t kDsMlaScaleOffset = kDsMlaRopeOffset + 2 * kDsMlaRopeDims;  // 576
inline constexpr uint32_t kDsMlaBytes = kDsMlaScaleOffset + kDsMlaGroups + 1;       // 584

// Bytes of one stored vector of `dim` values (docs/semantics.md, "Slot layout").
// FP8_DS_MLA holds dim 512 only (the layout and the C API refuse others).
SWA_HOST_DEVICE constexpr uint32_t VectorBytes(Format format, uint32_t dim) {
  return format == Format::kMxfp8       ? dim + dim / kMxfp8Block
         : format == Format::kBf16      ? 2 * dim
         : format == Format::kFp8DsMla  ? kDsMlaBytes
                                        : 4 * dim;
}

// One sequence of a step as the engine describes it (== swa_seq_t).
struct SeqDesc {
  uint32_t slot;
  int32_t seqlen_q;     // new tokens this step
  int32_t seqlen_k;     // tokens after the step
  int32_t valid_start;  // 0 = the slot's
};

// One validated sequence of a planned step; the planner stores them, the
// backends and kernels read them in place.
struct PlannedSeq {
  uint32_t slot;
  int32_t seqlen_q;
  int32_t seqlen_k;
  int32_t q_start;       // seqlen_k - seqlen_q
  int32_t valid_start;   // effective: max(the slot's, the seq's)
  int32_t token_offset;  // new tokens of the sequences before this one
};

// A batch of sequences as device columns, [n_seqs] each (the device-planned
// decode reads them straight from the engine's arrays). valid_start may be
// null (all 0).
struct SeqColumns {
  const uint32_t* slot = nullptr;
  const int32_t* seqlen_q = nullptr;
  const int32_t* seqlen_k = nullptr;
  const int32_t* valid_start = nullptr;
  int32_t n_seqs = 0;
};

// A run of `count` rows from src_row (-1: zero rows) to dst_row (== swa_segment_t).
// Load plan: dst = staging section-1 row, src = flat ring row.
// Store plan: dst = flat ring row, src = index of the first new token.
struct RowSegment {
  int32_t dst_row;
  int32_t src_row;
  int32_t count;
};

// Where the flat ring rows of one layer live: row `slot * R + (p mod R)` is at
// base + (row / R) * slot_bytes + (row mod R) * bytes_per_token. The one home
// of that formula (docs/semantics.md, "Slot layout").
struct RingRows {
  uint8_t* base = nullptr;  // pool + the layer's ring offset
  uint64_t slot_bytes = 0;
  uint32_t bytes_per_token = 0;
  int32_t ring_len = 0;

  SWA_HOST_DEVICE uint8_t* Row(int64_t row) const {
    return base + static_cast<uint64_t>(row / ring_len) * slot_bytes +
           static_cast<uint64_t>(row % ring_len) * bytes_per_token;
  }
};

}  // namespace swa
