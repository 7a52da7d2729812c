// swa_step and swa_decode_graph_step check a layer's tensors in one place
// (src/step/step_tensors.cc): the same bad tensor gives both calls the same
// status and the same message, naming the tensor, and writes no output.
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "swacache.h"

namespace {

constexpr int kHq = 2, kD = 32;

class StepTensorCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    // Layer 0: K and V, no sinks. Layer 1: one shared vector, sinks.
    for (int l = 0; l < 2; ++l) {
      swa_layer_desc_init(&layers_[l]);
      layers_[l].q_heads = kHq, layers_[l].kv_heads = 1, layers_[l].head_dim = kD;
      layers_[l].kv_format = SWA_FORMAT_FP32;
      layers_[l].shared_kv = l == 1, layers_[l].has_sinks = l == 1;
    }
    swa_config_t c;
    swa_config_init(&c);
    c.backend = SWA_BACKEND_CPU, c.max_slots = 4, c.num_threads = 1;
    c.window = 8, c.draft_tokens = 1;
    c.num_layers = 2, c.layers = layers_;
    ASSERT_EQ(swa_cache_create(&c, &cache_), SWA_OK) << swa_last_error();
    // A host plan over slot A; a graph over slot B (one token per step).
    uint32_t a = 0, b = 0;
    ASSERT_EQ(swa_slot_alloc(cache_, &a), SWA_OK);
    ASSERT_EQ(swa_slot_alloc(cache_, &b), SWA_OK);
    ASSERT_EQ(swa_plan_create(cache_, &plan_), SWA_OK);
    const swa_seq_t seq = {a, 1, 1, 0};
    ASSERT_EQ(swa_plan_build(plan_, &seq, 1), SWA_OK) << swa_last_error();
    ASSERT_EQ(swa_decode_graph_create(cache_, 1, 1, &graph_), SWA_OK) << swa_last_error();
    ASSERT_EQ(swa_decode_graph_import(graph_, &b, 1, nullptr), SWA_OK) << swa_last_error();
    const int32_t slot = int32_t(b), seqlen_k = 1;
    ASSERT_EQ(swa_decode_graph_plan(graph_, &slot, &seqlen_k, 1, nullptr), SWA_OK)
        << swa_last_error();
    for (size_t i = 0; i < q_.size(); ++i) q_[i] = 0.1f + 0.01f * float(i % 23);
    for (size_t i = 0; i < k_.size(); ++i) k_[i] = -0.3f + 0.02f * float(i % 19);
    for (size_t i = 0; i < v_.size(); ++i) v_[i] = 0.7f - 0.03f * float(i % 7);
  }
  void TearDown() override {
    swa_decode_graph_destroy(graph_);
    swa_plan_destroy(plan_);
    swa_cache_destroy(cache_);
  }

  // Valid arguments for `layer`: one token.
  swa_step_args_t Args(uint32_t layer) {
    swa_step_args_t a;
    swa_step_args_init(&a);
    a.layer = layer, a.q = q_.data(), a.k_new = k_.data(), a.out = out_.data();
    a.v_new = layer == 0 ? v_.data() : nullptr;
    a.sinks = layer == 1 ? sinks_.data() : nullptr;
    return a;
  }

  struct Result {
    swa_status_t status;
    std::string message;
    bool wrote;
  };
  Result Run(bool graph, const swa_step_args_t* args) {
    out_.assign(out_.size(), std::nanf(""));
    const swa_status_t st = graph ? swa_decode_graph_step(graph_, args)
                                  : swa_step(cache_, plan_, args);
    bool wrote = false;
    for (float x : out_) wrote |= !std::isnan(x);
    return {st, st == SWA_OK ? "" : swa_last_error(), wrote};
  }

  swa_layer_desc_t layers_[2];
  swa_cache_t* cache_ = nullptr;
  swa_plan_t* plan_ = nullptr;
  swa_decode_graph_t* graph_ = nullptr;
  std::vector<float> q_ = std::vector<float>(kHq * kD), k_ = std::vector<float>(kD),
                     v_ = std::vector<float>(kD), out_ = std::vector<float>(kHq * kD),
                     sinks_ = std::vector<float>(kHq, 0.5f);
};

