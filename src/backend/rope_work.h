// swa_rope_apply's work as plain data (docs/semantics.md, "RoPE as a
// service"): a caller's tensor [tokens, heads, head_dim] rotated in place by
// a layer's RoPE table at the caller's positions, forward (cos and sin times
// the attention factor, as the step rotates q and k) or back (minus the
// position, no factor, as the step de-rotates its output).
#pragma once

#include <cstdint>

#include "common/records.h"
#include "layout/rope_table.h"

namespace swa {

struct RopeWork {
  const RopeTable* table = nullptr;  // on(): the caller skips a table without RoPE
  void* x = nullptr;                 // [tokens, heads, head_dim] in dtype (backend memory)
  Dtype dtype = Dtype::kFp32;
  int64_t tokens = 0;
  uint32_t heads = 0;
  uint32_t head_dim = 0;
  const int32_t* positions = nullptr;  // [tokens] host memory, each >= 0
  bool inverse = false;
  void* stream = nullptr;              // cudaStream_t for a device
};

// The cos/sin factor and sign of a rotation direction, the step's: forward
// (q, k) scales by the attention factor; back (output) does not and negates.
inline float RopeWorkFactor(const RopeWork& w) { return w.inverse ? 1.0f : w.table->attention_factor; }
inline float RopeWorkSign(const RopeWork& w) { return w.inverse ? -1.0f : 1.0f; }

}  // namespace swa
