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
  // RoPE inside the step and the logit soft-cap (off by default).
  swa_rope_style_t rope_style = SWA_ROPE_NONE;
  int rope_first = 0, rope_dims = 0;
  float rope_theta = 10000.0f;
  float yarn_factor = 0;
  int yarn_original = 4096;
  bool yarn_truncate = true;
  float rope_attention_factor = 0;
  bool derotate = false;
  float softcap = 0;
  float softmax_scale = 0;  // the layer's (swa_layer_desc_t); 0 = 1/sqrt(head_dim)
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
  d.rope_style = c.rope_style;
  d.rope_first_dim = uint32_t(c.rope_first);
  d.rope_dims = uint32_t(c.rope_dims);
  d.rope_theta = c.rope_theta;
  d.rope_yarn_factor = c.yarn_factor;
  d.rope_yarn_original_max_positions = uint32_t(c.yarn_original);
  d.rope_yarn_truncate = c.yarn_truncate;
  d.rope_attention_factor = c.rope_attention_factor;
  d.rope_derotate_output = c.derotate;
  d.logit_softcap = c.softcap;
  d.softmax_scale = c.softmax_scale;
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
