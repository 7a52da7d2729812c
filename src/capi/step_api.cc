// swa_step, swa_step_args_init, swa_cache_stats.
#include <cstring>

#include "capi/error.h"
#include "capi/handles.h"
#include "common/status_macros.h"
#include "step/run_step.h"

using swa::capi::Guard;

namespace {

absl::Status CheckDtype(swa_dtype_t d, const char* name) {
  if (d != SWA_DTYPE_FP32 && d != SWA_DTYPE_BF16)
    return absl::InvalidArgumentError(
        absl::StrFormat("%s = %d is not a swa_dtype_t value", name, static_cast<int>(d)));
  return absl::OkStatus();
}

}  // namespace

extern "C" {

SWA_API void swa_step_args_init(swa_step_args_t* args) {
  if (args == nullptr) return;
  std::memset(args, 0, sizeof *args);
  args->struct_size = sizeof *args;
  args->q_dtype = SWA_DTYPE_FP32;
  args->kv_dtype = SWA_DTYPE_FP32;
  args->out_dtype = SWA_DTYPE_FP32;
}

SWA_API swa_status_t swa_step(swa_cache_t* cache, const swa_plan_t* plan,
                              const swa_step_args_t* args) {
  return Guard([&]() -> absl::Status {
    if (cache == nullptr || cache->impl == nullptr) return swa::capi::NullArg("cache");
    if (plan == nullptr || plan->impl == nullptr) return swa::capi::NullArg("plan");
    SWA_CHECK_STRUCT(args, swa_step_args_t);
    SWA_RETURN_IF_ERROR(CheckDtype(args->q_dtype, "q_dtype"));
    SWA_RETURN_IF_ERROR(CheckDtype(args->kv_dtype, "kv_dtype"));
    SWA_RETURN_IF_ERROR(CheckDtype(args->out_dtype, "out_dtype"));
    swa::StepRequest r;
    r.layer = args->layer;
    r.q = args->q;
    r.q_dtype = static_cast<swa::Dtype>(args->q_dtype);
    r.k_new = args->k_new;
    r.v_new = args->v_new;
    r.kv_dtype = static_cast<swa::Dtype>(args->kv_dtype);
    r.out = args->out;
    r.out_dtype = static_cast<swa::Dtype>(args->out_dtype);
    r.sinks = args->sinks;
    r.softmax_scale = args->softmax_scale;
    r.stream = args->stream;
    return swa::RunStep(*cache->impl, *plan->impl, r);
  });
}

SWA_API swa_status_t swa_cache_stats(const swa_cache_t* cache, swa_cache_stats_t* out) {
  return Guard([&]() -> absl::Status {
    if (cache == nullptr || cache->impl == nullptr) return swa::capi::NullArg("cache");
    SWA_CHECK_STRUCT(out, swa_cache_stats_t);
    const swa::Cache& c = *cache->impl;
    std::memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
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
