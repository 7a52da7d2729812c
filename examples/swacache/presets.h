// Built-in model presets for the swacache tool, expressed with the public API only.
#pragma once

#include <string>
#include <vector>

#include "swacache.h"

namespace swacache_cli {

struct Preset {
  std::string name;
  std::string description;
  std::vector<swa_layer_desc_t> layers;
  swa_config_t config;
};

// "deepseek-v4": W 128, N 5, 20 stored + 20 dropped MXFP8 MQA layers (64 query
// heads on one shared 512-wide KV vector, sinks), compression state (ratio 4)
// on the stored layers. "gpt-oss": W 128, 18 sliding layers, GQA 64/8, D 64,
// separate K/V in BF16, sinks.
bool MakePreset(const std::string& name, uint32_t max_slots, Preset* out);
std::vector<std::string> PresetNames();

}  // namespace swacache_cli
