// Save/restore and bounded replay, end to end with swa_step and the dense reference.
#include <cstring>
#include <random>
#include <vector>

#include "api/step_harness.h"
#include "gtest/gtest.h"
#include "test_random.h"

namespace swa_test {
namespace {

const std::vector<LayerCfg> kLayers = {
    {SWA_FORMAT_MXFP8, 16, 1, 128, true, true},    // stored
    {SWA_FORMAT_BF16, 8, 2, 64, false, false},     // dropped
    {SWA_FORMAT_MXFP8, 8, 2, 64, false, true}};    // stored

// A sequence is saved mid-decode, evicted, restored into another slot, and
// its next steps still match the dense reference of the accepted tokens.
// (Every layer is stored here: dropped layers are never persisted, so an
// engine rebuilds their state itself after a restore.)
TEST(StepStore, RestoredSequenceContinuesExactly) {
  StepHarness h(16, 3, kLayers, 3, 42, /*all_stored=*/true);
  swa_store_memory_config_t mc;
  swa_store_memory_config_init(&mc);
  swa_kv_store_t store;
  swa_kv_store_init(&store);
  ASSERT_EQ(swa_store_memory_create(&mc, &store), SWA_OK) << swa_last_error();
  ASSERT_EQ(swa_cache_set_store(h.cache(), &store), SWA_OK) << swa_last_error();
  uint32_t a, b;
  ASSERT_EQ(swa_slot_alloc(h.cache(), &a), SWA_OK);
  ASSERT_EQ(swa_slot_alloc(h.cache(), &b), SWA_OK);
  int32_t pos = 0;
  for (int32_t chunk : {40, 7, 3}) {
    ASSERT_TRUE(h.Step({{a, chunk, pos + chunk, 0}}, SWA_DTYPE_FP32, SWA_DTYPE_FP32, SWA_DTYPE_FP32));
    pos += chunk;
  }
  // Speculative step, two drafts rejected: the saved state still carries them.
  ASSERT_TRUE(h.Step({{a, 4, pos + 4, 0}}, SWA_DTYPE_FP32, SWA_DTYPE_FP32, SWA_DTYPE_FP32));
  pos += 2;
  const uint8_t key[] = {'s', 'e', 'q', 0, 7};
  ASSERT_EQ(swa_slot_save(h.cache(), a, key, sizeof key), SWA_OK) << swa_last_error();
  uint32_t c;
  ASSERT_EQ(swa_slot_alloc(h.cache(), &c), SWA_OK);
  ASSERT_NE(c, a);
  ASSERT_EQ(swa_slot_free(h.cache(), a), SWA_OK);
  ASSERT_EQ(swa_slot_restore(h.cache(), c, key, sizeof key), SWA_OK) << swa_last_error();
  h.MoveSequence(a, c);
  // Continue from the first rejected position, with other work in the batch.
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(h.Step({{c, 4, pos + 4, 0}, {b, 5, 5 * (i + 1), 0}}, SWA_DTYPE_BF16,
                       SWA_DTYPE_FP32, SWA_DTYPE_FP32))
        << "step " << i;
    pos += 1 + i % 4;
  }
}

// Bounded replay (docs/semantics.md): A is prefilled fully; B starts from nothing
// and replays only the last W tokens with the same inputs. Their rings hold
// identical bytes for those positions, and B's decode steps match the dense
// reference under the truncated-window rule.
TEST(StepReplay, ReplayedRingsEqualFullPrefill) {
  const uint32_t W = 16, N = 2;
  const int32_t H = 53;
  swa_layer_desc_t d[3];
  std::vector<ReferenceModel::Layer> ref_layers;
  for (int l = 0; l < 3; ++l) {
    LayerCfg c = kLayers[l];
    c.sinks = false;
    d[l] = ToDesc(c, l == 1 ? SWA_LAYER_DROPPED : SWA_LAYER_STORED);
    ref_layers.push_back({kLayers[l].format, kLayers[l].q_heads, kLayers[l].kv_heads,
                          kLayers[l].head_dim, kLayers[l].shared_kv, {}});
  }
  swa_config_t cfg;
  swa_config_init(&cfg);
  cfg.window = W;
  cfg.draft_tokens = N;
  cfg.max_slots = 2;
  cfg.backend = SWA_BACKEND_CPU;
  cfg.num_layers = 3;
  cfg.layers = d;
  swa_cache_t* cache;
  ASSERT_EQ(swa_cache_create(&cfg, &cache), SWA_OK) << swa_last_error();
  swa_plan_t* plan;
  ASSERT_EQ(swa_plan_create(cache, &plan), SWA_OK);
  uint32_t A, B;
  ASSERT_EQ(swa_slot_alloc(cache, &A), SWA_OK);
  ASSERT_EQ(swa_slot_alloc(cache, &B), SWA_OK);

  std::mt19937 rng(7);
  swa_test::UniformReal<float> u(-2, 2);
  std::vector<std::vector<float>> K(3), V(3);  // inputs of positions 0 ... H + 4
  for (int l = 0; l < 3; ++l) {
    const size_t n = size_t(H + 5) * d[l].kv_heads * d[l].head_dim;
    K[l].resize(n);
    V[l].resize(n);
    for (float& x : K[l]) x = u(rng);
    for (float& x : V[l]) x = u(rng);
  }
  auto run = [&](uint32_t slot, int32_t q_start, int32_t n, int32_t valid_start,
                 std::vector<std::vector<float>>* outs, std::vector<std::vector<float>>* qs) {
    swa_seq_t s = {slot, n, q_start + n, valid_start};
    ASSERT_EQ(swa_plan_build(plan, &s, 1), SWA_OK) << swa_last_error();
    for (int l = 0; l < 3; ++l) {
      const size_t tok = size_t(d[l].kv_heads) * d[l].head_dim;
      std::vector<float> q(size_t(n) * d[l].q_heads * d[l].head_dim), out(q.size(), NAN);
      for (float& x : q) x = u(rng);
      swa_step_args_t a;
      swa_step_args_init(&a);
      a.layer = uint32_t(l);
      a.q = q.data();
      a.k_new = K[l].data() + size_t(q_start) * tok;
      a.v_new = d[l].shared_kv ? nullptr : V[l].data() + size_t(q_start) * tok;
      a.out = out.data();
      ASSERT_EQ(swa_step(cache, plan, &a), SWA_OK) << swa_last_error();
      if (outs) outs->push_back(out);
      if (qs) qs->push_back(q);
    }
  };
  for (int32_t p = 0; p < H; p += 20) run(A, p, std::min(20, H - p), 0, nullptr, nullptr);
  int32_t start = -1, len = -1;
  ASSERT_EQ(swa_slot_begin_replay(cache, B, H, &start, &len), SWA_OK) << swa_last_error();
  ASSERT_EQ(start, H - int32_t(W));
  ASSERT_EQ(len, int32_t(W));
  run(B, start, len, start, nullptr, nullptr);

  swa_layout_t lay;
  lay.struct_size = sizeof lay;
  ASSERT_EQ(swa_cache_layout(cache, &lay), SWA_OK);
  for (uint32_t l = 0; l < 3; ++l) {
    swa_tensor_view_t v;
    v.struct_size = sizeof v;
    ASSERT_EQ(swa_cache_layer_view(cache, l, &v), SWA_OK);
    const auto* base = static_cast<const uint8_t*>(v.data);
    for (int32_t p = start; p < H; ++p) {
      const uint8_t* ra = base + A * v.strides[0] + (p % v.shape[1]) * v.strides[1];
      const uint8_t* rb = base + B * v.strides[0] + (p % v.shape[1]) * v.strides[1];
      ASSERT_EQ(std::memcmp(ra, rb, size_t(v.strides[1])), 0) << "layer " << l << " position " << p;
    }
  }

  // B decodes on; the reference sees only positions >= valid_start = H - W.
  ReferenceModel model(int(W), ref_layers);
  for (int l = 0; l < 3; ++l) {
    const size_t tok = size_t(d[l].kv_heads) * d[l].head_dim;
    model.Write(0, l, start, len, K[l].data() + start * tok, V[l].data() + start * tok);
  }
  for (int32_t p = H; p < H + 4; ++p) {
    std::vector<std::vector<float>> outs, qs;
    run(B, p, 1, 0, &outs, &qs);
    for (int l = 0; l < 3; ++l) {
      const size_t tok = size_t(d[l].kv_heads) * d[l].head_dim;
      model.Write(0, l, p, 1, K[l].data() + p * tok, V[l].data() + p * tok);
      std::vector<double> ref(outs[l].size());
      model.Expected(0, l, p, start, qs[l].data(), ref.data());
      EXPECT_LE(RelativeL2(outs[l].data(), ref.data(), ref.size()), 1e-5) << "layer " << l << " p " << p;
    }
  }
  swa_plan_destroy(plan);
  swa_cache_destroy(cache);
}

}  // namespace
}  // namespace swa_test
