// CUDA MXFP8 encode (into ring rows) and decode kernels: plain-data params
// and template-free launchers. Bytes equal the CPU codec's (src/codec/).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "codec/ring_address.h"

namespace swa::kernels {

struct Mxfp8EncodeParams {
  const void* src = nullptr;  // [n_vectors] vectors of dim values
  int32_t src_bf16 = 0;       // 0: FP32, 1: BF16 (uint16 bits)
  int64_t src_stride = 0;     // elements between consecutive vectors (>= dim)
  int64_t n_vectors = 0;
  int32_t dim = 0;            // multiple of 32
  int32_t ceil = 1;           // scale mode: 1 ceil, 0 floor
  uint8_t* dst = nullptr;     // ring (or packed rows) base
  codec::RowAddress dst_rows; // where vector i goes; negative rows are skipped
  unsigned long long* nonfinite_blocks = nullptr;  // optional device counter (atomically added)
  int32_t force_software = 0;  // 1: never the hardware E4M3 conversion (tests)
};

struct Mxfp8DecodeParams {
  const uint8_t* src = nullptr;
  codec::RowAddress src_rows;  // where vector i is read; negative rows give zeros
  int64_t n_vectors = 0;
  int32_t dim = 0;
  void* dst = nullptr;         // [n_vectors] vectors of dim values
  int32_t dst_bf16 = 0;        // 0: FP32, 1: BF16
  int64_t dst_stride = 0;      // elements between consecutive vectors (>= dim)
  unsigned long long* nonfinite_blocks = nullptr;  // optional: blocks with scale 0xFF
};

// Asynchronous on `stream`; returns the launch error (cudaErrorInvalidValue
// for a dim that is not a positive multiple of 32 or a null pointer).
cudaError_t LaunchMxfp8Encode(const Mxfp8EncodeParams& p, cudaStream_t stream);
cudaError_t LaunchMxfp8Decode(const Mxfp8DecodeParams& p, cudaStream_t stream);

}  // namespace swa::kernels
