// swa_step on the CPU backend against the FP64 dense band-mask reference.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "api/step_harness.h"
#include "gtest/gtest.h"

namespace swa_test {
namespace {

struct Case {
  const char* name;
  uint32_t window, draft;
  std::vector<LayerCfg> layers;
};

// The last 64 of 512 dims rotated, interleaved pairs, YaRN as DeepSeek-V4's
// compressed layers configure it, the output rotated back; sinks.
LayerCfg DeepSeekV4Like(bool sinks) {
  LayerCfg c{SWA_FORMAT_MXFP8, 16, 1, 512, true, sinks};
  c.rope_style = SWA_ROPE_GPTJ;
  c.rope_first = 448;
  c.rope_dims = 64;
  c.rope_theta = 160000.0f;
  c.yarn_factor = 16.0f;
  c.yarn_original = 65536;
  c.rope_attention_factor = 1.0f;
  c.derotate = true;
  return c;
}

// The whole 64-dim head, rotate-half pairs, gpt-oss's YaRN (no truncation,
// default attention factor), GQA 8 with separate K/V and sinks.
LayerCfg GptOssLike(swa_format_t format) {
  LayerCfg c{format, 16, 2, 64, false, true};
  c.rope_style = SWA_ROPE_NEOX;
  c.rope_dims = 64;
  c.rope_theta = 150000.0f;
  c.yarn_factor = 32.0f;
  c.yarn_original = 4096;
  c.yarn_truncate = false;
  return c;
}

// A rotary slice in the middle of the head (dims 32 ... 63 of 96), plain
// RoPE, and Gemma-2's logit soft-cap on small caps (so that it matters).
LayerCfg PartialNeoxSoftcap(swa_format_t format) {
  LayerCfg c{format, 6, 3, 96, false, false};
  c.rope_style = SWA_ROPE_NEOX;
  c.rope_first = 32;
  c.rope_dims = 32;
  c.softcap = 1.5f;
  return c;
}

// MQA: one KV head shared by K and V, no RoPE (so BF16 queries may take the
// BF16 kernels), a small soft-cap. With one KV head the kernels apply the
// scale to the raw scores inside the softmax, not to Q beforehand, so the
// order "scale, then cap" is only checked here and in the DeepSeek-V4 case.
LayerCfg MqaSoftcap(swa_format_t format, bool sinks) {
  LayerCfg c{format, 16, 1, 128, true, sinks};
  c.softcap = 1.5f;
  return c;
}

std::vector<Case> Cases() {
  return {
      // DeepSeek-V4-like: 64 heads on one shared 512-wide MXFP8 vector, sinks.
      {"mqa_mxfp8_d512", 16, 5,
       {{SWA_FORMAT_MXFP8, 64, 1, 512, true, true}, {SWA_FORMAT_MXFP8, 64, 1, 512, true, false}}},
      // gpt-oss-like GQA 8, separate BF16 K/V, D 64, sinks.
      {"gqa8_bf16_d64", 12, 3,
       {{SWA_FORMAT_BF16, 16, 2, 64, false, true}, {SWA_FORMAT_MXFP8, 16, 2, 64, false, false}}},
      // Plain MHA (ratio 1), FP32 and MXFP8, D 128.
      {"mha_fp32_d128", 9, 0,
       {{SWA_FORMAT_FP32, 4, 4, 128, false, false}, {SWA_FORMAT_MXFP8, 4, 4, 128, true, true}}},
      // RoPE inside the step, soft-cap, LSE (checked on every case).
      {"rope_deepseek_v4_like", 16, 5, {DeepSeekV4Like(true), DeepSeekV4Like(false)}},
      {"rope_gpt_oss_like", 12, 3, {GptOssLike(SWA_FORMAT_BF16), GptOssLike(SWA_FORMAT_MXFP8)}},
      {"rope_partial_softcap", 9, 1, {PartialNeoxSoftcap(SWA_FORMAT_FP32),
                                     PartialNeoxSoftcap(SWA_FORMAT_MXFP8)}},
      {"mqa_softcap", 10, 3, {MqaSoftcap(SWA_FORMAT_BF16, true),
                              MqaSoftcap(SWA_FORMAT_MXFP8, false)}},
  };
}

class StepTest : public ::testing::TestWithParam<Case> {};

// Several sequences: chunked prefill (staged path), then speculative decode
// steps with random rejection (ring-only path), mixed batches, both dtypes.
TEST_P(StepTest, ChunkedPrefillThenSpeculativeDecodeMatchesDense) {
  const Case& c = GetParam();
  StepHarness h(c.window, c.draft, c.layers, 4, 1234);
  const int n_seq = 3;
  std::vector<int32_t> accepted(n_seq, 0);  // next position to (re)write
  std::vector<int32_t> target = {h.Int(30, 60), h.Int(1, 10), h.Int(20, 45)};
  for (int s = 0; s < n_seq; ++s) {
    uint32_t slot;
    ASSERT_EQ(swa_slot_alloc(h.cache(), &slot), SWA_OK);
  }
  const swa_dtype_t dt[2] = {SWA_DTYPE_FP32, SWA_DTYPE_BF16};
  for (int step = 0; step < 24; ++step) {
    std::vector<StepSeq> batch;
    for (int s = 0; s < n_seq; ++s) {
      int32_t q;
      if (accepted[s] < target[s]) {
        q = std::min<int32_t>(target[s] - accepted[s], h.Int(1, 3 * c.window));  // prefill chunk
      } else {
        q = int32_t(c.draft) + 1;  // verify + drafts
      }
      if (h.Int(0, 5) == 0) q = 0;  // idle this step
      batch.push_back({uint32_t(s), q, accepted[s] + q, 0});
    }
    ASSERT_TRUE(h.Step(batch, dt[step % 2], dt[(step / 2) % 2], dt[(step / 3) % 2]))
        << c.name << " step " << step;
    for (int s = 0; s < n_seq; ++s) {
      const StepSeq& b = batch[s];
      if (accepted[s] >= target[s] && b.seqlen_q > 0)
        accepted[s] += h.Int(1, b.seqlen_q);  // accept a prefix, reject the rest
      else
        accepted[s] = b.seqlen_k;
    }
  }
  std::printf("%s: max relative error %.3g (steps on the BF16 budget: %.3g)\n", c.name,
              h.max_error(), h.bf16_max_error());
}

TEST_P(StepTest, ReplayWithValidStart) {
  const Case& c = GetParam();
  StepHarness h(c.window, c.draft, c.layers, 2, 99);
  uint32_t slot;
  ASSERT_EQ(swa_slot_alloc(h.cache(), &slot), SWA_OK);
  const int32_t hit = int32_t(c.window) * 2 + 7;
  int32_t start = -1, len = -1;
  ASSERT_EQ(swa_slot_begin_replay(h.cache(), slot, hit, &start, &len), SWA_OK) << swa_last_error();
  ASSERT_EQ(start, hit - int32_t(c.window));
  ASSERT_EQ(len, int32_t(c.window));
  h.SetValidStart(slot, start);
  ASSERT_TRUE(h.Step({{slot, len, hit, start}}, SWA_DTYPE_FP32, SWA_DTYPE_FP32, SWA_DTYPE_FP32));
  for (int i = 0; i < 6; ++i) {  // decode past the truncated window
    const int32_t k = hit + 1 + i;
    ASSERT_TRUE(h.Step({{slot, 1, k, 0}}, SWA_DTYPE_BF16, SWA_DTYPE_FP32, SWA_DTYPE_FP32));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, StepTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return std::string(info.param.name); });

// The DeepSeek-V4 shape with a soft-cap: 64 query heads on one 512-wide
// shared MXFP8 vector, W 128, sinks, 5 draft tokens. One sequence is
// prefilled past the window (FP32 then BF16 queries: the FP32 and the BF16
// kernels), then verifies drafts beside a short second sequence. Few steps:
// the FP64 reference (64 heads of 512 over up to 128 keys) is the cost.
TEST(StepSoftcap, DeepSeekV4ShapeW128MatchesDense) {
  LayerCfg layer{SWA_FORMAT_MXFP8, 64, 1, 512, true, true};
  layer.softcap = 2.0f;
  StepHarness h(128, 5, {layer}, 2, 4321);
  for (uint32_t s = 0; s < 2; ++s) {
    uint32_t slot;
    ASSERT_EQ(swa_slot_alloc(h.cache(), &slot), SWA_OK);
  }
  const swa_dtype_t f32 = SWA_DTYPE_FP32, bf16 = SWA_DTYPE_BF16;
  ASSERT_TRUE(h.Step({{0, 70, 70, 0}, {1, 3, 3, 0}}, f32, f32, f32));
  ASSERT_TRUE(h.Step({{0, 64, 134, 0}}, bf16, bf16, f32));  // past the window
  int32_t accepted[2] = {134, 3};
  for (int step = 0; step < 4; ++step) {
    std::vector<StepSeq> batch;
    for (uint32_t s = 0; s < 2; ++s) batch.push_back({s, 6, accepted[s] + 6, 0});
    ASSERT_TRUE(h.Step(batch, step % 2 ? bf16 : f32, f32, step == 3 ? bf16 : f32))
        << "decode step " << step;
    for (int s = 0; s < 2; ++s) accepted[s] += h.Int(1, 6);  // accept a prefix
  }
  std::printf("deepseek_v4_softcap_w128: max relative error %.3g (BF16 budget: %.3g)\n",
              h.max_error(), h.bf16_max_error());
}

// W 4, 9 tokens: the number of visible keys is 1,2,3,4,4,4,4,4,4. With q = 0
// every visible key scores 0 and with V = 1 and a sink S the output is
// n / (n + e^S), which reveals n.
TEST(StepWindow, VisibleKeyCountsW4) {
  for (int chunk : {9, 1, 3}) {  // one staged prefill, token by token, chunks of 3
    StepHarness h(4, 1, {{SWA_FORMAT_FP32, 1, 1, 32, true, true}}, 1, 5);
    uint32_t slot;
    ASSERT_EQ(swa_slot_alloc(h.cache(), &slot), SWA_OK);
    const float sink = 0.25f;
    std::vector<int> counts;
    for (int p0 = 0; p0 < 9; p0 += chunk) {
      swa_seq_t s = {slot, chunk, p0 + chunk, 0};
      ASSERT_EQ(swa_plan_build(h.plan(), &s, 1), SWA_OK) << swa_last_error();
      std::vector<float> q(size_t(chunk) * 32, 0.0f), kv(size_t(chunk) * 32, 1.0f),
          out(size_t(chunk) * 32, -1.0f);
      swa_step_args_t a;
      swa_step_args_init(&a);
      a.q = q.data();
      a.k_new = kv.data();
      a.out = out.data();
      a.sinks = &sink;
      ASSERT_EQ(swa_step(h.cache(), h.plan(), &a), SWA_OK) << swa_last_error();
      for (int j = 0; j < chunk; ++j) {
        const double o = out[size_t(j) * 32];
        counts.push_back(int(std::lround(o * std::exp(double(sink)) / (1.0 - o))));
      }
    }
    EXPECT_EQ(counts, (std::vector<int>{1, 2, 3, 4, 4, 4, 4, 4, 4})) << "chunk " << chunk;
  }
}

long ResidentKiB() {
  std::ifstream f("/proc/self/status");
  std::string key;
  while (f >> key) {
    if (key == "VmRSS:") {
      long kib;
      f >> kib;
      return kib;
    }
  }
  return 0;
}

#if defined(__SANITIZE_ADDRESS__)
#define SWA_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SWA_TEST_ASAN 1
#endif
#endif
#ifdef SWA_TEST_ASAN
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif

// Memory is max_slots * slot_bytes whatever the sequence length: nothing the
// library keeps grows with the number of tokens.
TEST(StepMemory, CappedWhateverTheLength) {
  StepHarness h(16, 2, {{SWA_FORMAT_MXFP8, 8, 1, 64, true, false}}, 2, 3);
  uint32_t slot;
  ASSERT_EQ(swa_slot_alloc(h.cache(), &slot), SWA_OK);
  swa_cache_stats_t st0;
  st0.struct_size = sizeof st0;
  ASSERT_EQ(swa_cache_stats(h.cache(), &st0), SWA_OK);
  std::vector<float> q(3 * 8 * 64, 0.5f), kv(3 * 64, 0.25f), out(3 * 8 * 64);
  long rss_after_warmup = 0;
  // Under ASan the resident-memory check below is off and what is left (the
  // pool and the counters) holds after any number of steps: 3,000 tokens wrap
  // the 16-token window about 190 times; the plain trees take 30,000. 10,000
  // steps were 5 s per run of this binary in the ASan suite.
  const int32_t n_tokens = kAsan ? 3000 : 30000;
  for (int32_t p = 0; p < n_tokens; p += 3) {
    swa_seq_t s = {slot, 3, p + 3, 0};
    ASSERT_EQ(swa_plan_build(h.plan(), &s, 1), SWA_OK) << swa_last_error();
    swa_step_args_t a;
    swa_step_args_init(&a);
    a.q = q.data();
    a.k_new = kv.data();
    a.out = out.data();
    ASSERT_EQ(swa_step(h.cache(), h.plan(), &a), SWA_OK) << swa_last_error();
    if (p == 300) rss_after_warmup = ResidentKiB();
  }
  swa_cache_stats_t st;
  st.struct_size = sizeof st;
  ASSERT_EQ(swa_cache_stats(h.cache(), &st), SWA_OK);
  EXPECT_EQ(st.pool_bytes, st0.pool_bytes);
  swa_layout_t lay;
  lay.struct_size = sizeof lay;
  ASSERT_EQ(swa_cache_layout(h.cache(), &lay), SWA_OK);
  EXPECT_EQ(st.pool_bytes, uint64_t{lay.max_slots} * lay.slot_bytes);
  EXPECT_EQ(st.tokens, uint64_t(n_tokens));
  EXPECT_EQ(st.steps, uint64_t(n_tokens / 3));
#ifndef SWA_TEST_ASAN
  // (Under ASan freed memory waits in a quarantine, so resident memory grows
  // whatever the library does; the pool and counters above still hold.)
  EXPECT_LT(ResidentKiB() - rss_after_warmup, 1024) << "resident memory grew with the sequence";
#endif
}

}  // namespace
}  // namespace swa_test
