// The Step section: swa_step_args_init, swa_step, swa_cache_stats,
// swa_merge_args_init, swa_attention_merge.
#include <cstddef>
#include <cstring>

#include "capi/enums.h"
#include "capi/error.h"
#include "capi/handles.h"
#include "capi/step_args.h"
#include "capi/struct_versions.h"
#include "common/byte_overlap.h"
#include "common/checked_math.h"
#include "common/status_macros.h"
#include "step/run_step.h"

using swa::capi::Guard;

namespace swa::capi {
namespace {

absl::Status ConvertMerge(const swa_merge_args_t& a, MergeWork* w) {
  SWA_ASSIGN_OR_RETURN(w->dtype, ConvertDtype(a.dtype, "dtype"));
  if (a.rows < 0)
    return absl::InvalidArgumentError(absl::StrFormat("rows = %d is negative", a.rows));
  if (a.head_dim == 0) return absl::InvalidArgumentError("head_dim = 0");
  // out_a, out_b and out are [rows, head_dim]; the LSEs' [rows] is smaller.
  SWA_RETURN_IF_ERROR(CheckedProduct("out_a, out_b and out", {{"rows", uint64_t(a.rows)},
                                                               {"head_dim", a.head_dim}})
                          .status());
  if (a.rows > 0) {
    if (a.out_a == nullptr) return NullArg("out_a");
    if (a.lse_a == nullptr) return NullArg("lse_a");
    if (a.out_b == nullptr) return NullArg("out_b");
    if (a.lse_b == nullptr) return NullArg("lse_b");
    if (a.out == nullptr) return NullArg("out");
    // out may be exactly out_a or out_b, lse exactly lse_a or lse_b (the
    // kernels read each value before writing it); no other sharing.
    const uint64_t elem = w->dtype == Dtype::kBf16 ? 2 : 4;
    const uint64_t out_bytes = uint64_t(a.rows) * a.head_dim * elem;
    const uint64_t lse_bytes = uint64_t(a.rows) * sizeof(float);
    const MemRange out = RangeOf("out", a.out, out_bytes), lse = RangeOf("lse", a.lse, lse_bytes);
    const MemRange out_a = RangeOf("out_a", a.out_a, out_bytes);
    const MemRange out_b = RangeOf("out_b", a.out_b, out_bytes);
    const MemRange lse_a = RangeOf("lse_a", a.lse_a, lse_bytes);
    const MemRange lse_b = RangeOf("lse_b", a.lse_b, lse_bytes);
    SWA_RETURN_IF_ERROR(CheckApart(out, out_a, /*may_equal=*/true));
    SWA_RETURN_IF_ERROR(CheckApart(out, out_b, /*may_equal=*/true));
    SWA_RETURN_IF_ERROR(CheckApart(out, lse_a));
    SWA_RETURN_IF_ERROR(CheckApart(out, lse_b));
    SWA_RETURN_IF_ERROR(CheckApart(lse, lse_a, /*may_equal=*/true));
    SWA_RETURN_IF_ERROR(CheckApart(lse, lse_b, /*may_equal=*/true));
    SWA_RETURN_IF_ERROR(CheckApart(lse, out_a));
    SWA_RETURN_IF_ERROR(CheckApart(lse, out_b));
    SWA_RETURN_IF_ERROR(CheckApart(lse, out));
  }
  w->rows = a.rows;
  w->dim = a.head_dim;
  w->out_a = a.out_a;
  w->lse_a = a.lse_a;
  w->out_b = a.out_b;
  w->lse_b = a.lse_b;
  w->out = a.out;
  w->lse = a.lse;
  w->stream = a.stream;
  return absl::OkStatus();
}

// args.device against the cache that runs the merge (nullptr: none).
absl::Status CheckMergeDevice(int32_t device, Cache* cache) {
  if (device < -1)
    return absl::InvalidArgumentError(absl::StrFormat(
        "device = %d is not a device: -1 (host memory) or a CUDA ordinal >= 0", device));
  if (cache == nullptr || device == -1) return absl::OkStatus();
  const Backend& b = cache->backend();
  if (b.kind() != BackendKind::kCuda)
    return absl::InvalidArgumentError(absl::StrFormat(
        "device = %d but the cache is on the CPU backend (host memory): give -1, or no cache",
        device));
  if (device != b.device())
    return absl::InvalidArgumentError(absl::StrFormat(
        "device = %d but the cache is on CUDA device %d: give -1 or %d, or no cache", device,
        b.device(), b.device()));
  return absl::OkStatus();
}

}  // namespace

// The one conversion of the caller's arguments; backends read the result.
absl::Status ConvertStepArgs(const swa_step_args_t* args, StepTensors* t) {
  SWA_ASSIGN_OR_RETURN(const swa_step_args_t a, ReadStruct(args, "args"));
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
  t->lse = a.lse;  // NULL (the default) when the caller's struct predates it
  t->positions = a.positions;  // likewise
  return absl::OkStatus();
}

}  // namespace swa::capi

