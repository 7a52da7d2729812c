// Byte-level row kernels of a step (docs/semantics.md "Steps and plans"): encode the new K/V vectors
// into stored rows (ring rows or section 2 of the staging buffer), load
// section 1 from the load plan, store section 2 into the ring.
// Params are plain data; launchers are template-free and return cudaError_t.
#pragma once

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "common/records.h"
#include "kernels/step/rope_apply.h"

namespace swa::kernels {

struct EncodeParams {
  const void* k_new = nullptr;  // [T, Hkv, D]
  const void* v_new = nullptr;  // [T, Hkv, D]; nullptr for shared K/V
  Dtype src_dtype = Dtype::kFp32;
  int32_t n_tokens = 0;         // grid size (an upper bound in graph mode)
  const int32_t* n_tokens_dev = nullptr;  // optional device count; tokens >= it are skipped
  int32_t kv_heads = 0;
  int32_t head_dim = 0;         // multiple of 32
  Format format = Format::kMxfp8;
  bool ceil = true;
  uint32_t vec_bytes = 0;
  uint32_t bytes_per_token = 0;
  // Destination: `store_rows` given -> ring rows (row < 0 skipped), else dense
  // rows staging + t * bytes_per_token.
  const int32_t* store_rows = nullptr;
  RingRows ring;
  uint8_t* staging = nullptr;
  unsigned long long* nonfinite = nullptr;  // optional device counter (atomicAdd)
  // RoPE: with rope.on(), each K vector of token t is rotated by the table
  // row t (rope.cos_sin, required then) before it is encoded; V vectors never
  // rotate.
  RopeParams rope;
};
cudaError_t LaunchEncodeKv(const EncodeParams& p, cudaStream_t stream);

struct LoadParams {
  const RowSegment* segments = nullptr;  // device
  int32_t n_segments = 0;
  RingRows ring;
  uint8_t* staging = nullptr;  // section 1 starts at row 0
};
cudaError_t LaunchLoadSection1(const LoadParams& p, cudaStream_t stream);

struct StoreParams {
  const uint8_t* staged = nullptr;   // row t = token t (section 2)
  const int32_t* store_rows = nullptr;  // [T], -1 = not stored
  int32_t n_tokens = 0;
  RingRows ring;
};
cudaError_t LaunchStoreRows(const StoreParams& p, cudaStream_t stream);

}  // namespace swa::kernels
