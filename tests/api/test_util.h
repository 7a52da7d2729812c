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

}  // namespace swa_test
