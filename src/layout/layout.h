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
  uint32_t compress_len = 0;     // c + N entries, 0 = none
  uint32_t compress_entry_bytes = 0;
  uint64_t compress_offset = 0;
  uint64_t compress_bytes = 0;   // padded to the alignment
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
  std::vector<LayerLayout> layers_;
};

// Stable 64-bit fingerprint of everything that shapes a slot's bytes
// (docs/layout.md lists the fields). Independent of process and machine.
uint64_t LayoutFingerprint(const ModelSpec& spec, uint32_t ring_len);

}  // namespace swa
