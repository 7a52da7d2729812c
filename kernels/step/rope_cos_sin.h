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
  // Device [n_tokens] positions given by the caller (swa_step_args_t::
  // positions, swa_rope_apply): row t takes positions[t] and seqs may be
  // null; nullptr = each token's cache position from seqs.
  const int32_t* positions = nullptr;
};

// Row t, entry i = RopeTableEntry(position of token t, inv_freq[i]).
// The one kernel that computes the angles, for the step and swa_rope_apply.
cudaError_t LaunchRopeCosSin(const RopeCosSinParams& p, cudaStream_t stream);

}  // namespace swa::kernels
