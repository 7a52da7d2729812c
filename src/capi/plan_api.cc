// The Plan section: swa_plan_*, the step planner through the C ABI.
#include <cstring>
#include <memory>

#include "capi/enums.h"
#include "capi/error.h"
#include "capi/handles.h"
#include "capi/struct_versions.h"
#include "common/status_macros.h"

namespace swa::capi {
namespace {

using plan::Path;
using plan::StepPlan;

// The C records are read and written in place as the internal ones.
static_assert(sizeof(swa_seq_t) == sizeof(SeqDesc));
static_assert(offsetof(swa_seq_t, slot) == offsetof(SeqDesc, slot));
static_assert(offsetof(swa_seq_t, seqlen_q) == offsetof(SeqDesc, seqlen_q));
static_assert(offsetof(swa_seq_t, seqlen_k) == offsetof(SeqDesc, seqlen_k));
static_assert(offsetof(swa_seq_t, valid_start) == offsetof(SeqDesc, valid_start));
static_assert(sizeof(swa_segment_t) == sizeof(RowSegment));
static_assert(offsetof(swa_segment_t, dst_row) == offsetof(RowSegment, dst_row));
static_assert(offsetof(swa_segment_t, src_row) == offsetof(RowSegment, src_row));
static_assert(offsetof(swa_segment_t, count) == offsetof(RowSegment, count));
static_assert(static_cast<int>(SWA_PLAN_PATH_RING) == static_cast<int>(Path::kRing));
static_assert(static_cast<int>(SWA_PLAN_PATH_STAGED) == static_cast<int>(Path::kStaged));
static_assert(static_cast<int>(SWA_INDEX_PAD_LAST_ROW) ==
              static_cast<int>(plan::IndexPad::kLastRow));

absl::Status CheckBuilt(const StepPlan& p) {
  if (!p.built())
    return absl::FailedPreconditionError("the plan is not built (never built, or cancelled)");
  return absl::OkStatus();
}

absl::Status CheckPath(const StepPlan& p, Path want, const char* what) {
  SWA_RETURN_IF_ERROR(CheckBuilt(p));
  if (p.path() != want)
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s exists only on the %s path; this plan is on the %s path (max seqlen_q = %d, "
        "R - W + 1 = %d)",
        what, want == Path::kRing ? "ring-only" : "staged",
        p.path() == Path::kRing ? "ring-only" : "staged", p.max_seqlen_q(),
        p.ring_len() - p.window() + 1));
  return absl::OkStatus();
}

absl::Status ConvertOptions(const swa_plan_options_t* in, plan::PlanOptions* out) {
  if (in == nullptr) return absl::OkStatus();
  SWA_ASSIGN_OR_RETURN(const swa_plan_options_t o, ReadStruct(in, "options"));
  SWA_ASSIGN_OR_RETURN(const int32_t pad,
                       CheckEnum(o.index_pad, {SWA_INDEX_PAD_NEG1, SWA_INDEX_PAD_LAST_ROW},
                                 "swa_index_pad_t", "options.index_pad"));
  if (o.materialize_index > 1)
    return absl::InvalidArgumentError(absl::StrFormat(
        "options.materialize_index = %u must be 0 or 1", o.materialize_index));
  out->index_pad = static_cast<plan::IndexPad>(pad);
  out->materialize_index = o.materialize_index == 1;
  return absl::OkStatus();
}

absl::Status ExportSegments(absl::Span<const RowSegment> segs, swa_segment_t* out,
                            size_t capacity, size_t* count) {
  SWA_CHECK_NOT_NULL(count);
  if (out != nullptr) {
    if (capacity < segs.size())
      return absl::OutOfRangeError(absl::StrFormat(
          "capacity = %u is smaller than the plan's %u segments", capacity, segs.size()));
    if (!segs.empty()) std::memcpy(out, segs.data(), segs.size() * sizeof(swa_segment_t));
  }
  *count = segs.size();
  return absl::OkStatus();
}

}  // namespace
}  // namespace swa::capi

using swa::capi::Guard;
using swa::plan::Path;

extern "C" {

SWA_API void swa_plan_options_init(swa_plan_options_t* options) {
  if (options == nullptr) return;
  swa::capi::InitStruct(options);
  options->index_pad = SWA_INDEX_PAD_NEG1;
  options->materialize_index = 1;
}

SWA_API swa_status_t swa_plan_create_with_options(swa_cache_t* cache,
                                                  const swa_plan_options_t* options,
                                                  swa_plan_t** out) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_CHECK_NOT_NULL(out);
    swa::plan::PlanOptions opts;
    SWA_RETURN_IF_ERROR(swa::capi::ConvertOptions(options, &opts));
    swa::Cache& c = *cache->impl;
    auto plan = std::make_unique<swa_plan>();
    plan->cache = &c;
    plan->impl = std::make_unique<swa::plan::StepPlan>(&c.slots(), c.layout(), opts);
    *out = plan.release();
    return absl::OkStatus();
  });
}

SWA_API swa_status_t swa_plan_create(swa_cache_t* cache, swa_plan_t** out) {
  return swa_plan_create_with_options(cache, nullptr, out);
}

SWA_API void swa_plan_destroy(swa_plan_t* plan) { delete plan; }

