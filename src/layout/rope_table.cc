#include "layout/rope_table.h"

#include <algorithm>
#include <cmath>

namespace swa {
namespace {

// The (fractional) rotary dim whose wavelength makes `rotations` turns over
// the original context.
double CorrectionDim(double rotations, double dims, double theta, double max_positions) {
  return dims * std::log(max_positions / (rotations * 2.0 * M_PI)) / (2.0 * std::log(theta));
}

}  // namespace

RopeTable MakeRopeTable(const RopeSpec& spec) {
  RopeTable t;
  if (spec.style == RopeStyle::kNone) return t;
  t.style = spec.style;
  t.first_dim = spec.first_dim;
  t.dims = spec.dims;
  t.derotate_output = spec.derotate_output;
  const uint32_t half = spec.dims / 2;
  t.inv_freq.resize(half);
  const bool yarn = spec.yarn_factor > 1.0f;
  // base^(2i / n) in FP32, as the references compute it.
  std::vector<float> pos_freq(half);
  for (uint32_t i = 0; i < half; ++i)
    pos_freq[i] = std::pow(spec.theta, static_cast<float>(2 * i) / static_cast<float>(spec.dims));
  if (!yarn) {
    for (uint32_t i = 0; i < half; ++i) t.inv_freq[i] = 1.0f / pos_freq[i];
    t.attention_factor = spec.attention_factor > 0 ? spec.attention_factor : 1.0f;
    return t;
  }
  const double n = spec.dims, theta = spec.theta, L = spec.yarn_original_max_positions;
  double lo = CorrectionDim(spec.yarn_beta_fast, n, theta, L);
  double hi = CorrectionDim(spec.yarn_beta_slow, n, theta, L);
  if (spec.yarn_truncate) {
    lo = std::floor(lo);
    hi = std::ceil(hi);
  }
  lo = std::max(lo, 0.0);
  hi = std::min(hi, n - 1);
  if (lo == hi) hi += 0.001;  // no division by zero in the ramp
  const float factor = spec.yarn_factor;
  for (uint32_t i = 0; i < half; ++i) {
    const float ramp = std::clamp(
        (static_cast<float>(i) - static_cast<float>(lo)) / static_cast<float>(hi - lo), 0.0f, 1.0f);
    const float extrapolation = 1.0f - ramp;  // weight of the unscaled frequency
    const float inv_extrapolated = 1.0f / pos_freq[i];
    const float inv_interpolated = 1.0f / (factor * pos_freq[i]);
    t.inv_freq[i] =
        inv_interpolated * (1.0f - extrapolation) + inv_extrapolated * extrapolation;
  }
  t.attention_factor = spec.attention_factor > 0
                           ? spec.attention_factor
                           : static_cast<float>(0.1 * std::log(double(factor)) + 1.0);
  return t;
}

}  // namespace swa
