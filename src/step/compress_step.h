// swa_compress_step in C++: check one compressor's tensors against the cache
// and the plan, derive the closing windows and store runs from the plan, run
// the backend's compressor (docs/semantics.md, "Compression state").
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "cache/cache.h"
#include "common/records.h"
#include "plan/step_plan.h"

namespace swa {

struct CompressTensors {
  uint32_t layer = 0;
  uint32_t compressor = 0;     // 0 = the layer's, 1 = its indexer's
  const void* kv = nullptr;
  const void* gate = nullptr;
  Dtype dtype = Dtype::kFp32;
  uint32_t row_width = 0;      // the caller's S
  int64_t rows = 0;            // the caller's T
  const float* position_bias = nullptr;
  const float* norm_weight = nullptr;
  float norm_eps = 1e-6f;
  void* out = nullptr;
  Dtype out_dtype = Dtype::kFp32;
  uint64_t out_rows = 0;
  void* stream = nullptr;
};

// OK when `layer` has a typed compressor and `compressor` names one of its
// rings; INVALID_ARGUMENT naming them otherwise, OUT_OF_RANGE for a layer id
// past the last.
absl::Status CheckCompressor(const Layout& layout, uint32_t layer, uint32_t compressor);

// Runs one compressor of one layer of the step `plan` describes. Nothing
// changes when the request is rejected; on success the plan is marked executed.
absl::Status RunCompressStep(Cache& cache, plan::StepPlan& plan, const CompressTensors& t);

}  // namespace swa
