#include "presets.h"

namespace swacache_cli {

std::vector<std::string> PresetNames() { return {"deepseek-v4", "deepseek-v4-flash", "gpt-oss"}; }

bool MakePreset(const std::string& name, uint32_t max_slots, Preset* out) {
  out->name = name;
  out->layers.clear();
  swa_config_init(&out->config);
  out->config.max_slots = max_slots;
  if (name == "deepseek-v4") {
    out->description =
        "DeepSeek-V4-like: W 128, 5 draft tokens, 20 stored + 20 dropped MXFP8 layers, "
        "64 query heads on one shared 512-wide KV vector";
    out->config.window = 128;
    out->config.draft_tokens = 5;
    for (int i = 0; i < 40; ++i) {
      swa_layer_desc_t l;
      swa_layer_desc_init(&l);  // 64 q heads, 1 shared 512-wide MXFP8 vector
      l.role = i < 20 ? SWA_LAYER_STORED : SWA_LAYER_DROPPED;
      l.has_sinks = 1;
      if (l.role == SWA_LAYER_STORED) {
        l.compress_ratio = 4;              // compressed-attention state, ratio 4
        l.compress_entry_bytes = 2 * 512 * 4;  // FP32 KV + gate partial sums
      }
      out->layers.push_back(l);
    }
  } else if (name == "deepseek-v4-flash") {
    out->description =
        "DeepSeek-V4-Flash-like with the compressor state in the slot: W 128, 5 draft tokens, "
        "43 stored MXFP8 layers (0, 1 sliding; even 2..42 CSA rate 4 with the 128-wide indexer; "
        "odd 3..41 HCA rate 128; FP32 source rows) + the MTP layer dropped";
    out->config.window = 128;
    out->config.draft_tokens = 5;
    for (int i = 0; i < 44; ++i) {
      swa_layer_desc_t l;
      swa_layer_desc_init(&l);
      l.role = i < 43 ? SWA_LAYER_STORED : SWA_LAYER_DROPPED;
      l.has_sinks = 1;
      if (i >= 2 && i < 43) {
        l.compress_kind = i % 2 == 0 ? SWA_COMPRESS_CSA : SWA_COMPRESS_HCA;
        l.compress_ratio = i % 2 == 0 ? 4 : 128;
        l.compress_head_dim = 512;
        l.compress_rope_dims = 64;
        l.rope_theta = 160000.0f;
        l.index_head_dim = i % 2 == 0 ? 128 : 0;
      }
      out->layers.push_back(l);
    }
  } else if (name == "gpt-oss") {
    out->description =
        "gpt-oss-like: W 128, 18 sliding layers, GQA 64 query / 8 KV heads, D 64, BF16 K and V";
    out->config.window = 128;
    out->config.draft_tokens = 0;
    for (int i = 0; i < 18; ++i) {
      swa_layer_desc_t l;
      swa_layer_desc_init(&l);
      l.q_heads = 64;
      l.kv_heads = 8;
      l.head_dim = 64;
      l.shared_kv = 0;
      l.kv_format = SWA_FORMAT_BF16;
      l.has_sinks = 1;
      out->layers.push_back(l);
    }
  } else {
    return false;
  }
  out->config.num_layers = static_cast<uint32_t>(out->layers.size());
  out->config.layers = out->layers.data();
  return true;
}

}  // namespace swacache_cli
