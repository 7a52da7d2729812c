// Definitions of the opaque C handles, and the one check of each.
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "backend/step_work.h"
#include "cache/cache.h"
#include "capi/error.h"
#include "plan/step_plan.h"
#include "step/decode_graph.h"
#include "swacache.h"

struct swa_cache {
  std::unique_ptr<swa::Cache> impl;
};

// A step plan borrows its cache (which must outlive it).
struct swa_plan {
  swa::Cache* cache = nullptr;
  std::unique_ptr<swa::plan::StepPlan> impl;
  // What the cache's backend derived from impl's latest build (see RunStep).
  std::unique_ptr<swa::PreparedPlan> prepared;
};

// A graph decode borrows its cache (which must outlive it).
struct swa_decode_graph {
  std::unique_ptr<swa::DecodeGraph> impl;
};

namespace swa::capi {

inline absl::Status CheckCache(const swa_cache_t* cache) {
  if (cache == nullptr || cache->impl == nullptr) return NullArg("cache");
  return absl::OkStatus();
}

inline absl::Status CheckPlan(const swa_plan_t* plan) {
  if (plan == nullptr || plan->impl == nullptr) return NullArg("plan");
  return absl::OkStatus();
}

}  // namespace swa::capi
