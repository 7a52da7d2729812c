// The merged projection of swa_project() as plain data:
// out[T, N] = hidden[T, K] x W, BF16 inputs, FP32 accumulation.
#pragma once

#include <cstdint>

#include "common/records.h"

namespace swa {

enum class WeightLayout : uint32_t {
  kOutIn = 0,  // weight[N, K] row-major (torch.nn.Linear.weight): out = hidden W^T
  kInOut = 1,  // weight[K, N] row-major: out = hidden W
};

struct ProjectWork {
  const uint16_t* hidden = nullptr;  // [T, K] BF16
  const uint16_t* weight = nullptr;  // BF16, per `layout`
  WeightLayout layout = WeightLayout::kOutIn;
  void* out = nullptr;               // [T, N] in out_dtype
  Dtype out_dtype = Dtype::kFp32;
  int64_t tokens = 0;  // T
  int64_t in_dim = 0;  // K (hidden)
  int64_t out_dim = 0; // N (q_dim + kv_dim)
  void* stream = nullptr;
};

}  // namespace swa
