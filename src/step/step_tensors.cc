#include "step/step_tensors.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace swa {

absl::Status CheckStepTensors(const Layout& lay, const StepTensors& t, bool has_tokens) {
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
  return absl::OkStatus();
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
