// swa_compress_step's argument checks (include/swacache.h): each bad request
// gets its status and a message naming the value, and writes nothing: the
// slot's bytes (compressor rings included), the output buffer and the plan's
// cancellability are as before. A good call after them works.
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "api/test_util.h"
#include "swacache.h"

namespace {

struct Rig {
  swa_layer_desc_t d[3];
  swa_cache_t* cache = nullptr;
  swa_plan_t* plan = nullptr;
  uint8_t* pool = nullptr;
  swa_layout_t lay{sizeof(swa_layout_t)};
  uint32_t slot = 0;
  std::vector<float> kv, gate, bias, weight, out;
  swa_compress_args_t a;

  Rig() {
    for (auto& l : d) {
      swa_layer_desc_init(&l);
      l.q_heads = 2;
      l.head_dim = 32;
      l.kv_format = SWA_FORMAT_FP32;
    }
    d[0].compress_kind = SWA_COMPRESS_CSA;
    d[0].compress_ratio = 2;
    d[0].compress_head_dim = 4;
    d[0].index_head_dim = 2;
    d[1].compress_ratio = 2;  // opaque
    d[1].compress_entry_bytes = 16;
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
    EXPECT_EQ(swa_cache_layout(cache, &lay), SWA_OK);
    pool = swa_test::PoolBase(cache);
    EXPECT_NE(pool, nullptr) << swa_last_error();
    EXPECT_EQ(swa_slot_alloc(cache, &slot), SWA_OK);
    std::memset(pool, 0x3c, lay.pool_bytes);
    swa_seq_t seq{slot, 5, 5, 0};  // closes entries 0 and 1 (rate 2)
    EXPECT_EQ(swa_plan_build(plan, &seq, 1), SWA_OK) << swa_last_error();
    kv.assign(5 * 8, 0.25f);
    gate.assign(5 * 8, 0.5f);
    bias.assign(2 * 8, 0.0f);
    weight.assign(4, 1.0f);
    out.assign(2 * 4, -7.0f);
    swa_compress_args_init(&a);
    a.kv = kv.data();
    a.gate = gate.data();
    a.row_width = 8;
    a.rows = 5;
    a.position_bias = bias.data();
    a.norm_weight = weight.data();
    a.out = out.data();
    a.out_rows = 2;
  }
  ~Rig() {
    swa_plan_destroy(plan);
    swa_cache_destroy(cache);
  }
  std::vector<uint8_t> Pool() const { return {pool, pool + lay.pool_bytes}; }
};

TEST(CompressStepArgs, EachBadRequestIsRefusedAndWritesNothing) {
  Rig r;
  const std::vector<uint8_t> pool = r.Pool();
  const std::vector<float> out = r.out;
  struct Case {
    const char* what;
    void (*edit)(Rig&);
    swa_status_t want;
    const char* named;
  };
  const Case cases[] = {
      {"row width of HCA rows", [](Rig& r) { r.a.row_width = 4; }, SWA_INVALID_ARGUMENT, "row_width = 4"},
      {"indexer width on the main", [](Rig& r) { r.a.row_width = 4; r.a.compressor = 0; },
       SWA_INVALID_ARGUMENT, "row_width"},
      {"main width on the indexer", [](Rig& r) { r.a.compressor = 1; }, SWA_INVALID_ARGUMENT, "row_width = 8"},
      {"rows", [](Rig& r) { r.a.rows = 4; }, SWA_INVALID_ARGUMENT, "rows = 4"},
      {"kv NULL", [](Rig& r) { r.a.kv = nullptr; }, SWA_INVALID_ARGUMENT, "kv"},
      {"gate NULL", [](Rig& r) { r.a.gate = nullptr; }, SWA_INVALID_ARGUMENT, "gate"},
      {"bias NULL", [](Rig& r) { r.a.position_bias = nullptr; }, SWA_INVALID_ARGUMENT, "position_bias"},
      {"weight NULL", [](Rig& r) { r.a.norm_weight = nullptr; }, SWA_INVALID_ARGUMENT, "norm_weight"},
      {"out NULL", [](Rig& r) { r.a.out = nullptr; }, SWA_INVALID_ARGUMENT, "out"},
      {"out rows", [](Rig& r) { r.a.out_rows = 1; }, SWA_INVALID_ARGUMENT, "out_rows = 1"},
      {"eps 0", [](Rig& r) { r.a.norm_eps = 0; }, SWA_INVALID_ARGUMENT, "norm_eps"},
      {"eps NaN", [](Rig& r) { r.a.norm_eps = __builtin_nanf(""); }, SWA_INVALID_ARGUMENT, "norm_eps"},
      {"dtype", [](Rig& r) { r.a.dtype = static_cast<swa_dtype_t>(9); }, SWA_INVALID_ARGUMENT, "dtype"},
      {"no compressor", [](Rig& r) { r.a.layer = 2; }, SWA_INVALID_ARGUMENT, "layer 2 has no typed"},
      {"opaque", [](Rig& r) { r.a.layer = 1; }, SWA_INVALID_ARGUMENT, "opaque"},
      {"compressor 2", [](Rig& r) { r.a.compressor = 2; }, SWA_INVALID_ARGUMENT, "compressor = 2"},
      {"layer id", [](Rig& r) { r.a.layer = 3; }, SWA_OUT_OF_RANGE, "layer = 3"},
      {"struct size", [](Rig& r) { r.a.struct_size = 12; }, SWA_INVALID_ARGUMENT, "12"},
  };
  for (const Case& c : cases) {
    Rig& rr = r;
    const swa_compress_args_t saved = rr.a;
    c.edit(rr);
    EXPECT_EQ(swa_compress_step(rr.cache, rr.plan, &rr.a), c.want) << c.what;
    const std::string msg = swa_last_error();
    EXPECT_NE(msg.find(c.named), std::string::npos) << c.what << ": " << msg;
    EXPECT_TRUE(rr.Pool() == pool) << c.what;
    EXPECT_TRUE(rr.out == out) << c.what;
    rr.a = saved;
  }
  // Nothing ran: the plan can still be cancelled. Built again, a good call works.
  EXPECT_EQ(swa_plan_cancel(r.plan), SWA_OK) << swa_last_error();
  EXPECT_EQ(swa_compress_step(r.cache, r.plan, &r.a), SWA_FAILED_PRECONDITION);
  swa_seq_t seq{r.slot, 5, 5, 0};
  ASSERT_EQ(swa_plan_build(r.plan, &seq, 1), SWA_OK);
  EXPECT_EQ(swa_compress_step(r.cache, r.plan, &r.a), SWA_OK) << swa_last_error();
  EXPECT_FALSE(r.Pool() == pool);  // the rows were stored
  for (float v : r.out) EXPECT_NE(v, -7.0f);
  EXPECT_EQ(swa_plan_cancel(r.plan), SWA_FAILED_PRECONDITION);  // executed
}

// A compressor runs once per build: its store overwrites ring rows that its
// windows read, so a second run of the same (layer, compressor) would pool the
// step's own new rows in place of the older ones and return OK. It is refused
// (FAILED_PRECONDITION naming the layer and compressor) and writes nothing; the
// layer's other compressor still runs, and a new build runs both again.
TEST(CompressStepArgs, ASecondRunOfACompressorIsRefused) {
  Rig r;
  ASSERT_EQ(swa_compress_step(r.cache, r.plan, &r.a), SWA_OK) << swa_last_error();
  // Positions 5 ... 9: entry 2 (window 2 ... 5) reads rows 2, 3, 4 of the ring
  // (L = 2c + N = 5), which the store then fills with positions 7, 8, 9.
  swa_seq_t seq{r.slot, 5, 10, 0};
  ASSERT_EQ(swa_plan_build(r.plan, &seq, 1), SWA_OK) << swa_last_error();
  for (size_t i = 0; i < r.kv.size(); ++i) {
    r.kv[i] = 0.1f * static_cast<float>(i % 13) - 0.4f;
    r.gate[i] = 0.05f * static_cast<float>(i % 7);
  }
  r.out.assign(3 * 4, -7.0f);
  r.a.out = r.out.data();
  r.a.out_rows = 3;
  ASSERT_EQ(swa_compress_step(r.cache, r.plan, &r.a), SWA_OK) << swa_last_error();
  const std::vector<uint8_t> pool = r.Pool();
  const std::vector<float> out = r.out;
  EXPECT_EQ(swa_compress_step(r.cache, r.plan, &r.a), SWA_FAILED_PRECONDITION);
  const std::string msg = swa_last_error();
  EXPECT_NE(msg.find("layer 0's compressor 0 already ran"), std::string::npos) << msg;
  EXPECT_TRUE(r.Pool() == pool);
  EXPECT_TRUE(r.out == out);
  // The indexer (compressor 1, rows of 2 * 2 values) has not run yet.
  std::vector<float> iout(3 * 2, -7.0f);
  swa_compress_args_t ia = r.a;
  ia.compressor = 1;
  ia.row_width = 4;
  ia.norm_weight = r.weight.data();
  ia.out = iout.data();
  EXPECT_EQ(swa_compress_step(r.cache, r.plan, &ia), SWA_OK) << swa_last_error();
  EXPECT_EQ(swa_compress_step(r.cache, r.plan, &ia), SWA_FAILED_PRECONDITION);
  // A new build: both run again.
  swa_seq_t next{r.slot, 1, 11, 0};
  ASSERT_EQ(swa_plan_build(r.plan, &next, 1), SWA_OK) << swa_last_error();
  r.a.rows = ia.rows = 1;
  r.a.out_rows = ia.out_rows = 1;
  EXPECT_EQ(swa_compress_step(r.cache, r.plan, &r.a), SWA_OK) << swa_last_error();
  EXPECT_EQ(swa_compress_step(r.cache, r.plan, &ia), SWA_OK) << swa_last_error();
}

}  // namespace
