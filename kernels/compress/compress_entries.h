// swa_compress_step on a device (docs/semantics.md, "Compression state"):
// the entry of every closing window of one compressor, then the store of the
// step's new source rows into the compressor ring. The per-feature pooling,
// the RMSNorm and the RoPE are the CPU backend's (common/compress_entry.h,
// common/rope.h), so the two agree to FP32 rounding (expf/cosf/sinf of host
// and device, and the order of the norm's sum, differ).
#pragma once

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "common/compress_math.h"
#include "common/records.h"
#include "kernels/step/rope_apply.h"

namespace swa::kernels {

// One closing window: the planner's CompressWindow (common/compress_math.h,
// field for field swa_compress_window_t); the launcher copies the bytes.
using CompressWindowDev = ::swa::CompressWindow;

struct CompressEntriesParams {
  CompressGeometry geometry{};   // kind, rate c, ring rows L
  int32_t entry_dim = 0;         // d
  int32_t row_values = 0;        // values of the kv (and of the gate) half of a row: d or 2d
  bool ring_bf16 = false;        // the ring keeps BF16 values (else FP32)
  bool in_bf16 = false;          // kv and gate are BF16 (else FP32)
  bool out_bf16 = false;         // out is BF16 (else FP32)
  // Ring row r of slot s at ring_base + s * slot_bytes + r * row_bytes: kv, then gate.
  uint8_t* ring_base = nullptr;
  uint64_t slot_bytes = 0;
  uint32_t row_bytes = 0;
  const CompressWindowDev* windows = nullptr;  // device [n_windows]
  int32_t n_windows = 0;
  const RowSegment* store = nullptr;           // device [n_store]: dst = slot * L + row, src = batch row
  int32_t n_store = 0;
  const void* kv = nullptr;                    // device [T, row_values]
  const void* gate = nullptr;                  // device [T, row_values], without the bias
  const float* position_bias = nullptr;        // device [c, row_values]
  const float* norm_weight = nullptr;          // device [d]
  float norm_eps = 1e-6f;
  void* out = nullptr;                         // device [n_windows, d]
  // RoPE of the entries' trailing rope_dims dims (interleaved pairs) at each
  // window's position: row k of the table holds window k's cos/sin
  // (LaunchRopeCosSin at the windows' positions); rope_dims 0: none.
  const RopeCs* rope_table = nullptr;          // device [n_windows, rope_dims / 2]
  int32_t rope_dims = 0;
  float attention_factor = 1.0f;
};

// Dynamic shared memory of the entries kernel: the pooled entry, FP32.
inline size_t CompressEntriesSmem(int32_t entry_dim) {
  return static_cast<size_t>(entry_dim) * sizeof(float);
}

// The entries of params.windows into params.out (one block per window), then
// the new rows of params.store into the ring, on `stream` in that order: every
// window reads its ring rows before a row is overwritten.
cudaError_t LaunchCompressStep(const CompressEntriesParams& params, cudaStream_t stream);

}  // namespace swa::kernels
