#include "step/run_step.h"

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "step/step_tensors.h"

namespace swa {
namespace {

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
  SWA_RETURN_IF_ERROR(CheckStepTensors(cache.layout(), tensors, plan.n_tokens() > 0,
                                       plan.n_tokens(),
                                       cache.backend().kind() != BackendKind::kCuda));
  SWA_RETURN_IF_ERROR(CheckPositions(tensors.positions, plan.n_tokens()));
  // Freed, reused or busy since the build? If not, the slots stay held until
  // the step returns: a free, reset, copy, save or restore of one of them on
  // another thread fails instead of racing the step's reads and writes.
  SWA_RETURN_IF_ERROR(plan.TakeStepHolds());
  absl::Cleanup release = [&plan] { plan.ReleaseStepHolds(); };
  if (!plan.ClaimStep(tensors.layer))
    return absl::FailedPreconditionError(absl::StrFormat(
        "layer %u already ran for this build of the plan (run each layer once per "
        "swa_plan_build): a staged step's store has overwritten ring rows its history load "
        "reads, so a second run would attend over the wrong keys",
        tensors.layer));
  absl::Cleanup unclaim = [&plan, &tensors] { plan.ReleaseStep(tensors.layer); };

  StepWork w;
  w.plan = ViewOf(plan);
  if (*prepared == nullptr || (*prepared)->stamp != w.plan.stamp)
    SWA_RETURN_IF_ERROR(cache.backend().Prepare(w.plan, prepared));
  w.layer = cache.StepLayerOf(tensors.layer);
  w.tensors = &tensors;
  w.scale = ResolveSoftmaxScale(tensors.softmax_scale, w.layer);

  StepResult result;
  SWA_RETURN_IF_ERROR(cache.backend().RunStep(w, **prepared, &result));
  std::move(unclaim).Cancel();  // the layer ran: it stays claimed until the next build
  plan.MarkExecuted();
  CacheCounters& c = cache.counters();
  c.steps.fetch_add(1, std::memory_order_relaxed);
  c.tokens.fetch_add(static_cast<uint64_t>(w.plan.n_tokens), std::memory_order_relaxed);
  c.nonfinite_blocks.fetch_add(result.nonfinite_blocks, std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace swa
