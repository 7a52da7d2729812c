// Tile shapes and shared memory of the attention kernels, as plain constexpr
// arithmetic that host code can include (no device code, no CUDA headers): the
// launchers size their launches from it, and the backend picks at cache
// creation the variant (attention_dims.h) whose kernels fit the device's
// per-block shared-memory limit, or refuses the layer.
#pragma once

#include <stddef.h>

#include <type_traits>
#include <utility>

#include "kernels/attention/attention_dims.h"

namespace swa::kernels {

// The shared-memory budget the small variants are sized for: the per-block
// opt-in limit of sm_86, sm_89 and sm_120 (A10, L4, L40S, RTX 30/40/50).
inline constexpr size_t kSmallTileSmemTarget = 99 * 1024;

// The tensor-core kernel's tile: kRows query rows (16 per row group of warps)
// x kKeys keys per key tile; D >= 256 splits the columns over D/128 warps.
template <int D, bool kSharedKv, int kRows_, int kKeys_>
struct MmaShape {
  static constexpr int kD = D;
  static constexpr bool kShared = kSharedKv;
  static constexpr int kRows = kRows_;
  static constexpr int kRowGroups = kRows / 16;
  static constexpr int kColSplit = D >= 256 ? D / 128 : 1;
  static constexpr int kWarps = kRowGroups * kColSplit;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kKeys = kKeys_;
  static constexpr int kQStride = D + 8;       // bf16 elements; +8 spreads banks
  static constexpr int kSStride = kKeys + 4;   // floats
  static constexpr int kPStride = kKeys + 8;   // bf16 elements
  static constexpr int kSTiles = kKeys / kColSplit / 8;  // n8 tiles per warp in S
  static constexpr int kOTiles = D / kColSplit / 8;     // n8 tiles per warp in O
  static_assert(kRows % 16 == 0 && kRows >= 16 && kRows <= 64);
  // The softmax reads kKeys / 32 scores per lane; the key flags are 2 words.
  static_assert(kKeys % 32 == 0 && kKeys <= 64);
  static_assert(kSTiles >= 1 && kOTiles >= 1 && D % 16 == 0);
  static_assert(kThreads >= kRows);

