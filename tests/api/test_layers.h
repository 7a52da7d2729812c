// Layer descriptions and BF16 helpers shared by the API and GPU step tests.
#pragma once

#include <cstdint>
#include <cstring>

#include "swacache.h"

namespace swa_test {

struct LayerCfg {
  swa_format_t format;
  int q_heads, kv_heads, head_dim;
  bool shared_kv, sinks;
};

inline swa_layer_desc_t ToDesc(const LayerCfg& c, swa_layer_role_t role) {
  swa_layer_desc_t d;
  swa_layer_desc_init(&d);
  d.role = role;
  d.kv_format = c.format;
  d.q_heads = uint32_t(c.q_heads);
  d.kv_heads = uint32_t(c.kv_heads);
  d.head_dim = uint32_t(c.head_dim);
  d.shared_kv = c.shared_kv;
  d.has_sinks = c.sinks;
  return d;
}

inline uint16_t ToBf16(float f) {  // round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1)) >> 16);
}

inline float FromBf16(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace swa_test
