// Byte layout of a state slot (docs/semantics.md, "Ring", "Slot layout"). Pure arithmetic.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "layout/model_spec.h"

namespace swa {

struct LayerLayout {
  Role role = Role::kStored;
  Format format = Format::kMxfp8;
  uint32_t heads_per_token = 0;  // kv_heads * (shared_kv ? 1 : 2)
  uint32_t vec_bytes = 0;
  uint32_t bytes_per_token = 0;
  uint64_t ring_offset = 0;
  uint64_t ring_bytes = 0;       // R * bytes_per_token, padded to the alignment
  uint32_t compress_len = 0;     // L rows: c + N (opaque, HCA), 2c + N (CSA); 0 = none
  uint32_t compress_entry_bytes = 0;  // bytes of one row (opaque entry, or kv + gate)
  uint64_t compress_offset = 0;
  uint64_t compress_bytes = 0;   // padded to the alignment
  // Typed compressors: kind, rate, entry width, values per half row (d or 2d),
  // bytes of one value, the indexer ring (same L; 0 = none).
  CompressKind compress_kind = CompressKind::kOpaque;
  uint32_t compress_ratio = 0;
  uint32_t compress_head_dim = 0;
  uint32_t compress_row_values = 0;
  uint32_t compress_value_bytes = 0;
  uint32_t index_head_dim = 0;
  uint32_t index_row_values = 0;
  uint32_t index_row_bytes = 0;
  uint64_t index_offset = 0;
  uint64_t index_bytes = 0;      // padded to the alignment

  bool typed_compressor() const { return compress_kind != CompressKind::kOpaque && compress_len != 0; }
  CompressGeometry compress_geometry() const {
    return {compress_kind, static_cast<int32_t>(compress_ratio), static_cast<int32_t>(compress_len)};
  }
};

class Layout {
 public:
  // Validates `spec` (every numeric field, every overflow) and computes the
  // layout. Its enum fields must hold enumerators (capi/enums.h checks a C
  // caller's integers; C++ callers pass typed values).
  static absl::StatusOr<Layout> Create(const ModelSpec& spec);

  const ModelSpec& spec() const { return spec_; }
  uint32_t window() const { return spec_.window; }
  uint32_t draft_tokens() const { return spec_.draft_tokens; }
  uint32_t ring_len() const { return ring_len_; }
  uint32_t alignment() const { return spec_.alignment; }
  uint32_t max_slots() const { return spec_.max_slots; }
  uint32_t num_layers() const { return static_cast<uint32_t>(layers_.size()); }
  uint32_t num_stored_layers() const { return num_stored_layers_; }
  // Most query tokens a sequence may bring to a ring-only step: R - W + 1.
  uint32_t max_ring_tokens() const { return ring_len_ - spec_.window + 1; }
  uint64_t slot_bytes() const { return slot_bytes_; }
  uint64_t stored_bytes() const { return stored_bytes_; }
  uint64_t pool_bytes() const { return pool_bytes_; }
  uint64_t fingerprint() const { return fingerprint_; }
  // Bytes of all compression regions of a slot, and of the blob's
  // compression section (typed rings of stored layers, unpadded).
  uint64_t compress_bytes() const { return compress_bytes_; }
  uint64_t compress_saved_bytes() const { return compress_saved_bytes_; }
  const LayerLayout& layer(uint32_t i) const { return layers_[i]; }

  uint64_t SlotOffset(uint32_t slot) const { return uint64_t{slot} * slot_bytes_; }

 private:
  ModelSpec spec_;
  uint32_t ring_len_ = 0;
  uint32_t num_stored_layers_ = 0;
  uint64_t slot_bytes_ = 0;
  uint64_t stored_bytes_ = 0;
  uint64_t pool_bytes_ = 0;
  uint64_t fingerprint_ = 0;
  uint64_t compress_bytes_ = 0;
  uint64_t compress_saved_bytes_ = 0;
  std::vector<LayerLayout> layers_;
};

// Stable 64-bit fingerprint of everything that shapes a slot's bytes
// (docs/layout.md lists the fields). Independent of process and machine.
uint64_t LayoutFingerprint(const ModelSpec& spec, uint32_t ring_len);

}  // namespace swa