SWA_API swa_status_t swa_plan_build(swa_plan_t* plan, const swa_seq_t* seqs, uint32_t n_seqs) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckPlan(plan));
    if (seqs == nullptr && n_seqs > 0) return swa::capi::NullArg("seqs");
    return plan->impl->Build(
        absl::Span<const swa::SeqDesc>(reinterpret_cast<const swa::SeqDesc*>(seqs), n_seqs));
  });
}

SWA_API swa_status_t swa_plan_cancel(swa_plan_t* plan) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckPlan(plan));
    return plan->impl->Cancel();
  });
}

SWA_API swa_status_t swa_plan_info(const swa_plan_t* plan, swa_plan_info_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckPlan(plan));
    SWA_CHECK_STRUCT(out);
    const swa::plan::StepPlan& p = *plan->impl;
    swa_plan_info_t v{};
    v.path = static_cast<swa_plan_path_t>(p.path());
    v.window = static_cast<uint32_t>(p.window());
    v.ring_len = static_cast<uint32_t>(p.ring_len());
    if (p.built()) {
      v.n_seqs = p.n_seqs();
      v.n_tokens = p.n_tokens();
      v.executed = p.executed() ? 1 : 0;
      v.max_seqlen_q = p.max_seqlen_q();
      v.max_seqlen_k = p.max_seqlen_k();
      v.n_load_segments = static_cast<uint32_t>(p.load_segments().size());
      v.n_store_segments = static_cast<uint32_t>(p.store_segments().size());
      if (p.path() == Path::kStaged) {
        v.history_rows = p.history_rows();
        v.staging_rows = p.history_rows() + p.n_tokens();
        v.pivot_elems = 4 * uint64_t(p.n_tokens());
      } else {
        v.decode_index_elems = uint64_t(p.n_tokens()) * uint64_t(p.window());
      }
    }
    swa::capi::WriteStruct(v, out);
    return absl::OkStatus();
  });
}

SWA_API swa_status_t swa_plan_decode_index(const swa_plan_t* plan, int32_t* offset_len,
                                           int32_t* index) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckPlan(plan));
    if (offset_len == nullptr && index == nullptr)
      return absl::InvalidArgumentError("offset_len and index are both NULL: nothing to export");
    SWA_RETURN_IF_ERROR(swa::capi::CheckPath(*plan->impl, Path::kRing, "the decode index"));
    plan->impl->WriteDecodeIndex(offset_len, index);
    return absl::OkStatus();
  });
}

SWA_API swa_status_t swa_plan_load_segments(const swa_plan_t* plan, swa_segment_t* out,
                                            size_t capacity, size_t* count) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckPlan(plan));
    SWA_CHECK_NOT_NULL(count);
    SWA_RETURN_IF_ERROR(swa::capi::CheckPath(*plan->impl, Path::kStaged, "the load plan"));
    return swa::capi::ExportSegments(plan->impl->load_segments(), out, capacity, count);
  });
}

SWA_API swa_status_t swa_plan_pivots(const swa_plan_t* plan, int32_t* pivots) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckPlan(plan));
    SWA_CHECK_NOT_NULL(pivots);
    SWA_RETURN_IF_ERROR(swa::capi::CheckPath(*plan->impl, Path::kStaged, "the pivots array"));
    const auto piv = plan->impl->pivots();
    if (!piv.empty()) std::memcpy(pivots, piv.data(), piv.size() * sizeof(int32_t));
    return absl::OkStatus();
  });
}

SWA_API swa_status_t swa_plan_store_rows(const swa_plan_t* plan, int32_t* rows) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckPlan(plan));
    SWA_CHECK_NOT_NULL(rows);
    SWA_RETURN_IF_ERROR(swa::capi::CheckBuilt(*plan->impl));
    const auto r = plan->impl->store_rows();
    if (!r.empty()) std::memcpy(rows, r.data(), r.size() * sizeof(int32_t));
    return absl::OkStatus();
  });
}

SWA_API swa_status_t swa_plan_store_segments(const swa_plan_t* plan, swa_segment_t* out,
                                             size_t capacity, size_t* count) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckPlan(plan));
    SWA_CHECK_NOT_NULL(count);
    SWA_RETURN_IF_ERROR(swa::capi::CheckBuilt(*plan->impl));
    return swa::capi::ExportSegments(plan->impl->store_segments(), out, capacity, count);
  });
}

SWA_API swa_status_t swa_plan_seq_offsets(const swa_plan_t* plan, int32_t* cu_seqlens_q,
                                          int32_t* q_start, int32_t* valid_start) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckPlan(plan));
    const swa::plan::StepPlan& p = *plan->impl;
    SWA_RETURN_IF_ERROR(swa::capi::CheckBuilt(p));
    const auto cu = p.cu_seqlens();
    if (cu_seqlens_q != nullptr) std::memcpy(cu_seqlens_q, cu.data(), cu.size() * sizeof(int32_t));
    const auto seqs = p.seqs();
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (q_start != nullptr) q_start[i] = seqs[i].q_start;
      if (valid_start != nullptr) valid_start[i] = seqs[i].valid_start;
    }
    return absl::OkStatus();
  });
}

}  // extern "C"
