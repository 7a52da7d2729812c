// The C++ side of a cache configuration: what the layout is computed from.
#pragma once

#include <cstdint>
#include <vector>

namespace swa {

// Values equal the C enums in swacache.h.
enum class Format : uint32_t { kMxfp8 = 0, kBf16 = 1, kFp32 = 2 };
enum class ScaleMode : uint32_t { kCeil = 0, kFloor = 1 };
enum class Role : uint32_t { kStored = 0, kDropped = 1 };

struct LayerSpec {
  Role role = Role::kStored;
  uint32_t q_heads = 64;
  uint32_t kv_heads = 1;
  uint32_t head_dim = 512;
  bool shared_kv = true;
  Format format = Format::kMxfp8;
  uint32_t compress_ratio = 0;        // c; 0 = no compression state
  uint32_t compress_entry_bytes = 0;  // bytes of one compression entry
  float rope_theta = 10000.0f;        // informational
  uint32_t rope_dims = 0;             // informational
  bool has_sinks = false;
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
inline constexpr uint32_t kMaxAlignment = 4096;
inline constexpr uint32_t kMinAlignment = 16;
inline constexpr uint32_t kMxfp8Block = 32;

const char* FormatName(Format format);
const char* RoleName(Role role);

// Bytes of one vector of `dim` values stored in `format` (docs/semantics.md, "Slot layout").
uint32_t VectorBytes(Format format, uint32_t dim);

}  // namespace swa