  static constexpr size_t kQBytes = size_t(kRows) * kQStride * 2;
  static constexpr size_t kKBytes = size_t(kKeys) * kQStride * 2;
  static constexpr size_t kVBytes = kSharedKv ? 0 : kKBytes;
  static constexpr size_t kSBytes = size_t(kRows) * kSStride * 4;
  static constexpr size_t kPBytes = size_t(kRows) * kPStride * 2;
  // m, l, alpha, begin, end per row; then 64-bit masks of a tile's keys with
  // a non-finite K / V value, for even and odd tiles.
  static constexpr size_t kStatBytes = size_t(kRows) * 4 * 5 + 32;
  static constexpr size_t kSmemBytes = kQBytes + kKBytes + kVBytes + kSBytes + kPBytes + kStatBytes;
  // The epilogue's de-rotation stages kRows x D FP32 outputs over Q, K, V, S.
  static constexpr bool kEpilogueFits = size_t(kRows) * D * 4 <= kQBytes + kKBytes + kVBytes + kSBytes;
  static constexpr bool FitsIn(size_t limit) { return kEpilogueFits && kSmemBytes <= limit; }
};

// The large tiles: 64 rows x 64 keys (32 keys at D 512 with separate K/V).
template <int D, bool kSharedKv>
using MmaLarge = MmaShape<D, kSharedKv, 64, (D == 512 && !kSharedKv) ? 32 : 64>;

// The small tiles: the large ones when they already fit kSmallTileSmemTarget,
// else 32 keys with the most query rows (64, 32, 16) that fit.
template <int D, bool kSharedKv>
struct MmaSmallPick {
  using L = MmaLarge<D, kSharedKv>;
  using R64 = MmaShape<D, kSharedKv, 64, 32>;
  using R32 = MmaShape<D, kSharedKv, 32, 32>;
  using R16 = MmaShape<D, kSharedKv, 16, 32>;
  using type = std::conditional_t<
      L::FitsIn(kSmallTileSmemTarget), L,
      std::conditional_t<R64::FitsIn(kSmallTileSmemTarget), R64,
                         std::conditional_t<R32::FitsIn(kSmallTileSmemTarget), R32, R16>>>;
};
template <int D, bool kSharedKv>
using MmaSmall = typename MmaSmallPick<D, kSharedKv>::type;

// Resident CTAs per SM the tensor-core kernel of shape S asks ptxas to allow
// for (__launch_bounds__; 0 = ptxas' own choice). The shapes only the small
// variant uses run where a CTA's shared memory (over 50 KiB) leaves room for
// one CTA per SM (sm_86/89/120: 100 KiB per SM), so their registers are
// sized for one CTA: ptxas' default target spilled there.
template <class S>
inline constexpr int kMmaMinBlocks = std::is_same_v<S, MmaLarge<S::kD, S::kShared>> ? 0 : 1;

// The precise kernel: 8 warps x 2 query rows, kKeys keys per FP32 key tile.
template <int kKeys_>
struct PreciseShape {
  static constexpr int kWarps = 8;
  static constexpr int kRowsPerWarp = 2;
  static constexpr int kRows = kWarps * kRowsPerWarp;  // == kPreciseTileRows
  static constexpr int kKeys = kKeys_;
  static constexpr int kThreads = 32 * kWarps;
  static_assert(kRows == kPreciseTileRows);
  // The epilogue's de-rotation stages the CTA's output rows in the K tile.
  static_assert(kRows <= kKeys);
  static constexpr size_t SmemBytes(int d, bool shared_kv) {
    return size_t(kKeys) * d * sizeof(float) * (shared_kv ? 1 : 2);
  }
  // Resident CTAs per SM asked of ptxas (__launch_bounds__): a register cap
  // of 64 / 85 / 128 per thread for head dims up to 128 / 256 / 512, which
  // the kernel needs without spilling (ptxas' own target spilled at D 64).
  static constexpr int MinBlocks(int d) { return d <= 128 ? 4 : d <= 256 ? 3 : 2; }
};
inline constexpr int kPreciseLargeKeys = 32;
// Keys per tile of the small precise kernel for head dim D: 16 where 32 keys
// with separate K/V would not fit kSmallTileSmemTarget (D 512), else 32.
template <int D>
inline constexpr int kPreciseSmallKeys =
    PreciseShape<kPreciseLargeKeys>::SmemBytes(D, false) <= kSmallTileSmemTarget ? kPreciseLargeKeys
                                                                                  : 16;

// Dynamic shared memory of one kernel of a layer of head dim `d` (0 when `d`
// is not a compiled head dim).
template <int... Ds>
constexpr size_t SmemBytesOf(int d, bool shared_kv, bool mma, bool small,
                             std::integer_sequence<int, Ds...>) {
  size_t bytes = 0;
  auto one = [&](auto dc) {
    constexpr int D = decltype(dc)::value;
    if (mma) {
      if (shared_kv)
        return small ? MmaSmall<D, true>::kSmemBytes : MmaLarge<D, true>::kSmemBytes;
      return small ? MmaSmall<D, false>::kSmemBytes : MmaLarge<D, false>::kSmemBytes;
    }
    return small ? PreciseShape<kPreciseSmallKeys<D>>::SmemBytes(D, shared_kv)
                 : PreciseShape<kPreciseLargeKeys>::SmemBytes(D, shared_kv);
  };
  (void)((d == Ds ? (bytes = one(std::integral_constant<int, Ds>{}), true) : false) || ...);
  return bytes;
}
constexpr size_t AttentionSmemBytes(int d, bool shared_kv, bool mma,
                                    AttentionVariant v = AttentionVariant::kLarge) {
  return SmemBytesOf(d, shared_kv, mma, v == AttentionVariant::kSmall, AttentionHeadDims{});
}

// Query rows per CTA of one kernel and variant (for the host-built tile list;
// must match the launch). 0 for a head dim without kernels.
template <int... Ds>
constexpr int TileRowsOf(int d, bool shared_kv, bool small, std::integer_sequence<int, Ds...>) {
  int rows = 0;
  auto one = [&](auto dc) {
    constexpr int D = decltype(dc)::value;
    if (!small) return MmaLarge<D, true>::kRows;
    return shared_kv ? MmaSmall<D, true>::kRows : MmaSmall<D, false>::kRows;
  };
  (void)((d == Ds ? (rows = one(std::integral_constant<int, Ds>{}), true) : false) || ...);
  return rows;
}
constexpr int AttentionTileRows(bool use_mma, int d, bool shared_kv, AttentionVariant v) {
  if (!use_mma) return kPreciseTileRows;  // both precise variants
  return TileRowsOf(d, shared_kv, v == AttentionVariant::kSmall, AttentionHeadDims{});
}

// What a layer's attention needs: head dim, K/V sharing, and whether the
// tensor-core kernel can run (BF16 outputs from a BF16 or MXFP8 ring; an FP32
// ring always takes the precise kernel).
struct AttentionLayerShape {
  int head_dim = 0;
  bool shared_kv = true;
  bool mma = true;
};

// The most the kernels a layer may run need under variant `v`: a step picks
// the tensor-core kernel for BF16 outputs and the precise one for FP32
// outputs, so both must fit.
constexpr size_t LayerSmemBytes(const AttentionLayerShape& s,
                                AttentionVariant v = AttentionVariant::kLarge) {
  const size_t mma = s.mma ? AttentionSmemBytes(s.head_dim, s.shared_kv, true, v) : 0;
  const size_t precise = AttentionSmemBytes(s.head_dim, s.shared_kv, false, v);
  return mma > precise ? mma : precise;
}

struct AttentionVariantChoice {
  bool fits = false;           // false: no variant fits the limit (refuse the layer)
  AttentionVariant variant = AttentionVariant::kLarge;  // the largest that fits
  size_t smem_bytes = 0;       // what it needs; when !fits, what the smallest needs
};

// The variant of a layer on a device whose per-block opt-in shared memory
// (cudaDevAttrMaxSharedMemoryPerBlockOptin) is `smem_limit` bytes: the large
// tiles when they fit, else the small ones, else none. Pure host arithmetic.
constexpr AttentionVariantChoice ChooseAttentionVariant(const AttentionLayerShape& s,
                                                        size_t smem_limit) {
  AttentionVariantChoice c;
  if (!AttentionHeadDimSupported(s.head_dim)) return c;
  const size_t large = LayerSmemBytes(s, AttentionVariant::kLarge);
  const size_t small = LayerSmemBytes(s, AttentionVariant::kSmall);
  if (large <= smem_limit) {
    c.fits = true;
    c.variant = AttentionVariant::kLarge;
    c.smem_bytes = large;
  } else {
    c.fits = small <= smem_limit;
    c.variant = AttentionVariant::kSmall;
    c.smem_bytes = small;
  }
  return c;
}

}  // namespace swa::kernels