TEST_F(StepTensorCheck, ValidArgumentsPassBoth) {
  for (uint32_t layer : {0u, 1u}) {
    const swa_step_args_t a = Args(layer);
    for (bool graph : {false, true}) {
      const Result r = Run(graph, &a);
      EXPECT_EQ(r.status, SWA_OK) << (graph ? "graph: " : "step: ") << r.message;
      EXPECT_TRUE(r.wrote);
    }
  }
}

TEST_F(StepTensorCheck, SameBadTensorSameMessage) {
  struct Case {
    const char* what;
    uint32_t layer;
    std::function<void(swa_step_args_t&)> spoil;
    swa_status_t status;
    const char* message;  // a part of it
  };
  const std::vector<Case> cases = {
      {"struct_size", 0, [](swa_step_args_t& a) { a.struct_size = 12; }, SWA_INVALID_ARGUMENT,
       "swa_step_args_t.struct_size = 12"},
      {"q_dtype", 0, [](swa_step_args_t& a) { a.q_dtype = swa_dtype_t(9); },
       SWA_INVALID_ARGUMENT, "q_dtype = 9 is not a swa_dtype_t value"},
      {"layer", 0, [](swa_step_args_t& a) { a.layer = 7; }, SWA_OUT_OF_RANGE,
       "layer = 7 is out of range"},
      {"q", 0, [](swa_step_args_t& a) { a.q = nullptr; }, SWA_INVALID_ARGUMENT, "q is NULL"},
      {"k_new", 1, [](swa_step_args_t& a) { a.k_new = nullptr; }, SWA_INVALID_ARGUMENT,
       "k_new is NULL"},
      {"out", 0, [](swa_step_args_t& a) { a.out = nullptr; }, SWA_INVALID_ARGUMENT,
       "out is NULL"},
      {"v_new missing", 0, [](swa_step_args_t& a) { a.v_new = nullptr; }, SWA_INVALID_ARGUMENT,
       "v_new is NULL but layer 0 stores separate K and V"},
      {"v_new extra", 1, [this](swa_step_args_t& a) { a.v_new = v_.data(); },
       SWA_INVALID_ARGUMENT, "v_new is not NULL but layer 1 shares one vector"},
      {"sinks missing", 1, [](swa_step_args_t& a) { a.sinks = nullptr; }, SWA_INVALID_ARGUMENT,
       "sinks is NULL but layer 1 has attention sinks"},
      {"sinks extra", 0, [this](swa_step_args_t& a) { a.sinks = sinks_.data(); },
       SWA_INVALID_ARGUMENT, "sinks is given but layer 0 has no attention sinks"},
      {"negative scale", 0, [](swa_step_args_t& a) { a.softmax_scale = -0.5f; },
       SWA_INVALID_ARGUMENT, "softmax_scale = -0.5 is not a finite value >= 0"},
      {"NaN scale", 1, [](swa_step_args_t& a) { a.softmax_scale = std::nanf(""); },
       SWA_INVALID_ARGUMENT, "softmax_scale = nan"},
      {"infinite scale", 0, [](swa_step_args_t& a) { a.softmax_scale = INFINITY; },
       SWA_INVALID_ARGUMENT, "softmax_scale = inf"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    swa_step_args_t a = Args(c.layer);
    c.spoil(a);
    const Result step = Run(false, &a), graph = Run(true, &a);
    EXPECT_EQ(step.status, c.status);
    EXPECT_NE(step.message.find(c.message), std::string::npos) << step.message;
    EXPECT_EQ(graph.status, step.status);
    EXPECT_EQ(graph.message, step.message);
    EXPECT_FALSE(step.wrote);
    EXPECT_FALSE(graph.wrote);
  }
  const Result step = Run(false, nullptr), graph = Run(true, nullptr);
  EXPECT_EQ(step.status, SWA_INVALID_ARGUMENT);
  EXPECT_EQ(step.message, "args is NULL");
  EXPECT_EQ(graph.message, step.message);
}

}  // namespace
