#include <cstdint>
#include <initializer_list>

#include "layout/layout.h"

namespace swa {
namespace {

// FNV-1a over an explicit little-endian serialisation: the same on every
// machine and in every process (no pointers, no std::hash).
class Fnv1a64 {
 public:
  void Bytes(const char* s) {
    for (; *s; ++s) Byte(static_cast<uint8_t>(*s));
  }
  void U32(uint32_t v) {
    for (int i = 0; i < 4; ++i) Byte(static_cast<uint8_t>(v >> (8 * i)));
  }
  uint64_t value() const { return h_; }

 private:
  void Byte(uint8_t b) {
    h_ ^= b;
    h_ *= 0x100000001b3ull;
  }
  uint64_t h_ = 0xcbf29ce484222325ull;
};

}  // namespace

uint64_t LayoutFingerprint(const ModelSpec& spec, uint32_t ring_len) {
  Fnv1a64 h;
  h.Bytes("swacache-layout-v1");
  for (uint32_t v : {spec.window, spec.draft_tokens, ring_len, spec.alignment,
                     static_cast<uint32_t>(spec.scale_mode),
                     static_cast<uint32_t>(spec.layers.size())})
    h.U32(v);
  // q_heads, RoPE and sinks do not change the stored bytes' layout or codec,
  // and max_slots does not change a slot: none of them is hashed.
  for (const LayerSpec& l : spec.layers) {
    for (uint32_t v : {static_cast<uint32_t>(l.role), static_cast<uint32_t>(l.format), l.kv_heads,
                       l.head_dim, static_cast<uint32_t>(l.shared_kv), l.compress_ratio,
                       l.compress_entry_bytes})
      h.U32(v);
    // Typed compressors shape their rings' bytes too; opaque layers hash as
    // before, so that their fingerprints (and saved blobs) stay valid.
    if (l.compress_kind != CompressKind::kOpaque)
      for (uint32_t v : {static_cast<uint32_t>(l.compress_kind), l.compress_head_dim,
                         static_cast<uint32_t>(l.compress_row_format), l.index_head_dim})
        h.U32(v);
  }
  return h.value();
}

}  // namespace swa
