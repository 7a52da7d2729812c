// The one conversion of a caller's swa_step_args_t into StepTensors, shared by
// swa_step (step_api.cc) and swa_decode_graph_step (decode_graph_api.cc).
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "backend/step_work.h"
#include "swacache.h"

namespace swa::capi {

// sizeof(swa_step_args_t) in 0.1, before `lse`: still accepted.
inline constexpr size_t kStepArgsV1 = offsetof(swa_step_args_t, lse);

// Dtypes checked as raw integers; `lse` only from a struct that has it.
absl::Status ConvertStepArgs(const swa_step_args_t& a, StepTensors* t);

}  // namespace swa::capi
