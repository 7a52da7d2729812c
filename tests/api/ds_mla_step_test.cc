// Steps on fp8_ds_mla rings (DeepSeek-V4's 584-byte record) through the public
// API: outputs against the FP64 reference of the values the ring holds, the
// quantization error against FP64 on the unquantized inputs (budget stated in
// docs/codec.md, "fp8_ds_mla"), MXFP8-528 measured beside it, a blob of
// another format refused by restore, and bad head dims refused by create.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "api/step_harness.h"
#include "gtest/gtest.h"
#include "swacache.h"

namespace swa_test {
namespace {

LayerCfg DsMla(bool shared, int kv_heads = 1, int q_heads = 8) {
  LayerCfg c{SWA_FORMAT_FP8_DS_MLA, q_heads, kv_heads, 512, shared, false};
  return c;
}

// Prefill chunks, then decode and multi-token steps past the window, for
// several sequences at once; FP32 outputs must match the FP64 reference of
// the decoded ring values to 1e-5 (relative L2) and the LSE to 1e-4.
TEST(DsMlaStep, MatchesTheFp64ReferenceOfTheStoredValues) {
  LayerCfg rope = DsMla(true, 1, 16);
  rope.rope_style = SWA_ROPE_NEOX;
  rope.rope_first = 448;
  rope.rope_dims = 64;
  rope.sinks = true;
  StepHarness h(24, 2, {DsMla(true), DsMla(false, 2, 4), rope}, 3, 17, /*all_stored=*/true);
  for (uint32_t want = 0; want < 2; ++want) {
    uint32_t slot = 99;
    ASSERT_EQ(swa_slot_alloc(h.cache(), &slot), SWA_OK) << swa_last_error();
    ASSERT_EQ(slot, want);
  }
  std::vector<int> len(2, 0);
  for (int step = 0; step < 12; ++step) {
    std::vector<StepSeq> seqs;
    for (uint32_t s = 0; s < 2; ++s) {
      const int q = step < 2 ? 13 : (step % 3 == 0 ? 3 : 1);
      seqs.push_back({s, q, len[s] + q, 0});
      len[s] += q;
    }
    const swa_dtype_t dt = step % 2 ? SWA_DTYPE_BF16 : SWA_DTYPE_FP32;
    ASSERT_TRUE(h.Step(seqs, dt, dt, SWA_DTYPE_FP32)) << "step " << step;
  }
  EXPECT_LE(h.max_error(), 1e-5);
}

// Relative L2 error of one prefill's outputs against FP64 attention over the
// unquantized inputs, for a shared-K/V layer of `format`.
double QuantizationError(swa_format_t format, uint64_t seed) {
  const int T = 96, Hq = 16, D = 512, W = 128;
  swa_layer_desc_t d;
  swa_layer_desc_init(&d);
  d.kv_format = format;
  d.q_heads = Hq;
  d.kv_heads = 1;
  d.head_dim = D;
  d.shared_kv = 1;
  swa_config_t c;
  swa_config_init(&c);
  c.window = W;
  c.max_slots = 1;
  c.backend = SWA_BACKEND_CPU;
  c.num_threads = 2;
  c.num_layers = 1;
  c.layers = &d;
  swa_cache_t* cache = nullptr;
  swa_plan_t* plan = nullptr;
  EXPECT_EQ(swa_cache_create(&c, &cache), SWA_OK) << swa_last_error();
  EXPECT_EQ(swa_plan_create(cache, &plan), SWA_OK) << swa_last_error();
  uint32_t slot = 0;
  EXPECT_EQ(swa_slot_alloc(cache, &slot), SWA_OK);
  // Latent-like vectors: NoPE dims N(0, 1) with a few larger channels, the
  // RoPE tail N(0, 2); queries N(0, 1).
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::vector<float> q(size_t(T) * Hq * D), kv(size_t(T) * D);
  for (float& x : q) x = n01(rng);
  for (int t = 0; t < T; ++t)
    for (int e = 0; e < D; ++e)
      kv[size_t(t) * D + e] = n01(rng) * (e >= 448 ? 2.0f : (e % 61 == 0 ? 6.0f : 1.0f));
  std::vector<float> out(q.size(), std::nanf(""));
  swa_seq_t seq{slot, T, T, 0};
  EXPECT_EQ(swa_plan_build(plan, &seq, 1), SWA_OK) << swa_last_error();
  swa_step_args_t a;
  swa_step_args_init(&a);
  a.q = q.data();
  a.q_dtype = SWA_DTYPE_FP32;
  a.k_new = kv.data();
  a.kv_dtype = SWA_DTYPE_FP32;
  a.out = out.data();
  a.out_dtype = SWA_DTYPE_FP32;
  EXPECT_EQ(swa_step(cache, plan, &a), SWA_OK) << swa_last_error();
  swa_plan_destroy(plan);
  swa_cache_destroy(cache);
  std::vector<double> ref(q.size());
  DenseShape s{Hq, 1, D, W, true, 1.0 / std::sqrt(double(D)), nullptr};
  for (int t = 0; t < T; ++t)
    DenseAttention(s, kv, kv, T, t, 0, q.data() + size_t(t) * Hq * D, ref.data() + size_t(t) * Hq * D);
  return RelativeL2(out.data(), ref.data(), out.size());
}

// The budget: the error of fp8_ds_mla on these inputs stays under 4% and
// within 10% of MXFP8-528's on the same inputs (measured: 3.1% against 3.6%;
// its RoPE tail is BF16, while a 64-value group's scale is coarser).
TEST(DsMlaStep, QuantizationErrorAgainstUnquantizedFp64) {
  double worst_ds = 0, worst_mx = 0;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const double ds = QuantizationError(SWA_FORMAT_FP8_DS_MLA, seed);
    const double mx = QuantizationError(SWA_FORMAT_MXFP8, seed);
    worst_ds = std::max(worst_ds, ds);
    worst_mx = std::max(worst_mx, mx);
    EXPECT_LE(ds, 0.04) << "seed " << seed;
    EXPECT_LE(ds, 1.1 * mx) << "seed " << seed;
  }
  std::printf("relative L2 vs unquantized FP64: fp8_ds_mla %.5f, mxfp8 %.5f\n", worst_ds, worst_mx);
  EXPECT_GT(worst_ds, 0.0);  // the format does quantize
}

// A store keyed by the engine key only (the library's fingerprint prefix
// stripped), so that a blob saved by one layout reaches a restore of another.
struct SharedBlobs {
  std::map<std::string, std::string> blobs;
};
std::string EngineKey(const uint8_t* key, size_t len) {
  std::string k(reinterpret_cast<const char*>(key), len);
  return k.substr(k.find(':') + 1);
}
swa_kv_store_t SharedStore(SharedBlobs* b) {
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  t.user_data = b;
  t.put = [](void* u, const uint8_t* key, size_t len, const swa_iov_t* iov, size_t n, char*,
             size_t) -> swa_status_t {
    std::string blob;
    for (size_t i = 0; i < n; ++i) blob.append(static_cast<const char*>(iov[i].data), iov[i].size);
    static_cast<SharedBlobs*>(u)->blobs[EngineKey(key, len)] = blob;
    return SWA_OK;
  };
  t.get = [](void* u, const uint8_t* key, size_t len, const swa_iov_t* iov, size_t n,
             uint64_t* size, char*, size_t) -> swa_status_t {
    auto& m = static_cast<SharedBlobs*>(u)->blobs;
    auto it = m.find(EngineKey(key, len));
    if (it == m.end()) return SWA_NOT_FOUND;
    if (*size != it->second.size()) {
      *size = it->second.size();
      return SWA_OK;
    }
    size_t off = 0;
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(iov[i].data, it->second.data() + off, iov[i].size);
      off += iov[i].size;
    }
    return SWA_OK;
  };
  return t;
}

