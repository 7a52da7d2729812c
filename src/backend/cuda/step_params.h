// Kernel parameters of one layer's step, filled in one place for the
// host-planned step (cuda_step.cc) and the device-planned decode
// (decode_graph.cc): the layer's geometry and the caller's tensors. The
// callers add what differs (the plan's device arrays, destinations).
#pragma once

#include "backend/step_work.h"
#include "kernels/attention/attention.h"
#include "kernels/step/kv_rows.h"

namespace swa::cuda {

kernels::EncodeParams EncodeParamsOf(const StepLayer& layer, const StepTensors& x,
                                     int32_t n_tokens);

// `scale`: the resolved softmax scale.
kernels::AttentionParams AttentionParamsOf(const StepLayer& layer, const StepTensors& x,
                                           float scale);

// The kernels' view of a layer's RoPE with the step's cos/sin table at
// `d_cos_sin` (device, [T, dims / 2]; nullptr when the layer has no RoPE).
kernels::RopeParams RopeParamsOf(const RopeTable& table, const kernels::RopeCs* d_cos_sin);

// The tensor-core kernel serves BF16 outputs from MXFP8/BF16 rings (within the
// BF16 error budget); FP32 outputs or FP32 rings take the precise kernel.
inline bool UseMma(const StepLayer& layer, const StepTensors& x) {
  return x.out_dtype == Dtype::kBf16 && layer.format != Format::kFp32;
}

}  // namespace swa::cuda
