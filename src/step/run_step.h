// swa_step in C++: check one layer's tensors against the cache and the plan,
// have the backend prepare the plan once per build, run the layer, count.
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "backend/step_work.h"
#include "cache/cache.h"
#include "plan/step_plan.h"

namespace swa {

// Runs layer `tensors.layer` of the step `plan` describes. `prepared` holds
// what the cache's backend derived from the plan's latest build; it is
// (re)made here when the build changed, so that only the first layer of a
// step pays for it. Nothing changes when the request is rejected. On success
// the plan is marked executed (it can no longer be cancelled).
absl::Status RunStep(Cache& cache, plan::StepPlan& plan, std::unique_ptr<PreparedPlan>* prepared,
                     const StepTensors& tensors);

}  // namespace swa
