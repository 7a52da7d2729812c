#include "step/compress_step.h"

#include <cmath>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_format.h"
#include "backend/compress_work.h"
#include "common/byte_overlap.h"
#include "common/status_macros.h"
#include "layout/rope_table.h"
#include "plan/compress_plan.h"

namespace swa {
namespace {

absl::Status Invalid(const std::string& m) { return absl::InvalidArgumentError(m); }

absl::Status CheckTensors(const LayerLayout& l, const CompressTensors& t, int64_t n_tokens,
                          size_t n_windows) {
  const uint32_t d = t.compressor == 0 ? l.compress_head_dim : l.index_head_dim;
  const uint32_t s = t.compressor == 0 ? l.compress_row_values : l.index_row_values;
  if (t.row_width != s)
    return Invalid(absl::StrFormat(
        "row_width = %u: layer %u's %s compressor takes rows of %u values (%s, entry width %u)",
        t.row_width, t.layer, t.compressor == 0 ? "main" : "indexer", s,
        l.compress_kind == CompressKind::kCsa ? "CSA: 2d, Ca | Cb" : "HCA: d", d));
  if (t.rows != n_tokens)
    return Invalid(absl::StrFormat("rows = %d but the plan has %d new tokens", t.rows, n_tokens));
  if (n_tokens > 0) {
    if (t.kv == nullptr) return Invalid("kv is NULL");
    if (t.gate == nullptr) return Invalid("gate is NULL");
    if (t.position_bias == nullptr) return Invalid("position_bias is NULL");
    if (t.norm_weight == nullptr) return Invalid("norm_weight is NULL");
  }
  if (!std::isfinite(t.norm_eps) || t.norm_eps <= 0)
    return Invalid(absl::StrFormat("norm_eps = %g must be finite and > 0", t.norm_eps));
  if (t.out_rows < n_windows)
    return Invalid(absl::StrFormat(
        "out_rows = %u is smaller than the %u entries that close in this step for layer %u "
        "(swa_plan_compress_windows)",
        t.out_rows, n_windows, t.layer));
  if (n_windows > 0 && t.out == nullptr) return Invalid("out is NULL");
  // The rows out receives (one per closing window) share no memory with an
  // input. Sizes cannot overflow: T < 2^31, rows of at most a few thousand values.
  const uint64_t in_elem = t.dtype == Dtype::kBf16 ? 2 : 4;
  const uint64_t out_elem = t.out_dtype == Dtype::kBf16 ? 2 : 4;
  const MemRange out = RangeOf("out", n_windows > 0 ? t.out : nullptr,
                              uint64_t(n_windows) * d * out_elem);
  SWA_RETURN_IF_ERROR(CheckApart(out, RangeOf("kv", t.kv, uint64_t(n_tokens) * s * in_elem)));
  SWA_RETURN_IF_ERROR(CheckApart(out, RangeOf("gate", t.gate, uint64_t(n_tokens) * s * in_elem)));
  SWA_RETURN_IF_ERROR(CheckApart(
      out, RangeOf("position_bias", t.position_bias, uint64_t(l.compress_ratio) * s * 4)));
  SWA_RETURN_IF_ERROR(CheckApart(out, RangeOf("norm_weight", t.norm_weight, uint64_t(d) * 4)));
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckCompressor(const Layout& layout, uint32_t layer, uint32_t compressor) {
  if (layer >= layout.num_layers())
    return absl::OutOfRangeError(absl::StrFormat("layer = %u is out of range (the cache has %u)",
                                                 layer, layout.num_layers()));
  const LayerLayout& l = layout.layer(layer);
  if (!l.typed_compressor())
    return Invalid(absl::StrFormat(
        "layer %u has no typed compressor (compress_kind = %s); declare SWA_COMPRESS_HCA or "
        "SWA_COMPRESS_CSA on its swa_layer_desc_t",
        layer, l.compress_ratio == 0 ? "none" : "opaque"));
  if (compressor > 1 || (compressor == 1 && l.index_head_dim == 0))
    return Invalid(absl::StrFormat(
        "compressor = %u: layer %u has %s (0 = its compressor, 1 = its indexer's)", compressor,
        layer, l.index_head_dim == 0 ? "no indexer compressor" : "two compressors"));
  return absl::OkStatus();
}

absl::Status RunCompressStep(Cache& cache, plan::StepPlan& plan, const CompressTensors& t) {
  if (&plan.slots() != &cache.slots())
    return absl::FailedPreconditionError("plan belongs to another cache");
  const Layout& layout = cache.layout();
  SWA_RETURN_IF_ERROR(CheckCompressor(layout, t.layer, t.compressor));
  if (!plan.built())
    return absl::FailedPreconditionError("plan is not built (build it, or it was cancelled)");
  const LayerLayout& l = layout.layer(t.layer);
  const CompressGeometry g = l.compress_geometry();
  std::vector<CompressWindow> windows;
  plan::PlanCompressWindows(g, plan.seqs(), &windows);
  SWA_RETURN_IF_ERROR(CheckTensors(l, t, plan.n_tokens(), windows.size()));
  std::vector<RowSegment> store;
  plan::PlanCompressStore(g, plan.seqs(), &store);

  const LayerSpec& spec = layout.spec().layers[t.layer];
  RopeTable rope;
  if (spec.compress_rope_dims != 0) {
    RopeSpec r = spec.rope;
    r.style = RopeStyle::kGptj;
    r.dims = spec.compress_rope_dims;
    r.first_dim = 0;
    r.derotate_output = false;
    rope = MakeRopeTable(r);
  }

  SWA_RETURN_IF_ERROR(plan.TakeStepHolds());
  absl::Cleanup release = [&plan] { plan.ReleaseStepHolds(); };
  if (!plan.ClaimCompress(t.layer, t.compressor))
    return absl::FailedPreconditionError(absl::StrFormat(
        "layer %u's compressor %u already ran for this build of the plan: its store has "
        "overwritten ring rows its windows read (run each compressor once per swa_plan_build)",
        t.layer, t.compressor));

  CompressWork w;
  w.geometry = g;
  const bool main = t.compressor == 0;
  w.entry_dim = main ? l.compress_head_dim : l.index_head_dim;
  w.row_values = main ? l.compress_row_values : l.index_row_values;
  w.row_format = spec.compress_row_format;
  w.ring_base = cache.pool() + (main ? l.compress_offset : l.index_offset);
  w.slot_bytes = layout.slot_bytes();
  w.row_bytes = main ? l.compress_entry_bytes : l.index_row_bytes;
  w.windows = windows.data();
  w.n_windows = windows.size();
  w.store = store.data();
  w.n_store = store.size();
  w.kv = t.kv;
  w.gate = t.gate;
  w.dtype = t.dtype;
  w.n_tokens = plan.n_tokens();
  w.position_bias = t.position_bias;
  w.norm_weight = t.norm_weight;
  w.norm_eps = t.norm_eps;
  w.out = t.out;
  w.out_dtype = t.out_dtype;
  w.rope = rope.dims != 0 ? &rope : nullptr;
  w.stream = t.stream;
  if (w.n_windows > 0 || w.n_store > 0) {
    if (absl::Status st = cache.backend().CompressStep(w); !st.ok()) {
      plan.ReleaseCompress(t.layer, t.compressor);  // not executed, as a failed swa_step
      return st;
    }
  }
  plan.MarkExecuted();
  return absl::OkStatus();
}

}  // namespace swa
