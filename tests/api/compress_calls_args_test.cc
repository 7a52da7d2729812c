// Argument checks of the compressor's plan exports and view
// (swa_plan_compress_windows, swa_plan_compress_store_segments,
// swa_cache_compress_view) and of swa_compress_step with another cache's
// plan: each bad call gets its status and a message naming the value, and
// writes nothing: the caller's output (poisoned), *count, the slot's bytes.
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "swacache.h"

namespace {

struct Rig {
  swa_layer_desc_t d[3];
  swa_cache_t* cache = nullptr;
  swa_plan_t* plan = nullptr;
  uint32_t slot = 0;

  Rig() {
    for (auto& l : d) {
      swa_layer_desc_init(&l);
      l.q_heads = 2;
      l.head_dim = 32;
      l.kv_format = SWA_FORMAT_FP32;
    }
    d[0].compress_kind = SWA_COMPRESS_CSA;  // with an indexer
    d[0].compress_ratio = 2;
    d[0].compress_head_dim = 4;
    d[0].index_head_dim = 2;
    d[1].compress_kind = SWA_COMPRESS_HCA;  // without one
    d[1].compress_ratio = 4;
    d[1].compress_head_dim = 8;
    // d[2]: no compressor.
    swa_config_t cfg;
    swa_config_init(&cfg);
    cfg.window = 4;
    cfg.draft_tokens = 1;
    cfg.max_slots = 2;
    cfg.backend = SWA_BACKEND_CPU;
    cfg.num_threads = 1;
    cfg.num_layers = 3;
    cfg.layers = d;
    EXPECT_EQ(swa_cache_create(&cfg, &cache), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_plan_create(cache, &plan), SWA_OK);
    EXPECT_EQ(swa_slot_alloc(cache, &slot), SWA_OK);
  }
  ~Rig() {
    swa_plan_destroy(plan);
    swa_cache_destroy(cache);
  }
  void Build(int n) {
    swa_seq_t seq{slot, n, n, 0};
    ASSERT_EQ(swa_plan_build(plan, &seq, 1), SWA_OK) << swa_last_error();
  }
};

bool Names(const char* what) { return std::strstr(swa_last_error(), what) != nullptr; }

// Both exports: an unbuilt plan, a bad layer, a NULL count, and a capacity one
// short of the plan's count; *count and the poisoned output stay as they were.
TEST(CompressCallsArgs, PlanExportsRefuseAndWriteNothing) {
  Rig r;
  swa_compress_window_t w[8];
  swa_segment_t s[8];
  size_t count = 77;
  std::memset(w, 0xA5, sizeof w);
  EXPECT_EQ(swa_plan_compress_windows(r.plan, 0, w, 8, &count), SWA_FAILED_PRECONDITION);
  EXPECT_TRUE(Names("not built")) << swa_last_error();
  EXPECT_EQ(swa_plan_compress_store_segments(r.plan, 0, s, 8, &count), SWA_FAILED_PRECONDITION);
  EXPECT_EQ(count, 77u);
  r.Build(7);  // CSA rate 2: entries 0 ... 2 close; HCA rate 4: entry 0
  size_t nw = 0, ns = 0;
  ASSERT_EQ(swa_plan_compress_windows(r.plan, 0, nullptr, 0, &nw), SWA_OK);
  ASSERT_EQ(swa_plan_compress_store_segments(r.plan, 0, nullptr, 0, &ns), SWA_OK);
  ASSERT_EQ(nw, 3u);
  ASSERT_GE(ns, 1u);
  std::vector<unsigned char> before(sizeof w);
  std::memcpy(before.data(), w, sizeof w);
  EXPECT_EQ(swa_plan_compress_windows(r.plan, 0, w, nw - 1, &count), SWA_OUT_OF_RANGE);
  EXPECT_TRUE(Names("capacity = 2")) << swa_last_error();
  EXPECT_EQ(swa_plan_compress_store_segments(r.plan, 0, s, ns - 1, &count), SWA_OUT_OF_RANGE);
  EXPECT_TRUE(Names("capacity")) << swa_last_error();
  EXPECT_EQ(swa_plan_compress_windows(r.plan, 3, w, 8, &count), SWA_OUT_OF_RANGE);
  EXPECT_TRUE(Names("layer = 3")) << swa_last_error();
  EXPECT_EQ(swa_plan_compress_windows(r.plan, 0xFFFFFFFFu, w, 8, &count), SWA_OUT_OF_RANGE);
  EXPECT_EQ(swa_plan_compress_store_segments(r.plan, 2, s, 8, &count), SWA_INVALID_ARGUMENT);
  EXPECT_TRUE(Names("layer 2 has no typed compressor")) << swa_last_error();
  EXPECT_EQ(swa_plan_compress_windows(r.plan, 0, w, 8, nullptr), SWA_INVALID_ARGUMENT);
  EXPECT_TRUE(Names("count")) << swa_last_error();
  EXPECT_EQ(swa_plan_compress_windows(nullptr, 0, w, 8, &count), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(count, 77u);
  EXPECT_EQ(std::memcmp(before.data(), w, sizeof w), 0);
  // The exact capacity works and writes the count.
  EXPECT_EQ(swa_plan_compress_windows(r.plan, 0, w, nw, &count), SWA_OK);
  EXPECT_EQ(count, nw);
  EXPECT_EQ(w[2].entry, 2);
  EXPECT_EQ(w[3].entry, static_cast<int32_t>(0xA5A5A5A5u));  // past the count: untouched
}

// swa_cache_compress_view: bad layer, compressor, struct_size or NULL; the
// caller's view stays as it was.
TEST(CompressCallsArgs, CompressViewRefusesAndWritesNothing) {
  Rig r;
  swa_tensor_view_t v;
  std::memset(&v, 0xA5, sizeof v);
  v.struct_size = sizeof v;
  swa_tensor_view_t before = v;
  struct Case {
    uint32_t layer, compressor;
    swa_status_t want;
    const char* named;
  };
  for (const Case& c : {Case{3, 0, SWA_OUT_OF_RANGE, "layer = 3"},
                        Case{2, 0, SWA_INVALID_ARGUMENT, "layer 2 has no typed compressor"},
                        Case{1, 1, SWA_INVALID_ARGUMENT, "no indexer compressor"},
                        Case{0, 2, SWA_INVALID_ARGUMENT, "compressor = 2"}}) {
    EXPECT_EQ(swa_cache_compress_view(r.cache, c.layer, c.compressor, &v), c.want) << c.named;
    EXPECT_TRUE(Names(c.named)) << swa_last_error();
    EXPECT_EQ(std::memcmp(&v, &before, sizeof v), 0) << c.named;
  }
  v.struct_size = sizeof v - 8;
  before = v;
  EXPECT_EQ(swa_cache_compress_view(r.cache, 0, 0, &v), SWA_INVALID_ARGUMENT);
  EXPECT_TRUE(Names("struct_size")) << swa_last_error();
  EXPECT_EQ(std::memcmp(&v, &before, sizeof v), 0);
  EXPECT_EQ(swa_cache_compress_view(r.cache, 0, 0, nullptr), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_cache_compress_view(nullptr, 0, 0, &v), SWA_INVALID_ARGUMENT);
  v.struct_size = sizeof v;
  ASSERT_EQ(swa_cache_compress_view(r.cache, 0, 1, &v), SWA_OK) << swa_last_error();
  EXPECT_EQ(v.shape[0], 2);
  EXPECT_EQ(v.shape[2], 2);
}

// A plan of another cache (same layout) is refused; neither cache's slot
// changes and the plan can still be cancelled.
TEST(CompressCallsArgs, StepWithAnotherCachesPlanIsRefused) {
  Rig a, b;
  a.Build(3);
  swa_layout_t lay{sizeof lay};
  ASSERT_EQ(swa_cache_layout(b.cache, &lay), SWA_OK);
  swa_tensor_view_t v{sizeof v};
  ASSERT_EQ(swa_cache_compress_view(b.cache, 0, 0, &v), SWA_OK);
  const auto* ring = static_cast<const uint8_t*>(v.data);
  const std::vector<uint8_t> before(ring, ring + v.strides[1] * v.shape[1]);
  std::vector<float> kv(3 * 8, 0.25f), gate(3 * 8, 0.5f), bias(2 * 8, 0.f), weight(4, 1.f),
      out(4 * 1, -7.f);
  swa_compress_args_t args;
  swa_compress_args_init(&args);
  args.kv = kv.data();
  args.gate = gate.data();
  args.row_width = 8;
  args.rows = 3;
  args.position_bias = bias.data();
  args.norm_weight = weight.data();
  args.out = out.data();
  args.out_rows = 4;
  EXPECT_EQ(swa_compress_step(b.cache, a.plan, &args), SWA_FAILED_PRECONDITION);
  EXPECT_TRUE(Names("another cache")) << swa_last_error();
  EXPECT_EQ(std::vector<uint8_t>(ring, ring + before.size()), before);
  for (float x : out) EXPECT_EQ(x, -7.f);
  EXPECT_EQ(swa_compress_step(nullptr, a.plan, &args), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_compress_step(a.cache, nullptr, &args), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_compress_step(a.cache, a.plan, nullptr), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_plan_cancel(a.plan), SWA_OK) << swa_last_error();
}

}  // namespace
