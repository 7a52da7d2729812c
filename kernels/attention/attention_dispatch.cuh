// Launch of either attention kernel for one key source, with the head-dim
// dispatch (the launchers in decode_attention.cu / prefill_attention.cu).
#pragma once

#include "kernels/attention/attention_launches.h"
#include "kernels/attention/attention_mma.cuh"
#include "kernels/attention/attention_precise.cuh"
#include "kernels/common/launch.cuh"

namespace swa::kernels {

inline bool GridOf(const AttentionParams& p, int tile_rows, dim3* grid) {
  int64_t n;
  if (p.tiles != nullptr) {
    n = p.n_tiles;
  } else {
    const int64_t group = p.q_heads / p.kv_heads;
    n = int64_t(p.n_seqs) * ((int64_t(p.max_seqlen_q) * group + tile_rows - 1) / tile_rows);
  }
  if (n > 0x7fffffff || p.kv_heads > 65535) return false;
  *grid = dim3(static_cast<unsigned>(n), 1, static_cast<unsigned>(p.kv_heads));
  return true;
}

// Launch.cuh sets the kernel's shared-memory opt-in once per kernel and device.
inline cudaError_t LaunchWithSmem(void (*kernel)(AttentionParams), dim3 grid, int threads,
                                  size_t smem, const AttentionParams& p, cudaStream_t stream) {
  if (grid.x == 0) return cudaSuccess;
  AttentionLaunches(p.variant).fetch_add(1, std::memory_order_relaxed);
  return Launch(kernel, grid, dim3(threads), smem, stream, p);
}

template <class S, bool kStaged, KvDecode F>
cudaError_t LaunchMma(const AttentionParams& p, cudaStream_t stream) {
  dim3 grid;
  if (!GridOf(p, S::kRows, &grid)) return cudaErrorInvalidConfiguration;
  return LaunchWithSmem(MmaAttentionKernel<S, kStaged, F>, grid, S::kThreads, S::kSmemBytes, p,
                        stream);
}

template <int D, bool kStaged, int kKeys, KvDecode F>
cudaError_t LaunchPrecise(const AttentionParams& p, cudaStream_t stream) {
  using S = PreciseShape<kKeys>;
  dim3 grid;
  if (!GridOf(p, S::kRows, &grid)) return cudaErrorInvalidConfiguration;
  return LaunchWithSmem(PreciseAttentionKernel<D, kStaged, kKeys, F>, grid, S::kThreads,
                        S::SmemBytes(D, p.shared_kv), p, stream);
}

// p.variant resolved (kLarge or kSmall). Where the small tiles of a shape are
// the large ones (they fit 99 KiB already) both name one instantiation.
// FP8_DS_MLA has the small tiles only (the backend chooses them for it,
// CudaBackend::AttentionVariantOf): its decode in the large D 512 tensor-core
// tiles, 512 threads capped at 128 registers, spilled.
template <int D, bool kStaged, KvDecode F>
cudaError_t LaunchAttentionDF(const AttentionParams& p, cudaStream_t stream) {
  const bool small = p.variant == AttentionVariant::kSmall;
  if constexpr (F == KvDecode::kDsMla) {
    if (!small) return cudaErrorInvalidValue;
    if (p.use_mma)
      return p.shared_kv ? LaunchMma<MmaSmall<D, true>, kStaged, F>(p, stream)
                         : LaunchMma<MmaSmall<D, false>, kStaged, F>(p, stream);
    return LaunchPrecise<D, kStaged, kPreciseSmallKeys<D>, F>(p, stream);
  } else {
    if (p.use_mma) {
      if (p.shared_kv)
        return small ? LaunchMma<MmaSmall<D, true>, kStaged, F>(p, stream)
                     : LaunchMma<MmaLarge<D, true>, kStaged, F>(p, stream);
      return small ? LaunchMma<MmaSmall<D, false>, kStaged, F>(p, stream)
                   : LaunchMma<MmaLarge<D, false>, kStaged, F>(p, stream);
    }
    return small ? LaunchPrecise<D, kStaged, kPreciseSmallKeys<D>, F>(p, stream)
                 : LaunchPrecise<D, kStaged, kPreciseLargeKeys, F>(p, stream);
  }
}

// FP8_DS_MLA (D 512 only) takes its own instantiations; every other format
// the run-time ones, unchanged.
template <int D, bool kStaged>
cudaError_t LaunchAttentionD(const AttentionParams& p, cudaStream_t stream) {
  if (p.format == Format::kFp8DsMla) {
    if constexpr (D == int(kDsMlaDim))
      return LaunchAttentionDF<D, kStaged, KvDecode::kDsMla>(p, stream);
    else
      return cudaErrorInvalidValue;
  }
  return LaunchAttentionDF<D, kStaged, KvDecode::kRuntime>(p, stream);
}

// The instantiation for p.head_dim among AttentionHeadDims; NotSupported for
// any other value (the host wrapper names it).
template <bool kStaged, int... Ds>
cudaError_t DispatchHeadDim(const AttentionParams& p, cudaStream_t stream,
                            std::integer_sequence<int, Ds...>) {
  cudaError_t result = cudaErrorNotSupported;
  (void)((p.head_dim == Ds ? (result = LaunchAttentionD<Ds, kStaged>(p, stream), true) : false) ||
         ...);
  return result;
}

template <bool kStaged>
cudaError_t LaunchAttention(const AttentionParams& p, cudaStream_t stream) {
  if (p.q == nullptr || p.out == nullptr || p.seqs == nullptr || p.kv_heads <= 0 ||
      p.q_heads <= 0 || p.q_heads % p.kv_heads != 0 || p.n_seqs < 0 ||
      (kStaged ? (p.pivots == nullptr || p.staging == nullptr)
               : (p.offset_len == nullptr || p.ring.base == nullptr || p.ring.ring_len <= 0)) ||
      !(p.softcap >= 0) ||
      (p.rope.on() && (p.rope.cos_sin == nullptr || p.rope.dims <= 0 || p.rope.dims % 2 != 0 ||
                       p.rope.first_dim < 0 || p.rope.first_dim + p.rope.dims > p.head_dim)))
    return cudaErrorInvalidValue;
  // The variant comes from the backend (CudaBackend::AttentionVariantOf), the
  // one place that knows the limit, SWACACHE_CUDA_SMEM_LIMIT included: a
  // launcher asking the device itself would not see that limit.
  if (p.variant != AttentionVariant::kLarge && p.variant != AttentionVariant::kSmall)
    return cudaErrorInvalidValue;
  if (p.n_seqs == 0) return cudaSuccess;
  return DispatchHeadDim<kStaged>(p, stream, AttentionHeadDims{});
}

}  // namespace swa::kernels
