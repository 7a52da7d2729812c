// Attention kernel launches per tile variant in this process, counted by the
// launcher (attention_dispatch.cuh). Both variants meet the same error
// budget, so results cannot tell which tiles a path took; the GPU tests read
// these counts (tests/gpu/cuda_small_tiles_test.cc). Plain C++, no CUDA.
#pragma once

#include <atomic>
#include <cstdint>

#include "kernels/attention/attention_dims.h"

namespace swa::kernels {

// A captured launch counts once, at capture, not at each replay.
inline std::atomic<uint64_t>& AttentionLaunches(AttentionVariant v) {
  static std::atomic<uint64_t> counts[3];
  return counts[static_cast<int>(v) % 3];
}

}  // namespace swa::kernels
