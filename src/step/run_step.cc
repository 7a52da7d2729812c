#include "step/run_step.h"

#include <cmath>
#include <cstddef>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace swa {
namespace {

static_assert(sizeof(plan::Segment) == sizeof(RowSegment) &&
              offsetof(plan::Segment, dst_row) == offsetof(RowSegment, dst_row) &&
              offsetof(plan::Segment, src_row) == offsetof(RowSegment, src_row) &&
              offsetof(plan::Segment, count) == offsetof(RowSegment, count));

absl::Status CheckRequest(const Cache& cache, const plan::StepPlan& plan, const StepRequest& r) {
  if (&plan.cache() != &cache)
    return absl::FailedPreconditionError("plan belongs to another cache");
  if (!plan.built())
    return absl::FailedPreconditionError("plan is not built (build it, or it was cancelled)");
  const Layout& lay = cache.layout();
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
  if (spec.head_dim % 32 != 0)
    return absl::UnimplementedError(absl::StrFormat(
        "layer %u: head_dim = %u is not a multiple of 32, which the step backends need",
        r.layer, spec.head_dim));
  return absl::OkStatus();
}

}  // namespace

absl::Status RunStep(Cache& cache, plan::StepPlan& plan, const StepRequest& r) {
  SWA_RETURN_IF_ERROR(CheckRequest(cache, plan, r));
  const Layout& lay = cache.layout();
  const LayerSpec& spec = lay.spec().layers[r.layer];
  const LayerLayout& ll = lay.layer(r.layer);

  // The slots may have been freed since the plan was built.
  {
    absl::MutexLock lock(&cache.slots().mu());
    for (const plan::PlannedSeq& s : plan.seqs())
      if (absl::Status st = cache.slots().CheckAllocatedLocked(s.slot); !st.ok())
        return absl::FailedPreconditionError(
            absl::StrFormat("the plan's slot %u was freed after the plan was built", s.slot));
  }

  thread_local std::vector<StepSeq> seqs;
  seqs.clear();
  for (const plan::PlannedSeq& s : plan.seqs())
    seqs.push_back({s.slot, s.seqlen_q, s.seqlen_k, s.q_start, s.valid_start, s.token_offset});

  StepWork w;
  w.ring_base = cache.pool() + ll.ring_offset;
  w.slot_bytes = lay.slot_bytes();
  w.bytes_per_token = ll.bytes_per_token;
  w.vec_bytes = ll.vec_bytes;
  w.ring_len = static_cast<int32_t>(lay.ring_len());
  w.window = static_cast<int32_t>(lay.window());
  w.format = spec.format;
  w.scale_mode = lay.spec().scale_mode;
  w.q_heads = static_cast<int>(spec.q_heads);
  w.kv_heads = static_cast<int>(spec.kv_heads);
  w.head_dim = static_cast<int>(spec.head_dim);
  w.shared_kv = spec.shared_kv;
  w.staged = plan.path() == plan::Path::kStaged;
  w.seqs = seqs.data();
  w.n_seqs = static_cast<uint32_t>(seqs.size());
  w.n_tokens = plan.n_tokens();
  w.offset_len = plan.offset_len().data();
  w.load_segments = reinterpret_cast<const RowSegment*>(plan.load_segments().data());
  w.n_load_segments = plan.load_segments().size();
  w.pivots = plan.pivots().data();
  w.store_rows = plan.store_rows().data();
  w.q = r.q;
  w.q_dtype = r.q_dtype;
  w.k_new = r.k_new;
  w.v_new = r.v_new;
  w.kv_dtype = r.kv_dtype;
  w.out = r.out;
  w.out_dtype = r.out_dtype;
  w.sinks = r.sinks;
  w.scale = r.softmax_scale != 0 ? r.softmax_scale
                                 : 1.0f / std::sqrt(static_cast<float>(spec.head_dim));
  w.stream = r.stream;

  StepResult result;
  SWA_RETURN_IF_ERROR(cache.backend().RunStep(w, &result));
  plan.MarkExecuted();
  CacheCounters& c = cache.counters();
  c.steps.fetch_add(1, std::memory_order_relaxed);
  c.tokens.fetch_add(static_cast<uint64_t>(w.n_tokens), std::memory_order_relaxed);
  c.nonfinite_blocks.fetch_add(result.nonfinite_blocks, std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace swa
