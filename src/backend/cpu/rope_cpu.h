// RoPE rotation of host FP32 head vectors: the one host implementation, used
// by the CPU step (q, new keys, de-rotated outputs) and by swa_rope_apply on
// host memory, so that both give the same bits (docs/semantics.md, "RoPE as a
// service").
#pragma once

#include <cstdint>
#include <vector>

#include "backend/rope_work.h"
#include "layout/rope_table.h"

namespace swa::cpu {

// Rotates the rotary dims of `heads` consecutive head vectors of `head_dim`
// floats at `v` by `pos` (sign -1: back), cos and sin times `factor`.
// `cs` is scratch (resized to the table's dims).
void RotateHeadsAt(const RopeTable& table, float* v, uint32_t heads, uint32_t head_dim,
                   int32_t pos, float factor, float sign, std::vector<float>& cs);

// swa_rope_apply on host memory, on the calling thread.
void RopeApplyCpu(const RopeWork& work);

}  // namespace swa::cpu
