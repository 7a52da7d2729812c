// A small CPU cache with one graph decode, for the graph decode's ownership
// and idle-row tests: host-planned steps and graph steps with random FP32
// inputs, and the ring bytes of one slot.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "api/test_layers.h"
#include "gtest/gtest.h"
#include "swacache.h"
#include "test_random.h"

namespace swa_test {

class GraphRig {
 public:
  static constexpr uint32_t kWindow = 16, kDraft = 3;  // R = 20, R - W + 1 = 5

  GraphRig(uint32_t tokens, uint32_t max_seqs, uint64_t seed) : tokens_(tokens), rng_(seed) {
    // A GQA FP32 ring with separate K/V, and an MQA MXFP8 ring with sinks.
    cfg_ = {LayerCfg{SWA_FORMAT_FP32, 4, 2, 32, false, false},
            LayerCfg{SWA_FORMAT_MXFP8, 4, 1, 64, true, true}};
    for (const LayerCfg& c : cfg_) descs_.push_back(ToDesc(c, SWA_LAYER_STORED));
    swa_config_t c;
    swa_config_init(&c);
    c.window = kWindow;
    c.draft_tokens = kDraft;
    c.max_slots = 8;
    c.backend = SWA_BACKEND_CPU;
    c.num_threads = 1;
    c.num_layers = uint32_t(descs_.size());
    c.layers = descs_.data();
    EXPECT_EQ(swa_cache_create(&c, &cache_), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_plan_create(cache_, &plan_), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_decode_graph_create(cache_, max_seqs, tokens, &graph_), SWA_OK)
        << swa_last_error();
    for (const LayerCfg& l : cfg_) {
      std::vector<float> s(size_t(l.q_heads));
      for (float& x : s) x = Uniform(-1.5f, 1.5f);
      sinks_.push_back(s);
    }
  }
  ~GraphRig() {
    swa_decode_graph_destroy(graph_);
    swa_plan_destroy(plan_);
    swa_cache_destroy(cache_);
  }

  swa_cache_t* cache() { return cache_; }
  swa_decode_graph_t* graph() { return graph_; }
  swa_plan_t* plan() { return plan_; }
  uint32_t tokens() const { return tokens_; }
  size_t num_layers() const { return cfg_.size(); }
  int q_heads(size_t l) const { return cfg_[l].q_heads; }
  int head_dim(size_t l) const { return cfg_[l].head_dim; }

  // A new slot holding positions 0 ... len - 1 (a host-planned prefill).
  uint32_t NewSlot(int32_t len) {
    uint32_t s = 0;
    EXPECT_EQ(swa_slot_alloc(cache_, &s), SWA_OK) << swa_last_error();
    HostStep(s, len, len);
    return s;
  }

  // A host-planned step of `seqlen_q` new tokens on `slot`, every layer.
  void HostStep(uint32_t slot, int32_t seqlen_q, int32_t seqlen_k) {
    const swa_seq_t seq = {slot, seqlen_q, seqlen_k, 0};
    ASSERT_EQ(swa_plan_build(plan_, &seq, 1), SWA_OK) << swa_last_error();
    for (size_t l = 0; l < cfg_.size(); ++l) {
      Rows r = RunLayer(l, seqlen_q, /*graph=*/false);
      ASSERT_EQ(r.status, SWA_OK) << swa_last_error();
    }
  }

  // One layer's outputs and the status of the call that made them.
  struct Rows {
    swa_status_t status;
    std::vector<float> out, lse;
  };

  // A graph plan over `slots` / `seqlen_k`, then a step of every layer.
  // Returns the plan's status (the steps' too, when it fails) and each
  // layer's rows; outputs and LSE are poisoned with NaN before each step.
  swa_status_t GraphStep(const std::vector<int32_t>& slots, const std::vector<int32_t>& seqlen_k,
                         std::vector<Rows>* layers) {
    const swa_status_t planned = swa_decode_graph_plan(graph_, slots.data(), seqlen_k.data(),
                                                       uint32_t(slots.size()), nullptr);
    if (planned != SWA_OK) return planned;
    for (size_t l = 0; l < cfg_.size(); ++l) {
      Rows r = RunLayer(l, int32_t(slots.size() * tokens_), /*graph=*/true);
      if (r.status != SWA_OK) return r.status;
      if (layers != nullptr) layers->push_back(std::move(r));
    }
    return SWA_OK;
  }

  // Every ring byte of `slot`, all layers in order.
  std::vector<uint8_t> RingBytes(uint32_t slot) const {
    swa_layout_t lay;
    lay.struct_size = sizeof lay;
    EXPECT_EQ(swa_cache_layout(cache_, &lay), SWA_OK);
    std::vector<uint8_t> bytes;
    for (uint32_t l = 0; l < cfg_.size(); ++l) {
      swa_tensor_view_t v;
      v.struct_size = sizeof v;
      EXPECT_EQ(swa_cache_layer_view(cache_, l, &v), SWA_OK);
      const uint8_t* ring = static_cast<const uint8_t*>(v.data) + slot * lay.slot_bytes;
      bytes.insert(bytes.end(), ring, ring + size_t(v.shape[1]) * size_t(v.strides[1]));
    }
    return bytes;
  }

  float Uniform(float lo, float hi) { return swa_test::UniformReal<float>(lo, hi)(rng_); }

 private:
  std::vector<float> Random(size_t n, float amp) {
    std::vector<float> v(n);
    for (float& x : v) {
      x = Uniform(-amp, amp);
      if (std::fabs(x) < 1e-3f) x = 0.5f;  // never zeros
    }
    return v;
  }

  Rows RunLayer(size_t l, int32_t t, bool graph) {
    const LayerCfg& c = cfg_[l];
    const std::vector<float> q = Random(size_t(t) * c.q_heads * c.head_dim, 1.0f);
    const std::vector<float> k = Random(size_t(t) * c.kv_heads * c.head_dim, 2.0f);
    const std::vector<float> v = Random(size_t(t) * c.kv_heads * c.head_dim, 2.0f);
    Rows r;
    r.out.assign(size_t(t) * c.q_heads * c.head_dim, std::numeric_limits<float>::quiet_NaN());
    r.lse.assign(size_t(t) * c.q_heads, std::numeric_limits<float>::quiet_NaN());
    swa_step_args_t a;
    swa_step_args_init(&a);
    a.layer = uint32_t(l);
    a.q = q.data();
    a.q_dtype = SWA_DTYPE_FP32;
    a.k_new = k.data();
    a.v_new = c.shared_kv ? nullptr : v.data();
    a.kv_dtype = SWA_DTYPE_FP32;
    a.out = r.out.data();
    a.out_dtype = SWA_DTYPE_FP32;
    a.sinks = c.sinks ? sinks_[l].data() : nullptr;
    a.lse = r.lse.data();
    r.status = graph ? swa_decode_graph_step(graph_, &a) : swa_step(cache_, plan_, &a);
    return r;
  }

  std::vector<LayerCfg> cfg_;
  std::vector<swa_layer_desc_t> descs_;
  std::vector<std::vector<float>> sinks_;
  uint32_t tokens_;
  std::mt19937_64 rng_;
  swa_cache_t* cache_ = nullptr;
  swa_plan_t* plan_ = nullptr;
  swa_decode_graph_t* graph_ = nullptr;
};

}  // namespace swa_test
