#include "step/run_step.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace swa {
namespace {

absl::Status CheckTensors(const Layout& lay, const plan::StepPlan& plan, const StepTensors& r) {
  if (r.layer >= lay.num_layers())
    return absl::OutOfRangeError(absl::StrFormat(
        "layer = %u is out of range: the cache has %u layers", r.layer, lay.num_layers()));
  const LayerSpec& spec = lay.spec().layers[r.layer];
  const bool any = plan.n_tokens() > 0;
  if (any && r.q == nullptr) return absl::InvalidArgumentError("q is NULL");
  if (any && r.k_new == nullptr) return absl::InvalidArgumentError("k_new is NULL");
  if (any && r.out == nullptr) return absl::InvalidArgumentError("out is NULL");
  if (spec.shared_kv && r.v_new != nullptr)
    return absl::InvalidArgumentError(absl::StrFormat(
        "v_new is not NULL but layer %u shares one vector for K and V", r.layer));
  if (any && !spec.shared_kv && r.v_new == nullptr)
    return absl::InvalidArgumentError(absl::StrFormat(
        "v_new is NULL but layer %u stores separate K and V", r.layer));
  if (spec.has_sinks && r.sinks == nullptr)
    return absl::InvalidArgumentError(
        absl::StrFormat("sinks is NULL but layer %u has attention sinks", r.layer));
  if (!spec.has_sinks && r.sinks != nullptr)
    return absl::InvalidArgumentError(
        absl::StrFormat("sinks is given but layer %u has no attention sinks", r.layer));
  if (!std::isfinite(r.softmax_scale) || r.softmax_scale < 0)
    return absl::InvalidArgumentError(
        absl::StrFormat("softmax_scale = %g is not a finite value >= 0", r.softmax_scale));
  return absl::OkStatus();
}

PlanView ViewOf(const plan::StepPlan& plan) {
  PlanView v;
  v.stamp = plan.stamp();
  v.staged = plan.path() == plan::Path::kStaged;
  v.window = plan.window();
  v.seqs = plan.seqs().data();
  v.n_seqs = plan.n_seqs();
  v.n_tokens = plan.n_tokens();
  v.max_seqlen_q = plan.max_seqlen_q();
  v.offset_len = plan.offset_len().data();
  v.load_segments = plan.load_segments().data();
  v.n_load_segments = plan.load_segments().size();
  v.pivots = plan.pivots().data();
  v.store_rows = plan.store_rows().data();
  return v;
}

}  // namespace

absl::Status RunStep(Cache& cache, plan::StepPlan& plan, std::unique_ptr<PreparedPlan>* prepared,
                     const StepTensors& tensors) {
  if (&plan.slots() != &cache.slots())
    return absl::FailedPreconditionError("plan belongs to another cache");
  if (!plan.built())
    return absl::FailedPreconditionError("plan is not built (build it, or it was cancelled)");
  SWA_RETURN_IF_ERROR(CheckTensors(cache.layout(), plan, tensors));
  SWA_RETURN_IF_ERROR(plan.CheckSlotsStillPlanned());  // freed, reused or busy since the build

  StepWork w;
  w.plan = ViewOf(plan);
  if (*prepared == nullptr || (*prepared)->stamp != w.plan.stamp)
    SWA_RETURN_IF_ERROR(cache.backend().Prepare(w.plan, prepared));
  w.layer = cache.StepLayerOf(tensors.layer);
  w.tensors = &tensors;
  w.scale = tensors.softmax_scale != 0 ? tensors.softmax_scale
                                       : 1.0f / std::sqrt(static_cast<float>(w.layer.head_dim));

  StepResult result;
  SWA_RETURN_IF_ERROR(cache.backend().RunStep(w, **prepared, &result));
  plan.MarkExecuted();
  CacheCounters& c = cache.counters();
  c.steps.fetch_add(1, std::memory_order_relaxed);
  c.tokens.fetch_add(static_cast<uint64_t>(w.plan.n_tokens), std::memory_order_relaxed);
  c.nonfinite_blocks.fetch_add(result.nonfinite_blocks, std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace swa
