// The attention kernels' compiled head dims, query rows per CTA and tile
// variants: plain constants with no CUDA dependency, so that host code and the
// CPU unit tests can include them (kernels/attention/attention_shapes.h).
#pragma once

#include <stdint.h>

#include <utility>

namespace swa::kernels {

// Head dims with compiled kernels (the one list: the launchers instantiate
// exactly these); anything else is unsupported.
using AttentionHeadDims = std::integer_sequence<int, 64, 128, 256, 512>;

template <int... Ds>
constexpr bool HeadDimIn(int head_dim, std::integer_sequence<int, Ds...>) {
  return ((head_dim == Ds) || ...);
}
constexpr bool AttentionHeadDimSupported(int head_dim) {
  return HeadDimIn(head_dim, AttentionHeadDims{});
}

// Query rows per CTA of the large tiles of each kernel.
inline constexpr int kMmaTileRows = 64;
inline constexpr int kPreciseTileRows = 16;

// Tile sizes of a launch (docs/cuda_backend.md "Shared memory"). kLarge: the
// fastest tiles (they need up to 157 KiB of shared memory per block); kSmall:
// fewer keys per tile and, at D 512, fewer query rows per CTA, so that every
// layer fits the 99 KiB of sm_86/sm_89/sm_120. kAuto: not chosen yet (the
// launchers refuse it; the backend chooses, attention_variant.h).
enum class AttentionVariant : uint8_t { kAuto = 0, kLarge = 1, kSmall = 2 };

inline const char* AttentionVariantName(AttentionVariant v) {
  return v == AttentionVariant::kLarge ? "large" : v == AttentionVariant::kSmall ? "small" : "auto";
}

}  // namespace swa::kernels
