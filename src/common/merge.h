// The weights that merge two partial attentions over disjoint key sets
// (docs/semantics.md, "Merging partial attentions"): the one home of the
// formula, for the CPU backend and the CUDA kernel.
#pragma once

#include <math.h>

#include "common/host_device.h"

namespace swa {

struct MergeWeights {
  float a;      // weight of part A's output
  float b;      // weight of part B's output
  float lse;    // the merged LSE
  bool read_a;  // part A's output enters the result (even at weight 0)
  bool read_b;
};

// With m = max(la, lb): w = exp(l - m) / (exp(la - m) + exp(lb - m)), in the
// same bits whichever part is A. A NaN LSE poisons the row: NaN weights and
// LSE. An LSE of -inf or +inf is an empty part (weight 0): -inf is this
// library's and FA3's mark, +inf that of FA2 and FlashMLA, which also write it
// for a row whose sum is NaN, with a NaN output; so a +inf part's output is
// still read, and a NaN there is not hidden. Only a -inf part's output is
// never read (docs/semantics.md, "Merging partial attentions").
SWA_HOST_DEVICE MergeWeights MergeOf(float la, float lb) {
  if (isnan(la) || isnan(lb)) return MergeWeights{NAN, NAN, NAN, true, true};
  const bool read_a = la != -INFINITY, read_b = lb != -INFINITY;
  if (la == INFINITY) la = -INFINITY;
  if (lb == INFINITY) lb = -INFINITY;
  const float m = la > lb ? la : lb;  // no NaN left: the same m in either order
  if (m == -INFINITY) return MergeWeights{0.0f, 0.0f, -INFINITY, read_a, read_b};
  const float ea = expf(la - m), eb = expf(lb - m);
  const float sum = ea + eb;
  return MergeWeights{ea / sum, eb / sum, m + logf(sum), read_a, read_b};
}

// One merged value. A part with a finite LSE is read even when its weight
// rounded to 0 (exp(-200) underflows), so a NaN or Inf in its output still
// reaches the result: its true weight is not 0.
SWA_HOST_DEVICE float MergeValue(const MergeWeights& w, float oa, float ob) {
  float r = 0.0f;
  if (w.read_a) r += w.a * oa;
  if (w.read_b) r += w.b * ob;
  return r;
}

}  // namespace swa
