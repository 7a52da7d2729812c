// swa_attention_merge as plain data (docs/semantics.md, "Merging partial
// attentions"); validated by the caller.
#pragma once

#include <cstdint>

#include "common/records.h"

namespace swa {

struct MergeWork {
  int64_t rows = 0;
  uint32_t dim = 0;
  Dtype dtype = Dtype::kFp32;  // of out_a, out_b and out
  const void* out_a = nullptr;
  const float* lse_a = nullptr;
  const void* out_b = nullptr;
  const float* lse_b = nullptr;
  void* out = nullptr;     // may alias out_a or out_b
  float* lse = nullptr;    // may be null, or alias lse_a or lse_b
  void* stream = nullptr;
};

}  // namespace swa
