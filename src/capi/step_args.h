// The one conversion of a caller's swa_step_args_t into StepTensors, shared by
// swa_step (step_api.cc) and swa_decode_graph_step (decode_graph_api.cc).
#pragma once

#include "absl/status/status.h"
#include "backend/step_work.h"
#include "swacache.h"

namespace swa::capi {

// NULL, struct_size (capi/struct_versions.h) and the dtypes (raw integers)
// checked; fields past the caller's struct_size are their defaults.
absl::Status ConvertStepArgs(const swa_step_args_t* args, StepTensors* t);

}  // namespace swa::capi
