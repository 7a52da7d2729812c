// Checkpoints (docs/semantics.md, "Checkpoints"): swa_slot_save_at and
// swa_slot_checkpoint_range through the public C API. A checkpoint saved at c
// while the sequence has gone on to written_end E (c < E, the ring wrapped),
// restored into another slot and continued, computes the same bits as a
// sequence that ran straight to c and continued, and ends with the same ring.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "swacache.h"
#include "test_random.h"

namespace {

constexpr uint32_t kW = 8;
constexpr uint32_t kN = 2;
constexpr uint32_t kR = 16;  // R - W + 1 = 9: a checkpoint may lag by up to 9
constexpr int32_t kMaxPos = 160;

struct Rig {
  swa_layer_desc_t d[3];
  swa_cache_t* cache = nullptr;
  swa_plan_t* plan = nullptr;
  // Inputs of every position, the same for every run: q, k, v per layer.
  std::vector<std::vector<float>> Q, K, V;

  Rig() {
    const swa_format_t formats[3] = {SWA_FORMAT_MXFP8, SWA_FORMAT_FP32, SWA_FORMAT_BF16};
    for (int l = 0; l < 3; ++l) {
      swa_layer_desc_init(&d[l]);
      d[l].q_heads = 4;
      d[l].kv_heads = l == 0 ? 1 : 2;
      d[l].head_dim = 32 * (l + 1);
      d[l].shared_kv = l == 0 ? 1 : 0;
      d[l].kv_format = formats[l];
      d[l].has_sinks = 0;
    }
    swa_config_t cfg;
    swa_config_init(&cfg);
    cfg.window = kW;
    cfg.draft_tokens = kN;
    cfg.ring_len = kR;
    cfg.max_slots = 4;
    cfg.backend = SWA_BACKEND_CPU;
    cfg.num_threads = 1;
    cfg.num_layers = 3;
    cfg.layers = d;
    EXPECT_EQ(swa_cache_create(&cfg, &cache), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_plan_create(cache, &plan), SWA_OK) << swa_last_error();
    std::mt19937 rng(20261203);
    swa_test::UniformReal<float> u(-3, 3);
    for (int l = 0; l < 3; ++l) {
      const size_t kv = size_t(kMaxPos) * d[l].kv_heads * d[l].head_dim;
      const size_t q = size_t(kMaxPos) * d[l].q_heads * d[l].head_dim;
      Q.emplace_back(q);
      K.emplace_back(kv);
      V.emplace_back(kv);
      for (float& x : Q[l]) x = u(rng);
      for (float& x : K[l]) x = u(rng);
      for (float& x : V[l]) x = u(rng);
    }
    swa_store_memory_config_t mc;
    swa_store_memory_config_init(&mc);
    swa_kv_store_t store;
    swa_kv_store_init(&store);
    EXPECT_EQ(swa_store_memory_create(&mc, &store), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_cache_set_store(cache, &store), SWA_OK) << swa_last_error();
  }
  ~Rig() {
    swa_plan_destroy(plan);
    swa_cache_destroy(cache);
  }

