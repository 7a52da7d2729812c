// The C++ side of a cache configuration: what the layout is computed from.
#pragma once

#include <cstdint>
#include <vector>

#include "common/compress_math.h"
#include "common/records.h"

namespace swa {

// RoPE of a layer as the engine configures it (docs/semantics.md, "RoPE inside
// the step"); rope/rope_table.h turns it into frequencies once per cache.
struct RopeSpec {
  RopeStyle style = RopeStyle::kNone;
  uint32_t first_dim = 0;
  uint32_t dims = 0;             // n, even
  float theta = 10000.0f;
  float yarn_factor = 0;         // 0 or 1 = plain RoPE
  uint32_t yarn_original_max_positions = 4096;
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;
  bool yarn_truncate = true;
  float attention_factor = 0;    // 0 = the default (YaRN: 0.1 ln F + 1, else 1)
  bool derotate_output = false;
};

// Values equal the C enum in swacache.h.
enum class Role : uint32_t { kStored = 0, kDropped = 1 };

struct LayerSpec {
  Role role = Role::kStored;
  uint32_t q_heads = 64;
  uint32_t kv_heads = 1;
  uint32_t head_dim = 512;
  bool shared_kv = true;
  Format format = Format::kMxfp8;
  uint32_t compress_ratio = 0;        // c; 0 = no compression state
  uint32_t compress_entry_bytes = 0;  // bytes of one opaque compression entry (kOpaque only)
  // Typed compressors (docs/semantics.md, "Compression state"): kind, entry
  // width d, trailing RoPE dims of an entry, storage of the source rows, and
  // the CSA indexer's entry width (0 = none).
  CompressKind compress_kind = CompressKind::kOpaque;
  uint32_t compress_head_dim = 0;
  uint32_t compress_rope_dims = 0;
  Format compress_row_format = Format::kFp32;
  uint32_t index_head_dim = 0;
  bool has_sinks = false;
  RopeSpec rope;                      // rotation inside the step; style kNone = off
  float logit_softcap = 0;            // cap * tanh(s / cap) on the scaled logits; 0 = off
  float softmax_scale = 0;            // the layer's; a step's non-zero one wins; 0 = 1/sqrt(D)
};

struct ModelSpec {
  uint32_t window = 128;       // W
  uint32_t draft_tokens = 0;   // N
  uint32_t ring_len = 0;       // R; 0 = W + N + 1
  uint32_t alignment = 32;
  uint32_t max_slots = 64;
  ScaleMode scale_mode = ScaleMode::kCeil;
  std::vector<LayerSpec> layers;
};

// Limits that keep every index and byte offset inside int32/int64 arithmetic.
inline constexpr uint32_t kMaxWindow = 1u << 20;
inline constexpr uint32_t kMaxDraftTokens = 1u << 10;
inline constexpr uint32_t kMaxHeadDim = 1u << 14;
inline constexpr uint32_t kMaxHeads = 1u << 12;
inline constexpr uint32_t kMaxLayers = 1u << 12;
// Slots of one cache: the slot table keeps ~32 B per slot and every plan 8 B
// per slot, allocated up front; a million sequences on one cache is beyond
// any engine's batch.
inline constexpr uint32_t kMaxSlots = 1u << 20;
inline constexpr uint32_t kMaxAlignment = 4096;
// Rate of a typed compressor (DeepSeek-V4: 4 and 128).
inline constexpr uint32_t kMaxCompressRatio = 1u << 16;
inline constexpr uint32_t kMinAlignment = 16;

const char* FormatName(Format format);
const char* RoleName(Role role);

}  // namespace swa
