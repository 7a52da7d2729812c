// The frequencies of a layer's RoPE, computed once per cache in FP32 from the
// layer's RopeSpec (plain RoPE or YaRN; docs/semantics.md, "RoPE inside the
// step"), following the operation order of the reference implementations so
// that the FP32 values agree with them (tests/unit/rope_table_test.cc).
#pragma once

#include <vector>

#include "layout/model_spec.h"

namespace swa {

struct RopeTable {
  RopeStyle style = RopeStyle::kNone;
  uint32_t first_dim = 0;
  uint32_t dims = 0;               // n
  float attention_factor = 1.0f;   // multiplies cos and sin of q and k
  bool derotate_output = false;
  std::vector<float> inv_freq;     // [n / 2]

  bool on() const { return style != RopeStyle::kNone; }
};

// Empty (style kNone) when the spec has no RoPE. The spec is validated.
RopeTable MakeRopeTable(const RopeSpec& spec);

}  // namespace swa
