// Graph-mode decode: turns device-resident sequence columns plus the device
// planner's cu_seqlens/error into the per-sequence records the attention
// kernels read and each token's ring row, with no host involvement.
#pragma once

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "kernels/attention/attention.h"

namespace swa::kernels {

struct DecodePrepareParams {
  SeqColumns batch;                      // the engine's device columns
  const int32_t* cu_seqlens = nullptr;   // [n_seqs + 1], from LaunchDecodePlan
  const int32_t* error = nullptr;        // [1], from LaunchDecodePlan
  int32_t max_tokens = 0;
  int32_t ring_len = 0;
  // Outputs. On a planner error every sequence gets seqlen_q = 0 and every
  // store row -1: the step then writes nothing.
  PlannedSeq* seqs = nullptr;     // [n_seqs]
  int32_t* store_rows = nullptr;  // [max_tokens]
};
cudaError_t LaunchDecodePrepare(const DecodePrepareParams& p, cudaStream_t stream);

}  // namespace swa::kernels
