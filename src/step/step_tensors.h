// A caller's tensors for one layer of a step, as swa_step (RunStep) and the
// graph decode (DecodeGraph::Step) both take them: one check with one set of
// messages, and the softmax scale they resolve to.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "backend/step_work.h"
#include "layout/layout.h"

namespace swa {

// OUT_OF_RANGE for a layer past the cache's; INVALID_ARGUMENT for a NULL
// q, k_new or out when `has_tokens`, a v_new or sinks that the layer's
// shape does not call for (or lacks), a softmax_scale that is not a finite
// value >= 0, or an out or lse that shares memory with another argument
// (out may be exactly q: the same start and bytes), the extents taken from
// `n_tokens` rows and the layer's shape. Each message names the offending
// tensor and the layer, or both tensors and their byte ranges. Positions are
// host memory: `host_positions` false (a CUDA cache, whose other tensors are
// device memory) compares them with nothing.
absl::Status CheckStepTensors(const Layout& layout, const StepTensors& tensors, bool has_tokens,
                              int64_t n_tokens, bool host_positions);

// The scale the scores are multiplied by, the one rule for swa_step and the
// graph decode: the step's `softmax_scale` when non-zero, else the layer's
// (swa_layer_desc_t::softmax_scale) when non-zero, else 1/sqrt(head_dim).
// INVALID_ARGUMENT naming t and the value for a negative positions[t] of
// the `n_tokens` RoPE positions (nullptr: none given, OK).
absl::Status CheckPositions(const int32_t* positions, int64_t n_tokens);

float ResolveSoftmaxScale(float softmax_scale, const StepLayer& layer);

}  // namespace swa
