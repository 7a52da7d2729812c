#include "layout/layout.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common/math.h"

namespace swa {

const char* FormatName(Format format) {
  switch (format) {
    case Format::kMxfp8: return "MXFP8";
    case Format::kBf16: return "BF16";
    case Format::kFp32: return "FP32";
    case Format::kFp8DsMla: return "FP8_DS_MLA";
  }
  return "unknown";
}

const char* RoleName(Role role) {
  return role == Role::kStored ? "stored" : "dropped";
}

namespace {

absl::Status Invalid(const absl::FormatSpec<>& fmt) { return absl::InvalidArgumentError(absl::StrFormat(fmt)); }

template <typename... Args>
absl::Status Invalid(const absl::FormatSpec<Args...>& fmt, const Args&... args) {
  return absl::InvalidArgumentError(absl::StrFormat(fmt, args...));
}

// Enum fields arrive as valid values: the C boundary (capi/enums.h) is the
// one place that checks the caller's integers.
absl::Status ValidateRope(const RopeSpec& r, uint32_t head_dim, uint32_t i) {
  if (r.style == RopeStyle::kNone) return absl::OkStatus();
  if (r.dims == 0 || r.dims % 2 != 0)
    return Invalid("layers[%u].rope_dims = %u must be even and > 0 when rope_style is set", i,
                   r.dims);
  if (uint64_t{r.first_dim} + r.dims > head_dim)
    return Invalid("layers[%u]: rope_first_dim + rope_dims = %u + %u exceeds head_dim = %u", i,
                   r.first_dim, r.dims, head_dim);
  if (!std::isfinite(r.theta) || r.theta <= 1.0f)
    return Invalid("layers[%u].rope_theta = %g must be finite and > 1", i, r.theta);
  if (!std::isfinite(r.yarn_factor) || r.yarn_factor < 0)
    return Invalid("layers[%u].rope_yarn_factor = %g must be finite and >= 0", i, r.yarn_factor);
  if (r.yarn_factor > 1) {
    if (r.yarn_original_max_positions == 0)
      return Invalid("layers[%u].rope_yarn_original_max_positions = 0 with YaRN", i);
    if (!std::isfinite(r.yarn_beta_fast) || !std::isfinite(r.yarn_beta_slow) ||
        r.yarn_beta_fast <= 0 || r.yarn_beta_slow <= 0 || r.yarn_beta_slow > r.yarn_beta_fast)
      return Invalid(
          "layers[%u]: rope_yarn_beta_fast = %g, rope_yarn_beta_slow = %g must be finite with "
          "0 < beta_slow <= beta_fast",
          i, r.yarn_beta_fast, r.yarn_beta_slow);
  }
  if (!std::isfinite(r.attention_factor) || r.attention_factor < 0)
    return Invalid("layers[%u].rope_attention_factor = %g must be finite and >= 0", i,
                   r.attention_factor);
  return absl::OkStatus();
}

// A typed compressor (docs/semantics.md, "Compression state"): its widths, rate
// and RoPE slice against the limits that keep every row in uint32 bytes.
absl::Status ValidateCompressor(const LayerSpec& l, uint32_t i) {
  const char* kind = l.compress_kind == CompressKind::kCsa ? "CSA" : "HCA";
  if (l.compress_ratio == 0 || l.compress_ratio > kMaxCompressRatio)
    return Invalid("layers[%u].compress_ratio = %u is out of range [1, %u] for a %s compressor", i,
                   l.compress_ratio, kMaxCompressRatio, kind);
  if (l.compress_entry_bytes != 0)
    return Invalid("layers[%u].compress_entry_bytes = %u must be 0 for a %s compressor (the "
                   "library sizes its rows)",
                   i, l.compress_entry_bytes, kind);
  if (l.compress_head_dim == 0 || l.compress_head_dim > kMaxHeadDim)
    return Invalid("layers[%u].compress_head_dim = %u is out of range [1, %u]", i,
                   l.compress_head_dim, kMaxHeadDim);
  if (l.index_head_dim != 0 && l.compress_kind != CompressKind::kCsa)
    return Invalid("layers[%u].index_head_dim = %u: only a CSA compressor has an indexer", i,
                   l.index_head_dim);
  if (l.index_head_dim > kMaxHeadDim)
    return Invalid("layers[%u].index_head_dim = %u exceeds %u", i, l.index_head_dim, kMaxHeadDim);
  if (l.compress_row_format != Format::kFp32 && l.compress_row_format != Format::kBf16)
    return Invalid("layers[%u].compress_row_format = %s: the source rows are FP32 or BF16", i,
                   FormatName(l.compress_row_format));
  const uint32_t min_dim = l.index_head_dim != 0 && l.index_head_dim < l.compress_head_dim
                               ? l.index_head_dim
                               : l.compress_head_dim;
  if (l.compress_rope_dims % 2 != 0 || l.compress_rope_dims > min_dim)
    return Invalid("layers[%u].compress_rope_dims = %u must be even and <= %u (the narrowest "
                   "entry width)",
                   i, l.compress_rope_dims, min_dim);
  if (l.compress_rope_dims != 0) {
    RopeSpec r = l.rope;  // the layer's table with n = compress_rope_dims
    r.style = RopeStyle::kGptj;
    r.first_dim = 0;
    r.dims = l.compress_rope_dims;
    if (absl::Status s = ValidateRope(r, l.compress_rope_dims, i); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// The compression region: a typed compressor, or the opaque entries.
absl::Status ValidateCompression(const LayerSpec& l, uint32_t i) {
  if (l.compress_kind != CompressKind::kOpaque) return ValidateCompressor(l, i);
  if (l.compress_head_dim != 0 || l.index_head_dim != 0 || l.compress_rope_dims != 0)
    return Invalid("layers[%u]: compress_head_dim = %u, index_head_dim = %u, compress_rope_dims = "
                   "%u need a typed compress_kind (HCA or CSA)",
                   i, l.compress_head_dim, l.index_head_dim, l.compress_rope_dims);
  if ((l.compress_ratio == 0) != (l.compress_entry_bytes == 0))
    return Invalid(
        "layers[%u]: compress_ratio = %u and compress_entry_bytes = %u must be both zero or both "
        "non-zero",
        i, l.compress_ratio, l.compress_entry_bytes);
  if (l.compress_ratio > kMaxWindow)
    return Invalid("layers[%u].compress_ratio = %u exceeds %u", i, l.compress_ratio, kMaxWindow);
  if (l.compress_entry_bytes > (1u << 24))
    return Invalid("layers[%u].compress_entry_bytes = %u exceeds %u", i, l.compress_entry_bytes,
                   1u << 24);
  return absl::OkStatus();
}

absl::Status ValidateLayer(const LayerSpec& l, uint32_t i) {
  if (l.head_dim == 0 || l.head_dim > kMaxHeadDim)
    return Invalid("layers[%u].head_dim = %u is out of range [1, %u]", i, l.head_dim, kMaxHeadDim);
  if (l.format == Format::kMxfp8 && l.head_dim % kMxfp8Block != 0)
    return Invalid("layers[%u].head_dim = %u is not a multiple of 32 (required for MXFP8)", i,
                   l.head_dim);
  if (l.format == Format::kFp8DsMla) {
    if (l.head_dim != kDsMlaDim)
      return Invalid("layers[%u].head_dim = %u: FP8_DS_MLA holds head_dim %u only (448 NoPE + 64 "
                     "RoPE dims)",
                     i, l.head_dim, kDsMlaDim);
    if (l.rope.style != RopeStyle::kNone &&
        (l.rope.first_dim != kDsMlaNopeDims || l.rope.dims != kDsMlaRopeDims))
      return Invalid("layers[%u]: rope_first_dim = %u, rope_dims = %u: FP8_DS_MLA keeps dims %u.."
                     "%u in BF16, so its rotary slice must be exactly those (first %u, %u dims)",
                     i, l.rope.first_dim, l.rope.dims, kDsMlaNopeDims, kDsMlaDim - 1,
                     kDsMlaNopeDims, kDsMlaRopeDims);
  }
  if (l.kv_heads == 0 || l.kv_heads > kMaxHeads)
    return Invalid("layers[%u].kv_heads = %u is out of range [1, %u]", i, l.kv_heads, kMaxHeads);
  if (l.q_heads == 0 || l.q_heads > kMaxHeads)
    return Invalid("layers[%u].q_heads = %u is out of range [1, %u]", i, l.q_heads, kMaxHeads);
  if (l.q_heads % l.kv_heads != 0)
    return Invalid("layers[%u].q_heads = %u is not a multiple of kv_heads = %u", i, l.q_heads,
                   l.kv_heads);
  if (absl::Status s = ValidateCompression(l, i); !s.ok()) return s;
  if (!std::isfinite(l.logit_softcap) || l.logit_softcap < 0)
    return Invalid("layers[%u].logit_softcap = %g is not a finite value >= 0", i, l.logit_softcap);
  if (!std::isfinite(l.softmax_scale) || l.softmax_scale < 0)
    return Invalid("layers[%u].softmax_scale = %g is not a finite value > 0 (or 0: 1/sqrt(head_dim))",
                   i, l.softmax_scale);
  return ValidateRope(l.rope, l.head_dim, i);
}

// Rows of a typed compressor (docs/layout.md): L = c + N (HCA) or 2c + N
// (CSA) rows of kv then gate, d (HCA) or 2d (CSA) values each, and the same
// for the indexer's ring at index_head_dim.
absl::Status SizeCompressor(const LayerSpec& l, const ModelSpec& spec, uint32_t i,
                            LayerLayout* ll) {
  const uint64_t align = spec.alignment;
  const bool csa = l.compress_kind == CompressKind::kCsa;
  const uint32_t per_value = l.compress_row_format == Format::kBf16 ? 2 : 4;
  ll->compress_kind = l.compress_kind;
  ll->compress_head_dim = l.compress_head_dim;
  ll->compress_value_bytes = per_value;
  ll->compress_len = static_cast<uint32_t>(
      CompressRingLen(l.compress_kind, l.compress_ratio, spec.draft_tokens));
  ll->compress_row_values = (csa ? 2 : 1) * l.compress_head_dim;
  const uint64_t row = uint64_t{2} * ll->compress_row_values * per_value;
  if (row > (1u << 24))
    return Invalid("layers[%u]: a compressor row of %u bytes exceeds %u", i, row, 1u << 24);
  ll->compress_entry_bytes = static_cast<uint32_t>(row);
  ll->compress_bytes = RoundUp(uint64_t{ll->compress_len} * row, align);
  if (l.index_head_dim != 0) {
    ll->index_head_dim = l.index_head_dim;
    ll->index_row_values = 2 * l.index_head_dim;
    ll->index_row_bytes = 2 * ll->index_row_values * per_value;
    ll->index_bytes = RoundUp(uint64_t{ll->compress_len} * ll->index_row_bytes, align);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Layout> Layout::Create(const ModelSpec& spec) {
  if (spec.window == 0 || spec.window > kMaxWindow)
    return Invalid("window = %u is out of range [1, %u]", spec.window, kMaxWindow);
  if (spec.draft_tokens > kMaxDraftTokens)
    return Invalid("draft_tokens = %u exceeds %u", spec.draft_tokens, kMaxDraftTokens);
  if (!IsPowerOfTwo(spec.alignment) || spec.alignment < kMinAlignment ||
      spec.alignment > kMaxAlignment)
    return Invalid("alignment = %u is not a power of two in [%u, %u]", spec.alignment,
                   kMinAlignment, kMaxAlignment);
  if (spec.max_slots == 0) return Invalid("max_slots = 0: the pool needs at least one slot");
  if (spec.max_slots > kMaxSlots)
    return Invalid("max_slots = %u exceeds %u (the slot table and every plan keep per-slot "
                   "state: 40 bytes per slot)",
                   spec.max_slots, kMaxSlots);
  if (spec.layers.empty()) return Invalid("num_layers = 0: a cache needs at least one layer");
  if (spec.layers.size() > kMaxLayers)
    return Invalid("num_layers = %u exceeds %u", static_cast<uint32_t>(spec.layers.size()),
                   kMaxLayers);

  const uint32_t min_ring = spec.window + spec.draft_tokens;
  const uint32_t ring_len = spec.ring_len == 0 ? min_ring + 1 : spec.ring_len;
  if (ring_len < min_ring)
    return Invalid("ring_len = %u is smaller than window + draft_tokens = %u + %u = %u", ring_len,
                   spec.window, spec.draft_tokens, min_ring);
  if (ring_len > 4 * kMaxWindow)
    return Invalid("ring_len = %u exceeds %u", ring_len, 4 * kMaxWindow);
  // Flat ring rows (slot * R + ring_slot) are int32 in every exported index.
  if (uint64_t{spec.max_slots} * ring_len > uint64_t{std::numeric_limits<int32_t>::max()})
    return Invalid("max_slots * ring_len = %u * %u overflows the int32 ring-row index",
                   spec.max_slots, ring_len);

  Layout out;
  out.spec_ = spec;
  out.ring_len_ = ring_len;
  out.layers_.resize(spec.layers.size());
  const uint64_t align = spec.alignment;
  const uint64_t kLimit = uint64_t{1} << 48;  // far beyond any real slot; keeps sums exact

  for (uint32_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    if (absl::Status s = ValidateLayer(l, i); !s.ok()) return s;
    LayerLayout& ll = out.layers_[i];
    ll.role = l.role;
    ll.format = l.format;
    ll.heads_per_token = l.kv_heads * (l.shared_kv ? 1 : 2);
    ll.vec_bytes = VectorBytes(l.format, l.head_dim);
    const uint64_t per_token = uint64_t{ll.heads_per_token} * ll.vec_bytes;
    if (per_token > std::numeric_limits<uint32_t>::max())
      return Invalid("layers[%u]: bytes per token %u overflows uint32", i, per_token);
    ll.bytes_per_token = static_cast<uint32_t>(per_token);
    ll.ring_bytes = RoundUp(per_token * ring_len, align);
    if (l.compress_kind != CompressKind::kOpaque) {
      if (absl::Status s = SizeCompressor(l, spec, i, &ll); !s.ok()) return s;
    } else if (l.compress_ratio != 0) {
      ll.compress_len = l.compress_ratio + spec.draft_tokens;
      ll.compress_entry_bytes = l.compress_entry_bytes;
      ll.compress_bytes = RoundUp(uint64_t{ll.compress_len} * l.compress_entry_bytes, align);
    }
    ll.compress_ratio = l.compress_ratio;
  }

  // Region order: stored rings, dropped rings, compression regions.
  uint64_t offset = 0;
  for (Role role : {Role::kStored, Role::kDropped}) {
    for (LayerLayout& ll : out.layers_) {
      if (ll.role != role) continue;
      ll.ring_offset = offset;
      offset += ll.ring_bytes;
      if (offset > kLimit) return Invalid("slot bytes exceed %u", kLimit);
    }
    if (role == Role::kStored) {
      out.stored_bytes_ = offset;
      out.num_stored_layers_ = 0;
      for (const LayerLayout& ll : out.layers_) out.num_stored_layers_ += ll.role == Role::kStored;
    }
  }
  const uint64_t compress_start = offset;
  for (uint32_t i = 0; i < out.layers_.size(); ++i) {
    LayerLayout& ll = out.layers_[i];
    if (ll.compress_len == 0) continue;
    ll.compress_offset = offset;
    offset += ll.compress_bytes;
    if (ll.index_row_bytes != 0) {
      ll.index_offset = offset;
      offset += ll.index_bytes;
    }
    if (offset > kLimit) return Invalid("slot bytes exceed %u", kLimit);
    if (ll.typed_compressor() && ll.role == Role::kStored)
      out.compress_saved_bytes_ += uint64_t{ll.compress_len} *
                                   (uint64_t{ll.compress_entry_bytes} + ll.index_row_bytes);
    if (uint64_t{spec.max_slots} * ll.compress_len >
        uint64_t{std::numeric_limits<int32_t>::max()})
      return Invalid("layers[%u]: max_slots * compress_len = %u * %u overflows the int32 row index",
                     i, spec.max_slots, ll.compress_len);
  }
  out.compress_bytes_ = offset - compress_start;
  out.slot_bytes_ = RoundUp(offset, align);
  const auto pool = CheckedMul(out.slot_bytes_, spec.max_slots);
  if (!pool || *pool > uint64_t{std::numeric_limits<int64_t>::max()} ||
      *pool > uint64_t{std::numeric_limits<size_t>::max()})
    return Invalid("max_slots * slot_bytes = %u * %u overflows", spec.max_slots, out.slot_bytes_);
  out.pool_bytes_ = *pool;
  out.fingerprint_ = LayoutFingerprint(spec, ring_len);
  return out;
}

}  // namespace swa