extern "C" {

SWA_API void swa_step_args_init(swa_step_args_t* args) {
  if (args == nullptr) return;
  swa::capi::InitStruct(args);
  args->q_dtype = SWA_DTYPE_FP32;
  args->kv_dtype = SWA_DTYPE_FP32;
  args->out_dtype = SWA_DTYPE_FP32;
}

SWA_API swa_status_t swa_step(swa_cache_t* cache, swa_plan_t* plan, const swa_step_args_t* args) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_RETURN_IF_ERROR(swa::capi::CheckPlan(plan));
    swa::StepTensors tensors;
    SWA_RETURN_IF_ERROR(swa::capi::ConvertStepArgs(args, &tensors));
    if (plan->cache != cache->impl.get())
      return absl::FailedPreconditionError("plan belongs to another cache");
    return swa::RunStep(*cache->impl, *plan->impl, &plan->prepared, tensors);
  });
}

SWA_API swa_status_t swa_cache_stats(const swa_cache_t* cache, swa_cache_stats_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_CHECK_STRUCT(out);
    swa::Cache& c = *cache->impl;
    // Counts the backend holds on the device (CUDA graph decode) join now.
    SWA_ASSIGN_OR_RETURN(const uint64_t device_blocks, c.backend().TakeDeviceNonfiniteBlocks());
    c.counters().nonfinite_blocks.fetch_add(device_blocks, std::memory_order_relaxed);
    swa_cache_stats_t v{};
    v.steps = c.counters().steps.load();
    v.tokens = c.counters().tokens.load();
    v.nonfinite_blocks = c.counters().nonfinite_blocks.load();
    v.slots_in_use = c.slots().num_allocated();
    v.max_slots = c.layout().max_slots();
    v.pool_bytes = c.layout().pool_bytes();
    swa::capi::WriteStruct(v, out);
    return absl::OkStatus();
  });
}

SWA_API void swa_merge_args_init(swa_merge_args_t* args) {
  if (args == nullptr) return;
  swa::capi::InitStruct(args);
  args->dtype = SWA_DTYPE_FP32;
  args->device = -1;
}

// The merge is arithmetic: a cache only picks the backend; without one,
// args->device does (docs/semantics.md, "Merging partial attentions").
SWA_API swa_status_t swa_attention_merge(swa_cache_t* cache, const swa_merge_args_t* args) {
  return Guard([&]() -> absl::Status {
    if (cache != nullptr) SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_ASSIGN_OR_RETURN(const swa_merge_args_t a, swa::capi::ReadStruct(args, "args"));
    swa::MergeWork w;
    SWA_RETURN_IF_ERROR(swa::capi::ConvertMerge(a, &w));
    SWA_RETURN_IF_ERROR(
        swa::capi::CheckMergeDevice(a.device, cache != nullptr ? cache->impl.get() : nullptr));
    if (w.rows == 0) return absl::OkStatus();
    if (cache == nullptr) return swa::MergeWithoutCache(a.device, w);
    return cache->impl->backend().Merge(w);
  });
}

}  // extern "C"
