// Helpers shared by the public-API tests.
#pragma once

#include <string>
#include <vector>

#include "swacache.h"

namespace swa_test {

// A DeepSeek-V4-like model: W 128, N 5, `stored` + `dropped` MXFP8 MQA layers.
struct Model {
  std::vector<swa_layer_desc_t> layers;
  swa_config_t config;
  Model(int stored, int dropped, uint32_t max_slots = 8) {
    for (int i = 0; i < stored + dropped; ++i) {
      swa_layer_desc_t l;
      swa_layer_desc_init(&l);
      l.role = i < stored ? SWA_LAYER_STORED : SWA_LAYER_DROPPED;
      layers.push_back(l);
    }
    swa_config_init(&config);
    config.draft_tokens = 5;
    config.max_slots = max_slots;
    config.backend = SWA_BACKEND_CPU;
    Sync();
  }
  void Sync() {
    config.num_layers = static_cast<uint32_t>(layers.size());
    config.layers = layers.data();
  }
};

inline std::string LastError() { return swa_last_error(); }

// The start of a host cache's pool: layer 0's view less its ring offset;
// nullptr when either call fails.
inline uint8_t* PoolBase(swa_cache_t* cache) {
  swa_layer_layout_t ll{sizeof ll};
  swa_tensor_view_t v{sizeof v};
  if (swa_cache_layer_layout(cache, 0, &ll) != SWA_OK || swa_cache_layer_view(cache, 0, &v) != SWA_OK)
    return nullptr;
  return static_cast<uint8_t*>(v.data) - ll.ring_offset;
}

}  // namespace swa_test
