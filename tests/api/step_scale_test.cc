// The softmax scale of a layer (swa_layer_desc_t::softmax_scale) and of a
// step (swa_step_args_t::softmax_scale): the step's wins when non-zero, else
// the layer's, else 1/sqrt(head_dim). Outputs against the FP64 dense
// reference with the scale the rule names; a bad layer scale is refused with
// a message naming the layer and the value. The graph decode's use of the
// layer's scale: decode_graph_test.cc (HonoursTheLayersSoftmaxScale).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "api/step_harness.h"
#include "gtest/gtest.h"
#include "swacache.h"

namespace swa_test {
namespace {

// A prefill past the window, then decode and verify steps of two sequences,
// FP32 and BF16 queries.
void RunSteps(StepHarness& h) {
  uint32_t slots[2];
  for (uint32_t& s : slots) ASSERT_EQ(swa_slot_alloc(h.cache(), &s), SWA_OK);
  const swa_dtype_t f32 = SWA_DTYPE_FP32, bf16 = SWA_DTYPE_BF16;
  ASSERT_TRUE(h.Step({{slots[0], 21, 21, 0}, {slots[1], 4, 4, 0}}, f32, f32, f32));
  ASSERT_TRUE(h.Step({{slots[0], 1, 22, 0}, {slots[1], 3, 7, 0}}, bf16, f32, f32));
  ASSERT_TRUE(h.Step({{slots[0], 2, 24, 0}}, f32, bf16, bf16));
}

// GQA with separate BF16 K/V (FP32 layer) and MQA on MXFP8 with sinks; no
// scale is 1/sqrt(head_dim) of its layer (1/8 and 1/sqrt(32)).
std::vector<LayerCfg> Layers(float scale0, float scale1) {
  LayerCfg gqa{SWA_FORMAT_BF16, 4, 2, 64, false, false};
  LayerCfg mqa{SWA_FORMAT_MXFP8, 6, 1, 32, true, true};
  gqa.softmax_scale = scale0;
  mqa.softmax_scale = scale1;
  return {gqa, mqa};
}

TEST(StepScale, LayerScaleOnly) {
  StepHarness h(16, 2, Layers(0.21f, 0.05f), 2, 101, /*all_stored=*/true);
  RunSteps(h);
}

TEST(StepScale, StepScaleOnly) {
  StepHarness h(16, 2, Layers(0, 0), 2, 102, /*all_stored=*/true);
  h.SetStepScale(0.3f);
  RunSteps(h);
}

TEST(StepScale, StepScaleWinsOverTheLayers) {
  StepHarness h(16, 2, Layers(0.21f, 0.05f), 2, 103, /*all_stored=*/true);
  h.SetStepScale(0.3f);
  RunSteps(h);
}

// Gemma-2: query_pre_attn_scalar 256 (scale 1/16) with head_dim 128, GQA,
// logit soft-cap 50 (on the scaled logits), all in the layer.
TEST(StepScale, Gemma2QueryPreAttnScalarInTheLayer) {
  LayerCfg g{SWA_FORMAT_BF16, 4, 2, 128, false, false};
  g.softcap = 50.0f;
  g.softmax_scale = 1.0f / std::sqrt(256.0f);
  StepHarness h(16, 0, {g}, 2, 104, /*all_stored=*/true);
  uint32_t slot;
  ASSERT_EQ(swa_slot_alloc(h.cache(), &slot), SWA_OK);
  ASSERT_TRUE(h.Step({{slot, 20, 20, 0}}, SWA_DTYPE_FP32, SWA_DTYPE_FP32, SWA_DTYPE_FP32));
  ASSERT_TRUE(h.Step({{slot, 1, 21, 0}}, SWA_DTYPE_BF16, SWA_DTYPE_BF16, SWA_DTYPE_FP32));
}

// A bad layer scale or a non-zero reserved field: INVALID_ARGUMENT from
// swa_cache_create and swa_layout_compute, naming the layer and the value.
TEST(StepScale, BadLayerScaleIsRefusedNamingLayerAndValue) {
  struct Bad {
    float scale;
    uint32_t reserved;
    const char* names;
  };
  const float inf = std::numeric_limits<float>::infinity();
  const Bad cases[] = {{-0.5f, 0, "layers[1].softmax_scale = -0.5"},
                       {inf, 0, "layers[1].softmax_scale = inf"},
                       {std::nanf(""), 0, "layers[1].softmax_scale = nan"},
                       {0.25f, 3, "layers[1].reserved = 3"}};
  for (const Bad& b : cases) {
    SCOPED_TRACE(b.names);
    swa_layer_desc_t l[2];
    for (swa_layer_desc_t& d : l) {
      swa_layer_desc_init(&d);
      d.q_heads = 2, d.head_dim = 32;
    }
    EXPECT_EQ(l[0].softmax_scale, 0.0f);  // the default: 1/sqrt(head_dim)
    EXPECT_EQ(l[0].reserved, 0u);
    l[1].softmax_scale = b.scale;
    l[1].reserved = b.reserved;
    swa_config_t c;
    swa_config_init(&c);
    c.window = 8, c.max_slots = 1, c.backend = SWA_BACKEND_CPU, c.num_layers = 2, c.layers = l;
    swa_cache_t* cache = nullptr;
    EXPECT_EQ(swa_cache_create(&c, &cache), SWA_INVALID_ARGUMENT);
    EXPECT_EQ(cache, nullptr);
    EXPECT_NE(std::string(swa_last_error()).find(b.names), std::string::npos) << swa_last_error();
    swa_layout_t lay;
    lay.struct_size = sizeof lay;
    EXPECT_EQ(swa_layout_compute(&c, &lay), SWA_INVALID_ARGUMENT);
    EXPECT_NE(std::string(swa_last_error()).find(b.names), std::string::npos) << swa_last_error();
  }
}

// The step's scale is checked as before: a negative one is refused, naming it.
TEST(StepScale, BadStepScaleIsRefusedEvenWithALayerScale) {
  StepHarness h(16, 0, Layers(0.21f, 0.05f), 1, 105, /*all_stored=*/true);
  uint32_t slot;
  ASSERT_EQ(swa_slot_alloc(h.cache(), &slot), SWA_OK);
  const swa_seq_t seq = {slot, 1, 1, 0};
  ASSERT_EQ(swa_plan_build(h.plan(), &seq, 1), SWA_OK) << swa_last_error();
  std::vector<float> q(4 * 64, 0.5f), k(2 * 64, 0.25f), out(4 * 64, -7.0f);
  swa_step_args_t a;
  swa_step_args_init(&a);
  a.q = q.data(), a.k_new = k.data(), a.v_new = k.data(), a.out = out.data();
  a.softmax_scale = -2.0f;
  EXPECT_EQ(swa_step(h.cache(), h.plan(), &a), SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(swa_last_error()).find("softmax_scale = -2"), std::string::npos)
      << swa_last_error();
  EXPECT_EQ(out[0], -7.0f);
}

}  // namespace
}  // namespace swa_test
