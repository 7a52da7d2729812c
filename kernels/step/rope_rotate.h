// swa_rope_apply on a device (docs/semantics.md, "RoPE as a service"): a
// caller's tensor [tokens, heads, head_dim] rotated in place with a cos/sin
// table that LaunchRopeCosSin filled at the caller's positions. Each thread
// rotates one pair with RopeScaled and RotatePair (common/rope.h), the ops
// the step's encode and attention kernels apply (RopeRotatedDim), so the
// bits are the CUDA step's.
#pragma once

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "common/records.h"
#include "kernels/step/rope_apply.h"

namespace swa::kernels {

struct RopeRotateParams {
  void* x = nullptr;            // device [tokens, heads, head_dim] in dtype
  Dtype dtype = Dtype::kFp32;   // FP32, or BF16 (widened, rotated, rounded to nearest even)
  int64_t tokens = 0;
  int32_t heads = 0;
  int32_t head_dim = 0;
  RopeParams rope;              // style, slice and the [tokens, dims / 2] table
  float factor = 1.0f;          // multiplies cos and sin
  float sign = 1.0f;            // -1: rotate back
};

cudaError_t LaunchRopeRotate(const RopeRotateParams& p, cudaStream_t stream);

}  // namespace swa::kernels
