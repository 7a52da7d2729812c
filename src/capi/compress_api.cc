// The Compression state section (docs/semantics.md, "Compression state"):
// swa_plan_compress_windows, swa_plan_compress_store_segments,
// swa_cache_compress_view, swa_compress_args_init, swa_compress_step,
// swa_cache_set_save_compression.
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "capi/enums.h"
#include "capi/error.h"
#include "capi/handles.h"
#include "capi/struct_versions.h"
#include "common/status_macros.h"
#include "plan/compress_plan.h"
#include "step/compress_step.h"

using swa::capi::Guard;

static_assert(sizeof(swa_compress_window_t) == sizeof(swa::CompressWindow));
static_assert(sizeof(swa_segment_t) == sizeof(swa::RowSegment));
static_assert(offsetof(swa_compress_window_t, new_row) == offsetof(swa::CompressWindow, new_row));
static_assert(SWA_COMPRESS_CSA == static_cast<int>(swa::CompressKind::kCsa) &&
              SWA_COMPRESS_HCA == static_cast<int>(swa::CompressKind::kHca));

namespace swa::capi {
namespace {

// The plan, built, and the layer's ring geometry.
absl::StatusOr<CompressGeometry> PlanGeometry(const swa_plan_t* plan, uint32_t layer) {
  SWA_RETURN_IF_ERROR(CheckPlan(plan));
  const Layout& layout = plan->cache->layout();
  SWA_RETURN_IF_ERROR(CheckCompressor(layout, layer, 0));
  if (!plan->impl->built())
    return absl::FailedPreconditionError("the plan is not built (never built, or cancelled)");
  return layout.layer(layer).compress_geometry();
}

template <typename C, typename T>
absl::Status Export(const std::vector<T>& items, C* out, size_t capacity, size_t* count,
                    const char* what) {
  if (out != nullptr) {
    if (capacity < items.size())
      return absl::OutOfRangeError(absl::StrFormat("capacity = %u is smaller than the plan's %u %s",
                                                   capacity, items.size(), what));
    if (!items.empty()) std::memcpy(out, items.data(), items.size() * sizeof(T));
  }
  *count = items.size();
  return absl::OkStatus();
}

absl::Status ConvertCompressArgs(const swa_compress_args_t* args, CompressTensors* t) {
  SWA_ASSIGN_OR_RETURN(const swa_compress_args_t a, ReadStruct(args, "args"));
  SWA_ASSIGN_OR_RETURN(t->dtype, ConvertDtype(a.dtype, "dtype"));
  SWA_ASSIGN_OR_RETURN(t->out_dtype, ConvertDtype(a.out_dtype, "out_dtype"));
  t->layer = a.layer;
  t->compressor = a.compressor;
  t->kv = a.kv;
  t->gate = a.gate;
  t->row_width = a.row_width;
  t->rows = a.rows;
  t->position_bias = a.position_bias;
  t->norm_weight = a.norm_weight;
  t->norm_eps = a.norm_eps;
  t->out = a.out;
  t->out_rows = a.out_rows;
  t->stream = a.stream;
  return absl::OkStatus();
}

}  // namespace
}  // namespace swa::capi

extern "C" {

SWA_API swa_status_t swa_plan_compress_windows(const swa_plan_t* plan, uint32_t layer,
                                               swa_compress_window_t* out, size_t capacity,
                                               size_t* count) {
  return Guard([&]() -> absl::Status {
    SWA_ASSIGN_OR_RETURN(const swa::CompressGeometry g, swa::capi::PlanGeometry(plan, layer));
    SWA_CHECK_NOT_NULL(count);
    std::vector<swa::CompressWindow> w;
    swa::plan::PlanCompressWindows(g, plan->impl->seqs(), &w);
    return swa::capi::Export(w, out, capacity, count, "windows");
  });
}

SWA_API swa_status_t swa_plan_compress_store_segments(const swa_plan_t* plan, uint32_t layer,
                                                      swa_segment_t* out, size_t capacity,
                                                      size_t* count) {
  return Guard([&]() -> absl::Status {
    SWA_ASSIGN_OR_RETURN(const swa::CompressGeometry g, swa::capi::PlanGeometry(plan, layer));
    SWA_CHECK_NOT_NULL(count);
    std::vector<swa::RowSegment> s;
    swa::plan::PlanCompressStore(g, plan->impl->seqs(), &s);
    return swa::capi::Export(s, out, capacity, count, "segments");
  });
}

SWA_API swa_status_t swa_cache_compress_view(const swa_cache_t* cache, uint32_t layer,
                                             uint32_t compressor, swa_tensor_view_t* out) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_CHECK_STRUCT(out);
    swa::Cache& c = *cache->impl;
    const swa::Layout& lay = c.layout();
    SWA_RETURN_IF_ERROR(swa::CheckCompressor(lay, layer, compressor));
    const swa::LayerLayout& l = lay.layer(layer);
    const uint32_t row = compressor == 0 ? l.compress_entry_bytes : l.index_row_bytes;
    swa_tensor_view_t v{};
    v.data = c.pool() + (compressor == 0 ? l.compress_offset : l.index_offset);
    v.backend = static_cast<swa_backend_t>(c.backend().kind());
    v.device = c.backend().device();
    v.ndim = 4;
    const int64_t shape[4] = {lay.max_slots(), l.compress_len, 2, row / 2};
    const int64_t strides[4] = {static_cast<int64_t>(lay.slot_bytes()), row, row / 2, 1};
    std::memcpy(v.shape, shape, sizeof shape);
    std::memcpy(v.strides, strides, sizeof strides);
    swa::capi::WriteStruct(v, out);
    return absl::OkStatus();
  });
}

SWA_API void swa_compress_args_init(swa_compress_args_t* args) {
  if (args == nullptr) return;
  swa::capi::InitStruct(args);
  args->dtype = SWA_DTYPE_FP32;
  args->out_dtype = SWA_DTYPE_FP32;
  args->norm_eps = 1e-6f;
}

SWA_API swa_status_t swa_compress_step(swa_cache_t* cache, swa_plan_t* plan,
                                       const swa_compress_args_t* args) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_RETURN_IF_ERROR(swa::capi::CheckPlan(plan));
    swa::CompressTensors t;
    SWA_RETURN_IF_ERROR(swa::capi::ConvertCompressArgs(args, &t));
    return swa::RunCompressStep(*cache->impl, *plan->impl, t);
  });
}

SWA_API swa_status_t swa_cache_set_save_compression(swa_cache_t* cache, uint32_t enable) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    if (enable > 1)
      return absl::InvalidArgumentError(absl::StrFormat("enable = %u must be 0 or 1", enable));
    cache->impl->set_save_compression(enable == 1);
    return absl::OkStatus();
  });
}

}  // extern "C"
