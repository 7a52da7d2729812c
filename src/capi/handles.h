// Definitions of the opaque C handles.
#pragma once

#include <memory>

#include "cache/cache.h"
#include "swacache.h"

struct swa_cache {
  std::unique_ptr<swa::Cache> impl;
};

// A step plan borrows its cache (which must outlive it).
#include "plan/step_plan.h"

struct swa_plan {
  std::unique_ptr<swa::plan::StepPlan> impl;
};
