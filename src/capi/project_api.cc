// The Projection section: swa_project_args_init, swa_project.
#include <cstring>

#include "capi/enums.h"
#include "capi/error.h"
#include "capi/handles.h"
#include "capi/struct_versions.h"
#include "common/byte_overlap.h"
#include "common/checked_math.h"
#include "common/status_macros.h"

using swa::capi::Guard;

namespace {

// Arguments -> ProjectWork, every value checked.
absl::Status ToWork(const swa_project_args_t& a, swa::ProjectWork* w) {
  SWA_ASSIGN_OR_RETURN(w->out_dtype, swa::capi::ConvertDtype(a.out_dtype, "out_dtype"));
  SWA_ASSIGN_OR_RETURN(const int32_t layout,
                       swa::capi::CheckEnum(a.weight_layout, {SWA_WEIGHT_OUT_IN, SWA_WEIGHT_IN_OUT},
                                            "swa_weight_layout_t", "weight_layout"));
  if (a.n_tokens < 0)
    return absl::InvalidArgumentError(absl::StrFormat("n_tokens = %d is negative", a.n_tokens));
  if (a.hidden_dim == 0) return absl::InvalidArgumentError("hidden_dim = 0");
  SWA_ASSIGN_OR_RETURN(
      const uint64_t n,
      swa::CheckedSum("the output width", {{"q_dim", a.q_dim}, {"kv_dim", a.kv_dim}}));
  if (n == 0) return absl::InvalidArgumentError("q_dim + kv_dim = 0: nothing to project");
  // Element counts of every tensor (swa::kMaxTensorSize bounds their byte sizes
  // and every offset the backends compute into them).
  const swa::SizeTerm tokens{"n_tokens", uint64_t(a.n_tokens)}, in{"hidden_dim", a.hidden_dim},
      out{"(q_dim + kv_dim)", n};
  SWA_RETURN_IF_ERROR(swa::CheckedProduct("hidden", {tokens, in}).status());
  SWA_RETURN_IF_ERROR(swa::CheckedProduct("weight", {in, out}).status());
  SWA_RETURN_IF_ERROR(swa::CheckedProduct("out", {tokens, out}).status());
  if (a.n_tokens > 0) {
    if (a.hidden == nullptr) return swa::capi::NullArg("hidden");
    if (a.weight == nullptr) return swa::capi::NullArg("weight");
    if (a.out == nullptr) return swa::capi::NullArg("out");
    // The output must not share memory with an input (no in-place form).
    const uint64_t t = uint64_t(a.n_tokens);
    const swa::MemRange o = swa::RangeOf(
        "out", a.out, t * n * (w->out_dtype == swa::Dtype::kBf16 ? 2 : 4));
    SWA_RETURN_IF_ERROR(swa::CheckApart(o, swa::RangeOf("hidden", a.hidden, t * a.hidden_dim * 2)));
    SWA_RETURN_IF_ERROR(
        swa::CheckApart(o, swa::RangeOf("weight", a.weight, uint64_t(a.hidden_dim) * n * 2)));
  }
  w->hidden = static_cast<const uint16_t*>(a.hidden);
  w->weight = static_cast<const uint16_t*>(a.weight);
  w->layout = static_cast<swa::WeightLayout>(layout);
  w->out = a.out;
  w->tokens = a.n_tokens;
  w->in_dim = a.hidden_dim;
  w->out_dim = static_cast<int64_t>(n);
  w->stream = a.stream;
  return absl::OkStatus();
}

}  // namespace

extern "C" {

SWA_API void swa_project_args_init(swa_project_args_t* args) {
  if (args == nullptr) return;
  swa::capi::InitStruct(args);
  args->weight_layout = SWA_WEIGHT_OUT_IN;
  args->out_dtype = SWA_DTYPE_FP32;
}

SWA_API swa_status_t swa_project(swa_cache_t* cache, const swa_project_args_t* args) {
  return Guard([&]() -> absl::Status {
    SWA_RETURN_IF_ERROR(swa::capi::CheckCache(cache));
    SWA_ASSIGN_OR_RETURN(const swa_project_args_t a, swa::capi::ReadStruct(args, "args"));
    swa::ProjectWork w;
    SWA_RETURN_IF_ERROR(ToWork(a, &w));
    if (w.tokens == 0) return absl::OkStatus();
    return cache->impl->backend().Project(w);
  });
}

}  // extern "C"