  // Runs positions q_start ... q_start + n - 1 of `slot` through every layer;
  // returns every layer's output (poisoned with NaN before the step).
  std::vector<float> Run(uint32_t slot, int32_t q_start, int32_t n) {
    std::vector<float> all;
    swa_seq_t s = {slot, n, q_start + n, 0};
    EXPECT_EQ(swa_plan_build(plan, &s, 1), SWA_OK) << swa_last_error();
    for (uint32_t l = 0; l < 3; ++l) {
      const size_t tok = size_t(d[l].kv_heads) * d[l].head_dim;
      const size_t qtok = size_t(d[l].q_heads) * d[l].head_dim;
      std::vector<float> out(size_t(n) * qtok, NAN);
      swa_step_args_t a;
      swa_step_args_init(&a);
      a.layer = l;
      a.q = Q[l].data() + size_t(q_start) * qtok;
      a.k_new = K[l].data() + size_t(q_start) * tok;
      a.v_new = d[l].shared_kv ? nullptr : V[l].data() + size_t(q_start) * tok;
      a.out = out.data();
      EXPECT_EQ(swa_step(cache, plan, &a), SWA_OK) << swa_last_error();
      for (float x : out) EXPECT_FALSE(std::isnan(x));
      all.insert(all.end(), out.begin(), out.end());
    }
    return all;
  }
  // Runs positions from..to-1 in chunks of `chunk` (the last one shorter).
  std::vector<float> RunTo(uint32_t slot, int32_t from, int32_t to, int32_t chunk) {
    std::vector<float> all;
    for (int32_t p = from; p < to; p += chunk) {
      std::vector<float> o = Run(slot, p, std::min(chunk, to - p));
      all.insert(all.end(), o.begin(), o.end());
    }
    return all;
  }
  // The ring row bytes of `slot` at position p of layer l.
  std::vector<uint8_t> Row(uint32_t slot, uint32_t l, int32_t p) const {
    swa_tensor_view_t v;
    v.struct_size = sizeof v;
    EXPECT_EQ(swa_cache_layer_view(cache, l, &v), SWA_OK);
    const auto* base = static_cast<const uint8_t*>(v.data) + slot * v.strides[0] +
                       (p % int64_t(v.shape[1])) * v.strides[1];
    return std::vector<uint8_t>(base, base + v.strides[1]);
  }
  std::vector<uint8_t> StoredRegion(uint32_t slot) const {
    swa_layout_t lay;
    lay.struct_size = sizeof lay;
    EXPECT_EQ(swa_cache_layout(cache, &lay), SWA_OK);
    swa_slot_info_t info;
    info.struct_size = sizeof info;
    EXPECT_EQ(swa_slot_info(cache, slot, &info), SWA_OK);
    swa_tensor_view_t v;
    v.struct_size = sizeof v;
    EXPECT_EQ(swa_cache_layer_view(cache, 0, &v), SWA_OK);
    // Layer 0's ring starts the pool (stored rings first, at offset 0).
    const auto* pool = static_cast<const uint8_t*>(v.data);
    return std::vector<uint8_t>(pool + info.byte_offset, pool + info.byte_offset + lay.stored_bytes);
  }
  swa_slot_info_t Info(uint32_t slot) const {
    swa_slot_info_t info;
    info.struct_size = sizeof info;
    EXPECT_EQ(swa_slot_info(cache, slot, &info), SWA_OK);
    return info;
  }
};

const uint8_t* Bytes(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

// For each c and each lag E - c in 0 ... R - W + 1 and two chunkings (ring-only
// steps and staged ones): the restored checkpoint equals the straight run.
TEST(Checkpoint, RestoredCheckpointContinuesLikeAStraightRun) {
  for (int32_t c : {5, 37, 64}) {
    for (int32_t lag : {0, 1, 4, int32_t(kR - kW + 1)}) {
      for (int32_t chunk : {3, 13}) {
        SCOPED_TRACE("c = " + std::to_string(c) + ", lag = " + std::to_string(lag) +
                     ", chunk = " + std::to_string(chunk));
        Rig rig;
        uint32_t A, S, B;
        ASSERT_EQ(swa_slot_alloc(rig.cache, &A), SWA_OK);
        ASSERT_EQ(swa_slot_alloc(rig.cache, &S), SWA_OK);
        ASSERT_EQ(swa_slot_alloc(rig.cache, &B), SWA_OK);
        // A runs past c, in chunks that do not end on c.
        const int32_t E = c + lag;
        rig.RunTo(A, 0, E, 7);
        int32_t lo = -1, hi = -1;
        ASSERT_EQ(swa_slot_checkpoint_range(rig.cache, A, &lo, &hi), SWA_OK) << swa_last_error();
        EXPECT_EQ(hi, E);
        // The rewind rule's bound: lo = max(0, E - (R - W + 1)) when the ring wrapped.
        const int32_t expect_lo = E - int32_t(kR) <= 0 ? 0 : E - int32_t(kR - kW + 1);
        EXPECT_EQ(lo, expect_lo);
        ASSERT_LE(lo, c);
        const std::string key = "ckpt-" + std::to_string(c);
        ASSERT_EQ(swa_slot_save_at(rig.cache, A, c, Bytes(key), key.size()), SWA_OK)
            << swa_last_error();
        // S runs straight to c.
        rig.RunTo(S, 0, c, 5);
        ASSERT_EQ(swa_slot_restore(rig.cache, B, Bytes(key), key.size()), SWA_OK)
            << swa_last_error();
        EXPECT_EQ(rig.Info(B).written_end, c);
        EXPECT_EQ(rig.Info(B).valid_start, 0);
        // The rows the checkpoint promises: positions max(0, E - R) ... c - 1.
        for (uint32_t l = 0; l < 3; ++l)
          for (int32_t p = std::max(0, E - int32_t(kR)); p < c; ++p)
            ASSERT_EQ(rig.Row(B, l, p), rig.Row(S, l, p)) << "layer " << l << " position " << p;
        // Both continue to F >= E + R with the same chunks: identical outputs.
        const int32_t F = E + int32_t(kR) + 11;
        const std::vector<float> out_s = rig.RunTo(S, c, F, chunk);
        const std::vector<float> out_b = rig.RunTo(B, c, F, chunk);
        ASSERT_EQ(out_s.size(), out_b.size());
        ASSERT_EQ(std::memcmp(out_s.data(), out_b.data(), out_s.size() * sizeof(float)), 0);
        EXPECT_EQ(rig.StoredRegion(B), rig.StoredRegion(S));
        EXPECT_EQ(rig.Info(B).written_end, F);
      }
    }
  }
}

// Outside the reachable range: OUT_OF_RANGE naming the range; the store holds
// nothing under the key and the slot (bytes, lengths) is unchanged. At the
// boundary lo it is accepted.
TEST(Checkpoint, OutOfReachIsRefusedAndChangesNothing) {
  Rig rig;
  uint32_t A;
  ASSERT_EQ(swa_slot_alloc(rig.cache, &A), SWA_OK);
  rig.RunTo(A, 0, 50, 6);
  int32_t lo = -1, hi = -1;
  ASSERT_EQ(swa_slot_checkpoint_range(rig.cache, A, &lo, &hi), SWA_OK);
  ASSERT_EQ(lo, 50 - int32_t(kR - kW + 1));
  ASSERT_EQ(hi, 50);
  const std::vector<uint8_t> before = rig.StoredRegion(A);
  const std::string range = std::to_string(lo) + " ... " + std::to_string(hi);
  for (int32_t bad : {lo - 1, 0, -1, hi + 1, 1 << 30}) {
    const std::string key = "bad" + std::to_string(bad);
    EXPECT_EQ(swa_slot_save_at(rig.cache, A, bad, Bytes(key), key.size()), SWA_OUT_OF_RANGE)
        << bad;
    EXPECT_NE(std::string(swa_last_error()).find(range), std::string::npos) << swa_last_error();
    uint32_t exists = 7;
    ASSERT_EQ(swa_cache_store_exists(rig.cache, Bytes(key), key.size(), &exists), SWA_OK);
    EXPECT_EQ(exists, 0u);
  }
  EXPECT_EQ(rig.StoredRegion(A), before);
  EXPECT_EQ(rig.Info(A).written_end, 50);
  // The boundary is accepted, and c = written_end is swa_slot_save().
  const std::string k_lo = "lo", k_hi = "hi", k_plain = "plain";
  EXPECT_EQ(swa_slot_save_at(rig.cache, A, lo, Bytes(k_lo), k_lo.size()), SWA_OK)
      << swa_last_error();
  EXPECT_EQ(swa_slot_save_at(rig.cache, A, hi, Bytes(k_hi), k_hi.size()), SWA_OK);
  EXPECT_EQ(swa_slot_save(rig.cache, A, Bytes(k_plain), k_plain.size()), SWA_OK);
  uint32_t B, C;
  ASSERT_EQ(swa_slot_alloc(rig.cache, &B), SWA_OK);
  ASSERT_EQ(swa_slot_alloc(rig.cache, &C), SWA_OK);
  ASSERT_EQ(swa_slot_restore(rig.cache, B, Bytes(k_hi), k_hi.size()), SWA_OK);
  ASSERT_EQ(swa_slot_restore(rig.cache, C, Bytes(k_plain), k_plain.size()), SWA_OK);
  EXPECT_EQ(rig.StoredRegion(B), rig.StoredRegion(C));
  // A restored boundary checkpoint can be continued (the rewind rule agrees)...
  ASSERT_EQ(swa_slot_restore(rig.cache, B, Bytes(k_lo), k_lo.size()), SWA_OK);
  EXPECT_EQ(rig.Info(B).written_end, lo);
  int32_t lo_b = -1, hi_b = -1;
  ASSERT_EQ(swa_slot_checkpoint_range(rig.cache, B, &lo_b, &hi_b), SWA_OK);
  EXPECT_EQ(lo_b, lo);  // the rows above lo still count as occupied
  EXPECT_EQ(hi_b, lo);
  swa_seq_t s = {B, 1, lo + 1, 0};
  EXPECT_EQ(swa_plan_build(rig.plan, &s, 1), SWA_OK) << swa_last_error();
  EXPECT_EQ(swa_plan_cancel(rig.plan), SWA_OK);
  // ... but not rewound one position further.
  s = {B, 1, lo, 0};
  EXPECT_NE(swa_plan_build(rig.plan, &s, 1), SWA_OK);
}

TEST(Checkpoint, ArgumentsAndSlotStates) {
  Rig rig;
  uint32_t A;
  ASSERT_EQ(swa_slot_alloc(rig.cache, &A), SWA_OK);
  const std::string key = "k";
  int32_t lo = -1, hi = -1;
  // A fresh slot: only c = 0.
  ASSERT_EQ(swa_slot_checkpoint_range(rig.cache, A, &lo, &hi), SWA_OK);
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, 0);
  EXPECT_EQ(swa_slot_save_at(rig.cache, A, 0, Bytes(key), key.size()), SWA_OK);
  EXPECT_EQ(swa_slot_save_at(nullptr, A, 0, Bytes(key), key.size()), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_slot_save_at(rig.cache, A, 0, nullptr, 1), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_slot_save_at(rig.cache, A, 0, Bytes(key), 0), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_slot_save_at(rig.cache, 99, 0, Bytes(key), key.size()), SWA_OUT_OF_RANGE);
  EXPECT_EQ(swa_slot_save_at(rig.cache, 3, 0, Bytes(key), key.size()),
            SWA_FAILED_PRECONDITION);  // not allocated
  EXPECT_EQ(swa_slot_checkpoint_range(nullptr, A, &lo, &hi), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_slot_checkpoint_range(rig.cache, 99, &lo, &hi), SWA_OUT_OF_RANGE);
  EXPECT_EQ(swa_slot_checkpoint_range(rig.cache, 3, &lo, &hi), SWA_FAILED_PRECONDITION);
  // valid_start raised past written_end (a slot prepared for replay): nothing
  // to save, lo > hi, and every c is refused.
  ASSERT_EQ(swa_slot_begin_replay(rig.cache, A, 40, nullptr, nullptr), SWA_OK);
  ASSERT_EQ(swa_slot_set_valid_start(rig.cache, A, 35), SWA_OK);
  ASSERT_EQ(swa_slot_checkpoint_range(rig.cache, A, &lo, &hi), SWA_OK);
  EXPECT_GT(lo, hi);
  EXPECT_EQ(swa_slot_save_at(rig.cache, A, hi, Bytes(key), key.size()), SWA_OUT_OF_RANGE);
  // valid_start bounds lo from below.
  uint32_t B;
  ASSERT_EQ(swa_slot_alloc(rig.cache, &B), SWA_OK);
  ASSERT_EQ(swa_slot_begin_replay(rig.cache, B, 40, nullptr, nullptr), SWA_OK);  // v = E = 32
  rig.RunTo(B, 32, 40, 8);
  ASSERT_EQ(swa_slot_checkpoint_range(rig.cache, B, &lo, &hi), SWA_OK);
  EXPECT_EQ(lo, 32);
  EXPECT_EQ(hi, 40);
  EXPECT_EQ(swa_slot_save_at(rig.cache, B, 31, Bytes(key), key.size()), SWA_OUT_OF_RANGE);
  EXPECT_EQ(swa_slot_save_at(rig.cache, B, 32, Bytes(key), key.size()), SWA_OK);
}

}  // namespace
