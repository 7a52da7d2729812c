// The per-token RoPE table of a step (kernels/step/rope_apply.h): cos and sin
// of every (token, frequency) pair, computed once per step and layer so that
// the attention and encode kernels read them instead of inlining sinf/cosf.
// Positions come from the plan's sequences in device memory, so the launch is
// legal inside CUDA graph capture (the device-planned decode).
#pragma once

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "common/records.h"
#include "kernels/step/rope_apply.h"

namespace swa::kernels {

struct RopeCosSinParams {
  const PlannedSeq* seqs = nullptr;  // device [n_seqs]; token_offset non-decreasing
  int32_t n_seqs = 0;
  // Table rows: every token of the step (an upper bound in graph mode; rows
  // of no sequence are left unwritten, no kernel reads them).
  int32_t n_tokens = 0;
  const float* inv_freq = nullptr;  // device [pairs]
  int32_t pairs = 0;                // rotary dims / 2
  RopeCs* table = nullptr;          // device [n_tokens, pairs]
};

// Row t, entry i = RopeTableEntry(position of token t, inv_freq[i]).
cudaError_t LaunchRopeCosSin(const RopeCosSinParams& p, cudaStream_t stream);

}  // namespace swa::kernels
