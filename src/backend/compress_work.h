// swa_compress_step's work as plain data (docs/semantics.md, "Compression
// state"): one compressor of one layer of a planned step. The planner's
// windows say what each closing entry reads; the backend computes the entries
// into `out`, then stores the new source rows into the ring (store segments).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/compress_math.h"
#include "common/records.h"
#include "layout/rope_table.h"

namespace swa {


struct CompressWork {
  CompressGeometry geometry{};      // kind, rate c, ring rows L
  uint32_t entry_dim = 0;           // d: entry width of this compressor
  uint32_t row_values = 0;          // S_w: values of the kv (and of the gate) half of a row, d or 2d
  Format row_format = Format::kFp32;  // ring storage (FP32 or BF16)

  // The ring of this compressor in the pool: row r of slot s at
  // ring_base + s * slot_bytes + r * row_bytes; kv first, gate after it.
  uint8_t* ring_base = nullptr;     // pool + the ring's offset (backend memory)
  uint64_t slot_bytes = 0;
  uint32_t row_bytes = 0;

  // Host arrays from the planner, valid for the call.
  const CompressWindow* windows = nullptr;
  size_t n_windows = 0;
  const RowSegment* store = nullptr;  // dst_row = slot * L + ring row, src_row = batch row
  size_t n_store = 0;

  // Caller tensors (backend memory).
  const void* kv = nullptr;         // [T, row_values] in dtype
  const void* gate = nullptr;       // [T, row_values] in dtype
  Dtype dtype = Dtype::kFp32;
  int64_t n_tokens = 0;             // T
  const float* position_bias = nullptr;  // [rate, row_values]
  const float* norm_weight = nullptr;    // [entry_dim]
  float norm_eps = 1e-6f;
  void* out = nullptr;              // [n_windows, entry_dim] in out_dtype
  Dtype out_dtype = Dtype::kFp32;

  // RoPE of the entries: the trailing rope.dims dims, interleaved pairs,
  // at each window's position; rope.on() false = no rotation.
  const RopeTable* rope = nullptr;
  void* stream = nullptr;           // cudaStream_t on the CUDA backend
};

}  // namespace swa
