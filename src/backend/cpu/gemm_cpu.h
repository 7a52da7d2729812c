// The blocked CPU implementation of the merged projection (swa_project on the
// CPU backend): out[T, N] = hidden[T, K] x W with BF16 inputs converted
// exactly to FP32, FP32 accumulation, FP32 or BF16 (round to nearest even)
// output. Tiles of kMc x kNc outputs are independent and spread over threads.
#pragma once

#include "backend/project_work.h"

namespace swa::cpu {

inline constexpr int64_t kMc = 64;   // rows of A per tile
inline constexpr int64_t kNc = 256;  // columns per tile
inline constexpr int64_t kKc = 256;  // depth per packed block

class ThreadPool;

// Tiles are spread over `pool` (nullptr: the calling thread only); small
// problems run on the calling thread. Host pointers; arguments validated by
// the caller.
void GemmBf16Cpu(const ProjectWork& work, ThreadPool* pool);

}  // namespace swa::cpu
