// Exact replay (docs/semantics.md, "Exact replay"): swa_slot_begin_replay_exact
// returns S = L * (W - 1) (+1 with need_last_output), and on a toy model of L
// stacked sliding layers (each layer's q, k, v computed from the layer below's
// output, as in a transformer) replaying S positions leaves every layer's ring
// rows at H - W + 1 ... H - 1 bit-identical to a full prefill, while S - 1 and
// the approximate W-token replay do not. With S + 1 the last prefix position's
// output is identical too, with S it is not.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "swacache.h"

namespace {

constexpr uint32_t kL = 3;   // sliding layers
constexpr uint32_t kW = 4;   // window
constexpr uint32_t kD = 32;  // head dim
constexpr uint32_t kHq = 2;  // query heads (one KV head)
constexpr uint32_t kM = 32;  // model width
constexpr int32_t kH = 30;   // prefix length

struct ToyModel {
  swa_layer_desc_t d[kL];
  swa_cache_t* cache = nullptr;
  swa_plan_t* plan = nullptr;
  std::vector<std::vector<float>> x;  // token embeddings [H][M]
  std::vector<float> wq[kL], wk[kL], wv[kL], wo[kL];

  ToyModel() {
    for (uint32_t l = 0; l < kL; ++l) {
      swa_layer_desc_init(&d[l]);
      d[l].q_heads = kHq;
      d[l].kv_heads = 1;
      d[l].head_dim = kD;
      d[l].shared_kv = 0;
      d[l].kv_format = l == 1 ? SWA_FORMAT_MXFP8 : SWA_FORMAT_FP32;
    }
    swa_config_t cfg;
    swa_config_init(&cfg);
    cfg.window = kW;
    cfg.max_slots = 8;
    cfg.backend = SWA_BACKEND_CPU;
    cfg.num_threads = 1;
    cfg.num_layers = kL;
    cfg.layers = d;
    EXPECT_EQ(swa_cache_create(&cfg, &cache), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_plan_create(cache, &plan), SWA_OK);
    std::mt19937 rng(32);
    std::normal_distribution<float> g(0, 1);
    x.assign(kH + 1, std::vector<float>(kM));
    for (auto& v : x)
      for (float& e : v) e = g(rng);
    const float s = 1.0f / std::sqrt(float(kM));
    for (uint32_t l = 0; l < kL; ++l) {
      for (auto* w : {&wq[l], &wk[l], &wv[l]}) {
        w->resize(size_t(kM) * kD * (w == &wq[l] ? kHq : 1));
        for (float& e : *w) e = 2 * s * g(rng);
      }
      wo[l].resize(size_t(kM) * kHq * kD);
      for (float& e : wo[l]) e = s * g(rng);
    }
  }
  ~ToyModel() {
    swa_plan_destroy(plan);
    swa_cache_destroy(cache);
  }
  static std::vector<float> MatVec(const std::vector<float>& w, const std::vector<float>& h,
                                   size_t rows) {
    std::vector<float> y(rows, 0.0f);
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < h.size(); ++c) y[r] += w[r * h.size() + c] * h[c];
    return y;
  }
  // Runs position p through every layer (one token, ring-only path); returns
  // the top layer's attention output.
  std::vector<float> Token(uint32_t slot, int32_t p) {
    swa_seq_t s = {slot, 1, p + 1, 0};
    EXPECT_EQ(swa_plan_build(plan, &s, 1), SWA_OK) << swa_last_error();
    std::vector<float> h = x[p], out;
    for (uint32_t l = 0; l < kL; ++l) {
      std::vector<float> q = MatVec(wq[l], h, kHq * kD), k = MatVec(wk[l], h, kD),
                         v = MatVec(wv[l], h, kD);
      out.assign(size_t(kHq) * kD, NAN);
      swa_step_args_t a;
      swa_step_args_init(&a);
      a.layer = l;
      a.q = q.data();
      a.k_new = k.data();
      a.v_new = v.data();
      a.out = out.data();
      EXPECT_EQ(swa_step(cache, plan, &a), SWA_OK) << swa_last_error();
      const std::vector<float> o = MatVec(wo[l], out, kM);
      for (uint32_t i = 0; i < kM; ++i) h[i] = std::tanh(h[i] + o[i]);
    }
    return out;
  }
  std::vector<uint8_t> Row(uint32_t slot, uint32_t l, int32_t p) const {
    swa_tensor_view_t v;
    v.struct_size = sizeof v;
    EXPECT_EQ(swa_cache_layer_view(cache, l, &v), SWA_OK);
    const auto* b = static_cast<const uint8_t*>(v.data) + slot * v.strides[0] +
                    (p % int64_t(v.shape[1])) * v.strides[1];
    return std::vector<uint8_t>(b, b + v.strides[1]);
  }
};

// Positions H - W + 1 ... H - 1 of every layer equal between two slots?
// Returns the first layer that differs, or -1.
int FirstDifferingLayer(const ToyModel& m, uint32_t a, uint32_t b) {
  for (uint32_t l = 0; l < kL; ++l)
    for (int32_t p = kH - int32_t(kW) + 1; p < kH; ++p)
      if (m.Row(a, l, p) != m.Row(b, l, p)) return int(l);
  return -1;
}

// Replays start ... H - 1 into `slot`, prepared with valid_start = start by
// the caller; returns the output at H - 1.
std::vector<float> Replay(ToyModel& m, uint32_t slot, int32_t start) {
  std::vector<float> last;
  for (int32_t p = start; p < kH; ++p) last = m.Token(slot, p);
  return last;
}