swa_cache_t* Cache(swa_format_t format, uint32_t head_dim) {
  swa_layer_desc_t d;
  swa_layer_desc_init(&d);
  d.kv_format = format;
  d.q_heads = 8;
  d.kv_heads = 1;
  d.head_dim = head_dim;
  d.shared_kv = 1;
  swa_config_t c;
  swa_config_init(&c);
  c.window = 16;
  c.max_slots = 2;
  c.backend = SWA_BACKEND_CPU;
  c.num_layers = 1;
  c.layers = &d;
  swa_cache_t* cache = nullptr;
  return swa_cache_create(&c, &cache) == SWA_OK ? cache : nullptr;
}

TEST(DsMlaStore, ABlobOfAnotherFormatIsRefusedAndTheSlotKept) {
  SharedBlobs blobs;
  const uint8_t key[] = {'s', 'e', 'q'};
  // MXFP8 528 B and fp8_ds_mla 584 B rows: same shape, another format.
  for (auto [from, to] : {std::pair{SWA_FORMAT_MXFP8, SWA_FORMAT_FP8_DS_MLA},
                          {SWA_FORMAT_FP8_DS_MLA, SWA_FORMAT_MXFP8},
                          {SWA_FORMAT_FP8_DS_MLA, SWA_FORMAT_FP8_DS_MLA}}) {
    swa_cache_t* a = Cache(from, 512);
    swa_cache_t* b = Cache(to, 512);
    ASSERT_NE(a, nullptr) << swa_last_error();
    ASSERT_NE(b, nullptr) << swa_last_error();
    swa_kv_store_t ta = SharedStore(&blobs), tb = SharedStore(&blobs);
    ASSERT_EQ(swa_cache_set_store(a, &ta), SWA_OK);
    ASSERT_EQ(swa_cache_set_store(b, &tb), SWA_OK);
    uint32_t sa = 0, sb = 0;
    ASSERT_EQ(swa_slot_alloc(a, &sa), SWA_OK);
    ASSERT_EQ(swa_slot_alloc(b, &sb), SWA_OK);
    ASSERT_EQ(swa_slot_save(a, sa, key, sizeof key), SWA_OK) << swa_last_error();
    const swa_status_t st = swa_slot_restore(b, sb, key, sizeof key);
    if (from == to) {
      EXPECT_EQ(st, SWA_OK) << swa_last_error();
    } else {
      EXPECT_EQ(st, SWA_FAILED_PRECONDITION) << swa_last_error();
      // A smaller blob fails the fingerprint check, a larger one the size
      // check before it is read.
      const std::string msg = swa_last_error();
      EXPECT_TRUE(msg.find("fingerprint") != std::string::npos ||
                  msg.find("another layout") != std::string::npos)
          << msg;
    }
    swa_cache_destroy(a);
    swa_cache_destroy(b);
  }
}

TEST(DsMlaConfig, HeadDimsOtherThan512AreRefusedNamingThem) {
  for (uint32_t dim : {64u, 128u, 256u, 576u}) {
    EXPECT_EQ(Cache(SWA_FORMAT_FP8_DS_MLA, dim), nullptr);
    EXPECT_NE(std::string(swa_last_error()).find("head_dim = " + std::to_string(dim)),
              std::string::npos)
        << swa_last_error();
  }
  swa_cache_t* ok = Cache(SWA_FORMAT_FP8_DS_MLA, 512);
  ASSERT_NE(ok, nullptr) << swa_last_error();
  swa_layout_t lay;
  lay.struct_size = sizeof lay;
  ASSERT_EQ(swa_cache_layout(ok, &lay), SWA_OK);
  swa_cache_destroy(ok);
}

}  // namespace
}  // namespace swa_test
