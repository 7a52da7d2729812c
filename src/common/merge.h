// The weights that merge two partial attentions over disjoint key sets
// (docs/semantics.md, "Merging partial attentions"): the one home of the
// formula, for the CPU backend and the CUDA kernel.
#pragma once

#include <math.h>

#include "common/host_device.h"

namespace swa {

struct MergeWeights {
  float a;    // weight of part A's output
  float b;    // weight of part B's output
  float lse;  // the merged LSE
};

// With m = max(la, lb): w = exp(l - m) / (exp(la - m) + exp(lb - m)). Both
// -inf: zero weights and -inf. A NaN LSE gives NaN weights (never hidden).
SWA_HOST_DEVICE MergeWeights MergeOf(float la, float lb) {
  const float m = la > lb ? la : lb;  // a NaN in la picks lb, and NaN propagates below
  if (m == -INFINITY) return MergeWeights{0.0f, 0.0f, -INFINITY};
  const float ea = expf(la - m), eb = expf(lb - m);
  const float sum = ea + eb;
  return MergeWeights{ea / sum, eb / sum, m + logf(sum)};
}

// One merged value; a part with weight 0 contributes nothing, whatever its
// output holds (an empty part's output is never read into the result).
SWA_HOST_DEVICE float MergeValue(const MergeWeights& w, float oa, float ob) {
  float r = 0.0f;
  if (w.a != 0.0f) r += w.a * oa;
  if (w.b != 0.0f) r += w.b * ob;
  return r;
}

}  // namespace swa