TEST(ReplayExact, SpanMakesEveryLayerExactAndOneLessDoesNot) {
  ToyModel m;
  uint32_t full, exact, exact1, shorter, approx;
  for (uint32_t* s : {&full, &exact, &exact1, &shorter, &approx})
    ASSERT_EQ(swa_slot_alloc(m.cache, s), SWA_OK);
  std::vector<float> out_full;
  for (int32_t p = 0; p < kH; ++p) out_full = m.Token(full, p);

  const int32_t S = int32_t(kL * (kW - 1));  // 9
  int32_t start = -1, len = -1;
  ASSERT_EQ(swa_slot_begin_replay_exact(m.cache, exact, kH, 0, 0, &start, &len), SWA_OK)
      << swa_last_error();
  EXPECT_EQ(start, kH - S);
  EXPECT_EQ(len, S);
  const std::vector<float> out_exact = Replay(m, exact, start);
  EXPECT_EQ(FirstDifferingLayer(m, full, exact), -1);
  // S alone does not make the output at H - 1 exact (its top layer reads
  // position H - W, which is exact only from S + 1 on).
  EXPECT_NE(std::memcmp(out_exact.data(), out_full.data(), out_full.size() * sizeof(float)), 0);

  // need_last_output: S + 1, and the output at H - 1 is bit-identical.
  ASSERT_EQ(swa_slot_begin_replay_exact(m.cache, exact1, kH, kL, 1, &start, &len), SWA_OK);
  EXPECT_EQ(start, kH - S - 1);
  EXPECT_EQ(len, S + 1);
  const std::vector<float> out_exact1 = Replay(m, exact1, start);
  EXPECT_EQ(FirstDifferingLayer(m, full, exact1), -1);
  EXPECT_EQ(std::memcmp(out_exact1.data(), out_full.data(), out_full.size() * sizeof(float)), 0);

  // One position short: the top layer differs (the lower ones are still exact).
  ASSERT_EQ(swa_slot_set_valid_start(m.cache, shorter, kH - S + 1), SWA_OK);
  Replay(m, shorter, kH - S + 1);
  EXPECT_EQ(FirstDifferingLayer(m, full, shorter), int(kL) - 1);

  // The approximate replay (W positions): already the second layer differs.
  ASSERT_EQ(swa_slot_begin_replay(m.cache, approx, kH, &start, &len), SWA_OK);
  EXPECT_EQ(start, kH - int32_t(kW));
  Replay(m, approx, start);
  EXPECT_EQ(FirstDifferingLayer(m, full, approx), 1);
}

// The span's integer arithmetic, through the C call.
TEST(ReplayExact, SpanArithmetic) {
  ToyModel m;  // W = 4, 3 layers
  uint32_t s;
  ASSERT_EQ(swa_slot_alloc(m.cache, &s), SWA_OK);
  struct Case {
    int32_t hit;
    uint32_t layers;
    int32_t last;
    int32_t start, len;
  };
  const Case cases[] = {
      {30, 0, 0, 21, 9},        // the cache's 3 layers: 3 * 3
      {30, 0, 1, 20, 10},       // + 1
      {30, 3, 0, 21, 9},        // given explicitly
      {30, 5, 0, 15, 15},       // the model has 5 sliding layers
      {30, 10, 0, 0, 30},       // span 30: the whole prefix
      {30, 10, 1, 0, 30},       // span 31 > H: from 0
      {9, 0, 0, 0, 9},          // H = S
      {10, 0, 0, 1, 9},         // H = S + 1
      {0, 0, 1, 0, 0},          // empty prefix
      {1, 0, 0, 0, 1},
      {2000000000, 4000000000u, 1, 0, 2000000000},  // 4e9 * 3 saturates
      {2000000000, 7, 0, 2000000000 - 21, 21},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("hit " + std::to_string(c.hit) + " layers " + std::to_string(c.layers) +
                 " last " + std::to_string(c.last));
    ASSERT_EQ(swa_slot_reset(m.cache, s), SWA_OK);
    int32_t start = -1, len = -1;
    ASSERT_EQ(swa_slot_begin_replay_exact(m.cache, s, c.hit, c.layers, c.last, &start, &len),
              SWA_OK)
        << swa_last_error();
    EXPECT_EQ(start, c.start);
    EXPECT_EQ(len, c.len);
    swa_slot_info_t info;
    info.struct_size = sizeof info;
    ASSERT_EQ(swa_slot_info(m.cache, s, &info), SWA_OK);
    EXPECT_EQ(info.valid_start, c.start);
    EXPECT_EQ(info.written_end, c.start);
  }
  // Refusals change nothing: a negative hit, a slot holding positions, bad ids.
  ASSERT_EQ(swa_slot_reset(m.cache, s), SWA_OK);
  int32_t start = -7, len = -7;
  EXPECT_EQ(swa_slot_begin_replay_exact(m.cache, s, -1, 0, 0, &start, &len), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_slot_begin_replay_exact(nullptr, s, 5, 0, 0, &start, &len), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_slot_begin_replay_exact(m.cache, 99, 5, 0, 0, &start, &len), SWA_OUT_OF_RANGE);
  EXPECT_EQ(swa_slot_begin_replay_exact(m.cache, 7, 5, 0, 0, &start, &len),
            SWA_FAILED_PRECONDITION);  // not allocated
  m.Token(s, 0);
  EXPECT_EQ(swa_slot_begin_replay_exact(m.cache, s, 5, 0, 0, &start, &len),
            SWA_FAILED_PRECONDITION);  // holds position 0
  EXPECT_EQ(start, -7);
  EXPECT_EQ(len, -7);
  swa_slot_info_t info;
  info.struct_size = sizeof info;
  ASSERT_EQ(swa_slot_info(m.cache, s, &info), SWA_OK);
  EXPECT_EQ(info.written_end, 1);
  EXPECT_EQ(info.valid_start, 0);
}

}  // namespace
