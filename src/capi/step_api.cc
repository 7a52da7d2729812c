// The Step section: swa_step_args_init, swa_step, swa_cache_stats.
#include <cstring>

#include "capi/enums.h"
#include "capi/error.h"
#include "capi/handles.h"
#include "common/status_macros.h"
#include "step/run_step.h"

using swa::capi::Guard;

namespace swa::capi {
namespace {

// The one conversion of the caller's arguments; backends read the result.
absl::Status ConvertArgs(const swa_step_args_t& a, StepTensors* t) {
  SWA_ASSIGN_OR_RETURN(t->q_dtype, ConvertDtype(a.q_dtype, "q_dtype"));
  SWA_ASSIGN_OR_RETURN(t->kv_dtype, ConvertDtype(a.kv_dtype, "kv_dtype"));
  SWA_ASSIGN_OR_RETURN(t->out_dtype, ConvertDtype(a.out_dtype, "out_dtype"));
  t->layer = a.layer;
  t->q = a.q;
  t->k_new = a.k_new;
  t->v_new = a.v_new;
  t->out = a.out;
  t->sinks = a.sinks;
  t->softmax_scale = a.softmax_scale;
  t->stream = a.stream;
  return absl::OkStatus();
}

}  // namespace
}  // namespace swa::capi

extern "C" {

SWA_API void swa_step_args_init(swa_step_args_t* args) {
  if (args == nullptr) return;
  swa::capi::ResetStruct(args);
  args->q_dtype = SWA_DTYPE_FP32;
  args->kv_dtype = SWA_DTYPE_FP32;
  args->out_dtype = SWA_DTYPE_FP32;
}

SWA_API swa_status_t swa_step(swa_cache_t* cache, swa_plan_t* plan, const swa_step_args_t* args) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_RETURN_IF_ERROR(swa::capi::CheckPlan(plan));
    SWA_CHECK_STRUCT(args, swa_step_args_t);
    swa::StepTensors tensors;
    SWA_RETURN_IF_ERROR(swa::capi::ConvertArgs(*args, &tensors));
    if (plan->cache != cache->impl.get())
      return absl::FailedPreconditionError("plan belongs to another cache");
    return swa::RunStep(*cache->impl, *plan->impl, &plan->prepared, tensors);
  });
}

SWA_API swa_status_t swa_cache_stats(const swa_cache_t* cache, swa_cache_stats_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_CHECK_STRUCT(out, swa_cache_stats_t);
    const swa::Cache& c = *cache->impl;
    swa::capi::ResetStruct(out);
    out->steps = c.counters().steps.load();
    out->tokens = c.counters().tokens.load();
    out->nonfinite_blocks = c.counters().nonfinite_blocks.load();
    out->slots_in_use = c.slots().num_allocated();
    out->max_slots = c.layout().max_slots();
    out->pool_bytes = c.layout().pool_bytes();
    return absl::OkStatus();
  });
}

}  // extern "C"
