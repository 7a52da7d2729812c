// One compressed entry from its window's source rows (docs/semantics.md,
// "Compression state"), in FP32 and in the order of transformers'
// DeepseekV4HCACompressor / DeepseekV4CSACompressor: per feature a softmax
// over the window's slots of gate + position_bias, the kv values weighted by
// it and summed; then RMSNorm over the entry and RoPE on its trailing slice.
// Host and device: the CPU backend runs it per window, a kernel may per
// (window, feature).
#pragma once

#include <math.h>
#include <stdint.h>

#include "common/compress_math.h"
#include "common/host_device.h"
#include "common/mxfp8_math.h"

namespace swa {

// Value i of a row of FP32 or BF16 values.
SWA_HOST_DEVICE float CompressLoad(const void* row, bool bf16, uint32_t i) {
  return bf16 ? codec::Bf16ToFloat(static_cast<const uint16_t*>(row)[i])
              : static_cast<const float*>(row)[i];
}

// Where slot j of a window reads its kv and gate values (the whole row, S_w
// values each); kv == nullptr: the slot is missing (zero weight).
struct CompressSlotSrc {
  const void* kv;
  const void* gate;
  bool bf16;        // the values are BF16
  bool round_bf16;  // FP32 values that the ring keeps as BF16: round them as the ring would
};

// The value index and bias row of feature f of window slot j: HCA reads the
// row's feature f with bias row j; CSA slot j < c reads Ca (feature f, bias
// row j), slot j >= c reads Cb (feature d + f, bias row j - c).
SWA_HOST_DEVICE void CompressSlotIndex(CompressGeometry g, uint32_t d, int32_t j, uint32_t f,
                                       uint32_t* value, int32_t* bias_row) {
  if (g.kind == CompressKind::kCsa && j >= g.rate) {
    *value = d + f;
    *bias_row = j - g.rate;
  } else {
    *value = f;
    *bias_row = j;
  }
}

SWA_HOST_DEVICE float CompressSlotValue(const CompressSlotSrc& s, const void* p, uint32_t i) {
  float v = CompressLoad(p, s.bf16, i);
  if (s.round_bf16) v = codec::Bf16ToFloat(codec::Bf16FromFloat(v));
  return v;
}

// Feature f of the pooled (un-normalised) entry: sum_j softmax_j(gate + bias) kv.
// `slots` holds S = CompressWindowSlots(g) sources; bias is [c, row_values].
SWA_HOST_DEVICE float CompressPoolFeature(CompressGeometry g, uint32_t d, uint32_t row_values,
                                          const CompressSlotSrc* slots, const float* bias,
                                          uint32_t f) {
  const int32_t n = CompressWindowSlots(g);
  float mx = -INFINITY;
  for (int32_t j = 0; j < n; ++j) {
    if (slots[j].kv == nullptr) continue;
    uint32_t vi;
    int32_t br;
    CompressSlotIndex(g, d, j, f, &vi, &br);
    const float logit = CompressSlotValue(slots[j], slots[j].gate, vi) +
                        bias[static_cast<size_t>(br) * row_values + vi];
    mx = logit > mx ? logit : mx;
  }
  float sum = 0.0f;
  for (int32_t j = 0; j < n; ++j) {
    if (slots[j].kv == nullptr) continue;
    uint32_t vi;
    int32_t br;
    CompressSlotIndex(g, d, j, f, &vi, &br);
    const float logit = CompressSlotValue(slots[j], slots[j].gate, vi) +
                        bias[static_cast<size_t>(br) * row_values + vi];
    sum += expf(logit - mx);
  }
  float acc = 0.0f;
  for (int32_t j = 0; j < n; ++j) {
    if (slots[j].kv == nullptr) continue;
    uint32_t vi;
    int32_t br;
    CompressSlotIndex(g, d, j, f, &vi, &br);
    const float logit = CompressSlotValue(slots[j], slots[j].gate, vi) +
                        bias[static_cast<size_t>(br) * row_values + vi];
    const float w = expf(logit - mx) / sum;
    acc += CompressSlotValue(slots[j], slots[j].kv, vi) * w;
  }
  return acc;
}

// RMSNorm of a pooled entry x[d] in place: x * rsqrt(mean(x^2) + eps) * weight.
SWA_HOST_DEVICE void CompressNorm(float* x, uint32_t d, const float* weight, float eps) {
  float ss = 0.0f;
  for (uint32_t f = 0; f < d; ++f) ss += x[f] * x[f];
  const float r = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
  for (uint32_t f = 0; f < d; ++f) x[f] = weight[f] * (x[f] * r);
}

}  // namespace swa
