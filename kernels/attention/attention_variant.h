// The attention variant of a layer as a status (host code only): the pure
// choice of attention_shapes.h, with the refusal the backend reports at cache
// creation when no variant fits the device.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "kernels/attention/attention_shapes.h"

namespace swa::kernels {

// UNIMPLEMENTED naming the head dim, the K/V sharing, the bytes the smallest
// tiles need and the device's limit when nothing fits.
inline absl::StatusOr<AttentionVariant> AttentionVariantFor(const AttentionLayerShape& s,
                                                            size_t smem_limit) {
  if (!AttentionHeadDimSupported(s.head_dim))
    return absl::UnimplementedError(absl::StrFormat(
        "head_dim = %d is not supported by the CUDA attention kernels (64, 128, 256, 512)",
        s.head_dim));
  const AttentionVariantChoice c = ChooseAttentionVariant(s, smem_limit);
  if (!c.fits)
    return absl::UnimplementedError(absl::StrFormat(
        "head_dim = %d with %s K/V needs %u bytes of shared memory per block in the attention "
        "kernels even with the small tiles; this device allows %u "
        "(cudaDevAttrMaxSharedMemoryPerBlockOptin)",
        s.head_dim, s.shared_kv ? "shared" : "separate", c.smem_bytes, smem_limit));
  return c.variant;
}

}  // namespace swa::kernels
