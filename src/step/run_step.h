// swa_step in C++: check one layer's arguments against the cache and the plan,
// hand the work to the backend, count what happened.
#pragma once

#include "absl/status/status.h"
#include "backend/step_work.h"
#include "cache/cache.h"
#include "plan/step_plan.h"

namespace swa {

struct StepRequest {
  uint32_t layer = 0;
  const void* q = nullptr;
  Dtype q_dtype = Dtype::kFp32;
  const void* k_new = nullptr;
  const void* v_new = nullptr;
  Dtype kv_dtype = Dtype::kFp32;
  void* out = nullptr;
  Dtype out_dtype = Dtype::kFp32;
  const float* sinks = nullptr;
  float softmax_scale = 0;  // 0 = 1/sqrt(D)
  void* stream = nullptr;
};

// Nothing changes when the request is rejected. On success the plan is marked
// executed (it can no longer be cancelled).
absl::Status RunStep(Cache& cache, plan::StepPlan& plan, const StepRequest& request);

}  // namespace swa
