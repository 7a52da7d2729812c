#include "step/step_tensors.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "common/byte_overlap.h"
#include "common/status_macros.h"

namespace swa {

namespace {

uint64_t ElemBytes(Dtype dtype) { return dtype == Dtype::kBf16 ? 2 : 4; }

// The outputs against every other argument (docs/step.md, "Arguments"): out
// may be exactly q (in place: the same start and bytes), nothing else may
// share memory with out or lse. Sizes cannot overflow: T < 2^31, heads <=
// 2^12, D <= 2^10, elements <= 4 bytes.
absl::Status CheckStepOverlaps(const LayerSpec& spec, const StepTensors& t, int64_t n_tokens,
                               bool host_positions) {
  const uint64_t T = uint64_t(n_tokens), hq = spec.q_heads, hkv = spec.kv_heads,
                 d = spec.head_dim;
  const MemRange out = RangeOf("out", t.out, T * hq * d * ElemBytes(t.out_dtype));
  const MemRange lse = RangeOf("lse", t.lse, T * hq * sizeof(float));
  const MemRange q = RangeOf("q", t.q, T * hq * d * ElemBytes(t.q_dtype));
  const MemRange inputs[] = {
      RangeOf("k_new", t.k_new, T * hkv * d * ElemBytes(t.kv_dtype)),
      RangeOf("v_new", t.v_new, T * hkv * d * ElemBytes(t.kv_dtype)),
      RangeOf("sinks", t.sinks, hq * sizeof(float)),
      // Host memory on every backend: beside device tensors it is compared with nothing.
      RangeOf("positions", host_positions ? t.positions : nullptr, T * sizeof(int32_t))};
  SWA_RETURN_IF_ERROR(CheckApart(out, q, /*may_equal=*/true));
  SWA_RETURN_IF_ERROR(CheckApart(lse, q));
  SWA_RETURN_IF_ERROR(CheckApart(lse, out));
  for (const MemRange& in : inputs) {
    SWA_RETURN_IF_ERROR(CheckApart(out, in));
    SWA_RETURN_IF_ERROR(CheckApart(lse, in));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckStepTensors(const Layout& lay, const StepTensors& t, bool has_tokens,
                              int64_t n_tokens, bool host_positions) {
  if (t.layer >= lay.num_layers())
    return absl::OutOfRangeError(absl::StrFormat(
        "layer = %u is out of range: the cache has %u layers", t.layer, lay.num_layers()));
  const LayerSpec& spec = lay.spec().layers[t.layer];
  if (has_tokens && t.q == nullptr) return absl::InvalidArgumentError("q is NULL");
  if (has_tokens && t.k_new == nullptr) return absl::InvalidArgumentError("k_new is NULL");
  if (has_tokens && t.out == nullptr) return absl::InvalidArgumentError("out is NULL");
  if (spec.shared_kv && t.v_new != nullptr)
    return absl::InvalidArgumentError(absl::StrFormat(
        "v_new is not NULL but layer %u shares one vector for K and V", t.layer));
  if (has_tokens && !spec.shared_kv && t.v_new == nullptr)
    return absl::InvalidArgumentError(absl::StrFormat(
        "v_new is NULL but layer %u stores separate K and V", t.layer));
  if (spec.has_sinks && t.sinks == nullptr)
    return absl::InvalidArgumentError(
        absl::StrFormat("sinks is NULL but layer %u has attention sinks", t.layer));
  if (!spec.has_sinks && t.sinks != nullptr)
    return absl::InvalidArgumentError(
        absl::StrFormat("sinks is given but layer %u has no attention sinks", t.layer));
  if (!std::isfinite(t.softmax_scale) || t.softmax_scale < 0)
    return absl::InvalidArgumentError(
        absl::StrFormat("softmax_scale = %g is not a finite value >= 0", t.softmax_scale));
  return CheckStepOverlaps(spec, t, n_tokens, host_positions);
}

absl::Status CheckPositions(const int32_t* positions, int64_t n_tokens) {
  if (positions == nullptr) return absl::OkStatus();
  // Every int32 >= 0 is a valid angle: inv_freq <= 1 (theta > 1), so
  // |pos * inv_freq| < 2^31, as for cache positions.
  for (int64_t t = 0; t < n_tokens; ++t)
    if (positions[t] < 0)
      return absl::InvalidArgumentError(absl::StrFormat(
          "positions[%d] = %d is negative: RoPE positions must be >= 0", t, positions[t]));
  return absl::OkStatus();
}

float ResolveSoftmaxScale(float softmax_scale, const StepLayer& layer) {
  if (softmax_scale != 0) return softmax_scale;
  if (layer.softmax_scale != 0) return layer.softmax_scale;
  return 1.0f / std::sqrt(static_cast<float>(layer.head_dim));
}

}  // namespace swa
