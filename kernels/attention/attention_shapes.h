// Tile shapes and shared memory of the attention kernels, as plain constexpr
// arithmetic that host code can include (no device code): the launchers size
// their launches from it, and the backend checks at cache creation that a
// layer's kernels fit the device's per-block shared-memory limit.
#pragma once

#include <stddef.h>

#include <utility>

#include "kernels/attention/attention.h"

namespace swa::kernels {

template <int D, bool kSharedKv>
struct MmaShape {
  static constexpr int kRows = kMmaTileRows;  // 64
  static constexpr int kColSplit = D >= 256 ? D / 128 : 1;
  static constexpr int kWarps = 4 * kColSplit;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kKeys = (D == 512 && !kSharedKv) ? 32 : 64;
  static constexpr int kQStride = D + 8;       // bf16 elements; +8 spreads banks
  static constexpr int kSStride = kKeys + 4;   // floats
  static constexpr int kPStride = kKeys + 8;   // bf16 elements
  static constexpr int kSTiles = kKeys / kColSplit / 8;  // n8 tiles per warp in S
  static constexpr int kOTiles = D / kColSplit / 8;     // n8 tiles per warp in O
  static_assert(kSTiles >= 1 && kOTiles >= 1 && D % 16 == 0 && kKeys % 16 == 0);

  static constexpr size_t kQBytes = size_t(kRows) * kQStride * 2;
  static constexpr size_t kKBytes = size_t(kKeys) * kQStride * 2;
  static constexpr size_t kVBytes = kSharedKv ? 0 : kKBytes;
  static constexpr size_t kSBytes = size_t(kRows) * kSStride * 4;
  static constexpr size_t kPBytes = size_t(kRows) * kPStride * 2;
  static constexpr size_t kStatBytes = size_t(kRows) * 4 * 5;  // m, l, alpha, begin, end
  static constexpr size_t kSmemBytes = kQBytes + kKBytes + kVBytes + kSBytes + kPBytes + kStatBytes;
  // The epilogue's de-rotation stages kRows x D FP32 outputs over Q, K, V, S.
  static_assert(size_t(kRows) * D * 4 <= kQBytes + kKBytes + kVBytes + kSBytes);
};

struct PreciseShape {
  static constexpr int kWarps = 8;
  static constexpr int kRowsPerWarp = 2;
  static constexpr int kRows = kWarps * kRowsPerWarp;  // == kPreciseTileRows
  static constexpr int kKeys = 32;
  static constexpr int kThreads = 32 * kWarps;
};
static_assert(PreciseShape::kRows == kPreciseTileRows);
// The epilogue's de-rotation stages the CTA's output rows in the K tile.
static_assert(PreciseShape::kRows <= PreciseShape::kKeys);

template <int D>
constexpr size_t PreciseSmemBytes(bool shared_kv) {
  return size_t(PreciseShape::kKeys) * D * sizeof(float) * (shared_kv ? 1 : 2);
}

// Dynamic shared memory of the kernel that runs a layer of head dim `d`
// (0 when `d` is not a compiled head dim).
template <int... Ds>
constexpr size_t SmemBytesOf(int d, bool shared_kv, bool mma, std::integer_sequence<int, Ds...>) {
  size_t bytes = 0;
  (void)((d == Ds ? (bytes = mma ? (shared_kv ? MmaShape<Ds, true>::kSmemBytes
                                               : MmaShape<Ds, false>::kSmemBytes)
                                  : PreciseSmemBytes<Ds>(shared_kv),
                     true)
                  : false) ||
         ...);
  return bytes;
}
constexpr size_t AttentionSmemBytes(int d, bool shared_kv, bool mma) {
  return SmemBytesOf(d, shared_kv, mma, AttentionHeadDims{});
}

// The most either kernel of a layer needs: a step picks the tensor-core kernel
// for BF16 outputs and the precise one for FP32 outputs, so both must fit.
constexpr size_t LayerSmemBytes(int d, bool shared_kv) {
  const size_t mma = AttentionSmemBytes(d, shared_kv, true);
  const size_t precise = AttentionSmemBytes(d, shared_kv, false);
  return mma > precise ? mma : precise;
}

}  // namespace swa::kernels
