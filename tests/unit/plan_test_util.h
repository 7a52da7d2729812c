// Helpers shared by the planner's white-box tests: a small cache, slot setup,
// and snapshots of the slot table.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cache/cache.h"
#include "gtest/gtest.h"
#include "plan/step_plan.h"

namespace plan_test {

// A cache with one small FP32 layer; W, N and R chosen by the test.
inline std::unique_ptr<swa::Cache> MakeCache(uint32_t window, uint32_t draft, uint32_t ring_len,
                                            uint32_t max_slots) {
  swa::ModelSpec spec;
  spec.window = window;
  spec.draft_tokens = draft;
  spec.ring_len = ring_len;
  spec.max_slots = max_slots;
  swa::LayerSpec layer;
  layer.head_dim = 32;
  layer.q_heads = 1;
  layer.format = swa::Format::kFp32;
  spec.layers.push_back(layer);
  auto cache = swa::Cache::Create(spec, swa::CacheOptions{});
  EXPECT_TRUE(cache.ok()) << cache.status();
  return cache.ok() ? std::move(*cache) : nullptr;
}

inline std::vector<swa::SlotState> Snapshot(const swa::Cache& cache) {
  std::vector<swa::SlotState> out;
  for (uint32_t s = 0; s < cache.slots().size(); ++s) out.push_back(*cache.slots().Get(s));
  return out;
}

inline bool SameStates(const std::vector<swa::SlotState>& a, const std::vector<swa::SlotState>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].allocated != b[i].allocated || a[i].written_end != b[i].written_end ||
        a[i].valid_start != b[i].valid_start || a[i].ring_high != b[i].ring_high)
      return false;
  return true;
}

inline void AllocAll(swa::Cache& cache) {
  for (uint32_t s = 0; s < cache.slots().size(); ++s) ASSERT_TRUE(cache.slots().Alloc().ok());
}

inline void SetSlot(swa::Cache& cache, uint32_t slot, int32_t written_end, int32_t valid_start,
                    int32_t ring_high = 0) {
  swa::SlotState st;
  st.allocated = true;
  st.written_end = written_end;
  st.valid_start = valid_start;
  st.ring_high = ring_high;
  ASSERT_TRUE(cache.slots().Set(slot, st).ok());
}

}  // namespace plan_test
