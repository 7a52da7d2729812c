// Checkpoints (docs/semantics.md, "Checkpoints") along random sequences with
// rejected drafts, ring wraps, swa_slot_begin_replay, raised valid_start and the compression
// section on and off, through the public C API: at every point
//  - every c in swa_slot_checkpoint_range()'s lo ... hi passes the planner's
//    rewind rule (a step at q_start = c builds) and swa_slot_save_at()
//    accepts it; c = lo - 1 and hi + 1 are refused with OUT_OF_RANGE naming
//    the range, the slot and the store unchanged; and, with the section on,
//    save_at accepts no c outside lo ... hi either;
//  - a checkpoint at c restored into a fresh slot continues bit for bit like a
//    slot that ran straight to c with the accepted rows only (attention
//    outputs of every layer, compressor entries), and after the continuation
//    the two slots are byte for byte equal.
// Rows differ between a draft and an accepted token of the same position, so
// a rejected draft left where the checkpoint counts on a row shows up.
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "api/test_util.h"
#include "swacache.h"

namespace {

constexpr uint32_t kW = 4;
constexpr uint32_t kN = 2;
constexpr uint32_t kD = 8;      // compressor entry width (main); indexer 4
constexpr uint32_t kHd = 32;    // attention head_dim
constexpr uint32_t kQh = 2;     // q heads; one kv head
// HCA, CSA + indexer, no compressor; a fourth, dropped HCA (rate 2) optional.
constexpr uint32_t kMaxLayers = 4;

struct MapStore {
  std::map<std::string, std::vector<uint8_t>> blobs;
  static swa_status_t Put(void* u, const uint8_t* k, size_t kl, const swa_iov_t* iov, size_t n,
                          char*, size_t) {
    std::vector<uint8_t> b;
    for (size_t i = 0; i < n; ++i) {
      const auto* p = static_cast<const uint8_t*>(iov[i].data);
      b.insert(b.end(), p, p + iov[i].size);
    }
    static_cast<MapStore*>(u)->blobs[std::string(reinterpret_cast<const char*>(k), kl)] = b;
    return SWA_OK;
  }
  static swa_status_t Get(void* u, const uint8_t* k, size_t kl, const swa_iov_t* iov, size_t n,
                          uint64_t* size, char*, size_t) {
    auto* s = static_cast<MapStore*>(u);
    auto it = s->blobs.find(std::string(reinterpret_cast<const char*>(k), kl));
    if (it == s->blobs.end()) return SWA_NOT_FOUND;
    if (it->second.size() != *size) {
      *size = it->second.size();
      return SWA_OK;
    }
    size_t at = 0;
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(iov[i].data, it->second.data() + at, iov[i].size);
      at += iov[i].size;
    }
    return SWA_OK;
  }
};

// The value of feature i of a row at position p; drafts differ.
float Val(int p, uint32_t layer, uint32_t what, uint32_t i, bool draft) {
  const float x = (draft ? 1.7f : 0.37f) * p + 0.11f * i + layer + 3.0f * what;
  return what % 2 ? 1.5f * std::sin(x) : std::cos(1.3f * x);
}

// One step: positions q ... q + n - 1, the last `drafts` of them drafts.
struct Op {
  int n;
  int drafts;
};

struct Rig {
  swa_layer_desc_t d[kMaxLayers];
  uint32_t n_layers;
  swa_cache_t* cache = nullptr;
  swa_plan_t* plan = nullptr;
  MapStore store;
  uint8_t* pool = nullptr;
  swa_layout_t lay{sizeof(swa_layout_t)};
  bool compression;
  // (layer, compressor, entry) -> values; attention outputs appended in order.
  using Entries = std::map<std::tuple<uint32_t, uint32_t, int32_t>, std::vector<float>>;

  Rig(bool save_compression, uint32_t ring_len, bool dropped = false, uint32_t dropped_rate = 2)
      : n_layers(dropped ? 4 : 3), compression(save_compression) {
    for (auto& l : d) {
      swa_layer_desc_init(&l);
      l.q_heads = kQh;
      l.kv_heads = 1;
      l.shared_kv = 0;
      l.head_dim = kHd;
      l.kv_format = SWA_FORMAT_BF16;
      l.rope_theta = 160000.0f;
    }
    for (int i = 0; i < 2; ++i) {
      d[i].compress_ratio = 4;
      d[i].compress_head_dim = kD;
      d[i].compress_rope_dims = 4;
    }
    d[0].compress_kind = SWA_COMPRESS_HCA;
    d[1].compress_kind = SWA_COMPRESS_CSA;
    d[1].index_head_dim = 4;
    d[3].compress_ratio = dropped_rate;
    d[3].compress_head_dim = kD;
    d[3].compress_kind = SWA_COMPRESS_HCA;
    d[3].role = SWA_LAYER_DROPPED;
    swa_config_t cfg;
    swa_config_init(&cfg);
    cfg.window = kW;
    cfg.draft_tokens = kN;
    cfg.ring_len = ring_len;
    cfg.max_slots = 4;
    cfg.backend = SWA_BACKEND_CPU;
    cfg.num_threads = 1;
    cfg.num_layers = n_layers;
    cfg.layers = d;
    EXPECT_EQ(swa_cache_create(&cfg, &cache), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_plan_create(cache, &plan), SWA_OK);
    EXPECT_EQ(swa_cache_set_save_compression(cache, save_compression ? 1 : 0), SWA_OK);
    swa_kv_store_t s;
    swa_kv_store_init(&s);
    s.user_data = &store;
    s.put = MapStore::Put;
    s.get = MapStore::Get;
    EXPECT_EQ(swa_cache_set_store(cache, &s), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_cache_layout(cache, &lay), SWA_OK);
    pool = swa_test::PoolBase(cache);
    EXPECT_NE(pool, nullptr) << swa_last_error();
  }
  ~Rig() {
    swa_plan_destroy(plan);
    swa_cache_destroy(cache);
  }

  swa_slot_info_t Info(uint32_t slot) const {
    swa_slot_info_t info{sizeof info};
    EXPECT_EQ(swa_slot_info(cache, slot, &info), SWA_OK);
    return info;
  }
  // The slot's bytes and lengths.
  std::vector<uint8_t> Image(uint32_t slot) const {
    std::vector<uint8_t> b(pool + slot * lay.slot_bytes, pool + (slot + 1) * lay.slot_bytes);
    const swa_slot_info_t info = Info(slot);
    for (int32_t v : {info.written_end, info.valid_start})
      b.insert(b.end(), reinterpret_cast<const uint8_t*>(&v),
               reinterpret_cast<const uint8_t*>(&v) + 4);
    return b;
  }

  // Runs one step at q of every layer's attention and compressors; appends
  // the attention outputs to *out and records the closing entries in *e.
  void Step(uint32_t slot, int q, Op op, std::vector<float>* out, Entries* e) {
    const int n = op.n;
    swa_seq_t seq{slot, n, q + n, 0};
    ASSERT_EQ(swa_plan_build(plan, &seq, 1), SWA_OK)
        << "slot " << slot << " q " << q << " n " << n << ": " << swa_last_error();
    for (uint32_t layer = 0; layer < n_layers; ++layer) {
      std::vector<float> qv(size_t(n) * kQh * kHd), k(size_t(n) * kHd), v(size_t(n) * kHd);
      std::vector<float> o(size_t(n) * kQh * kHd, NAN);
      for (int t = 0; t < n; ++t) {
        const bool draft = t >= n - op.drafts;
        for (uint32_t i = 0; i < kQh * kHd; ++i) qv[t * kQh * kHd + i] = Val(q + t, layer, 10, i, draft);
        for (uint32_t i = 0; i < kHd; ++i) {
          k[t * kHd + i] = Val(q + t, layer, 11, i, draft);
          v[t * kHd + i] = Val(q + t, layer, 12, i, draft);
        }
      }
      swa_step_args_t a;
      swa_step_args_init(&a);
      a.layer = layer;
      a.q = qv.data();
      a.k_new = k.data();
      a.v_new = v.data();
      a.out = o.data();
      ASSERT_EQ(swa_step(cache, plan, &a), SWA_OK) << swa_last_error();
      out->insert(out->end(), o.begin(), o.end());
      if (layer == 2) continue;
      size_t nw = 0;
      ASSERT_EQ(swa_plan_compress_windows(plan, layer, nullptr, 0, &nw), SWA_OK);
      std::vector<swa_compress_window_t> w(nw);
      if (nw) ASSERT_EQ(swa_plan_compress_windows(plan, layer, w.data(), nw, &nw), SWA_OK);
      for (uint32_t comp = 0; comp < (layer == 1 ? 2u : 1u); ++comp) {
        const uint32_t dim = comp == 0 ? kD : 4;
        const uint32_t s = layer == 1 ? 2 * dim : dim;
        std::vector<float> kv(n * s), gate(n * s), bias(4 * s), weight(dim), res(nw * dim + 1);
        for (int t = 0; t < n; ++t)
          for (uint32_t i = 0; i < s; ++i) {
            const bool draft = t >= n - op.drafts;
            kv[t * s + i] = Val(q + t, layer, 2 * comp, i, draft);
            gate[t * s + i] = Val(q + t, layer, 2 * comp + 1, i, draft);
          }
        for (uint32_t i = 0; i < bias.size(); ++i) bias[i] = 0.1f * std::sin(1.0f * i);
        for (uint32_t i = 0; i < dim; ++i) weight[i] = 1.0f + 0.05f * i;
        swa_compress_args_t a;
        swa_compress_args_init(&a);
        a.layer = layer;
        a.compressor = comp;
        a.kv = kv.data();
        a.gate = gate.data();
        a.row_width = s;
        a.rows = n;
        a.position_bias = bias.data();
        a.norm_weight = weight.data();
        a.out = res.data();
        a.out_rows = nw;
        ASSERT_EQ(swa_compress_step(cache, plan, &a), SWA_OK) << swa_last_error();
        for (size_t j = 0; j < nw; ++j)
          (*e)[{layer, comp, w[j].entry}] =
              std::vector<float>(res.begin() + j * dim, res.begin() + (j + 1) * dim);
      }
    }
  }

  // Runs `ops` from q; a step with drafts is followed by a step that rejects
  // them all (it starts at its end minus its drafts). Returns the end.
  int Run(uint32_t slot, int q, const std::vector<Op>& ops, std::vector<float>* out, Entries* e) {
    for (const Op& op : ops) {
      Step(slot, q, op, out, e);
      if (::testing::Test::HasFatalFailure()) return q;
      q += op.n - op.drafts;
    }
    return q;
  }
};

std::vector<Op> RandomOps(std::mt19937& rng, int count) {
  std::vector<Op> ops;
  for (int i = 0; i < count; ++i) {
    if (rng() % 3 == 0)
      ops.push_back({1 + int(kN), int(1 + rng() % kN)});  // a decode with drafts, rejected
    else
      ops.push_back({int(1 + rng() % 9), 0});  // a chunk, accepted
  }
  return ops;
}

const uint8_t* B(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

// A step at q_start = c with one token builds (the rewind rules pass).
bool Plannable(Rig& r, uint32_t slot, int32_t c) {
  swa_seq_t s{slot, 1, c + 1, 0};
  if (swa_plan_build(r.plan, &s, 1) != SWA_OK) return false;
  EXPECT_EQ(swa_plan_cancel(r.plan), SWA_OK) << swa_last_error();
  return true;
}

// The range's properties at the slot's current point.
void CheckRange(Rig& r, uint32_t a, const std::string& where) {
  SCOPED_TRACE(where);
  int32_t lo = -9, hi = -9;
  ASSERT_EQ(swa_slot_checkpoint_range(r.cache, a, &lo, &hi), SWA_OK) << swa_last_error();
  const swa_slot_info_t info = r.Info(a);
  EXPECT_EQ(hi, info.written_end);
  for (int32_t c = lo; c <= hi; ++c)
    EXPECT_TRUE(Plannable(r, a, c)) << "c = " << c << " in " << lo << " ... " << hi << ": "
                                    << swa_last_error();
  if (lo - 1 >= std::max(0, info.valid_start))
    EXPECT_FALSE(Plannable(r, a, lo - 1)) << "lo - 1 = " << lo - 1 << " plans";
  const std::vector<uint8_t> before = r.Image(a);
  const size_t blobs = r.store.blobs.size();
  const std::string range = std::to_string(lo) + " ... " + std::to_string(hi);
  // Every c outside lo ... hi (down to 0, and just above hi) is refused.
  for (int32_t c = 0; c <= hi + 1; ++c) {
    if (c >= lo && c <= hi) continue;
    const swa_status_t st = swa_slot_save_at(r.cache, a, c, B("out"), 3);
    EXPECT_EQ(st, SWA_OUT_OF_RANGE) << "c = " << c << " outside " << range;
    if (st == SWA_OUT_OF_RANGE && lo <= hi && (c == lo - 1 || c == hi + 1))
      EXPECT_NE(std::string(swa_last_error()).find(range), std::string::npos) << swa_last_error();
  }
  EXPECT_EQ(r.store.blobs.size(), blobs);
  EXPECT_EQ(r.Image(a), before);
  for (int32_t c : {lo, hi}) {
    if (c > hi || c < lo) continue;
    EXPECT_EQ(swa_slot_save_at(r.cache, a, c, B("edge"), 4), SWA_OK) << "c = " << c << ": "
                                                                    << swa_last_error();
  }
  r.store.blobs.erase("edge");
  EXPECT_EQ(r.Image(a), before);
}

struct WalkCase {
  bool compression;
  uint32_t ring_len;
  int replay;  // > 0: swa_slot_begin_replay(hit_len = replay) first
};

class CheckpointWalk : public ::testing::TestWithParam<WalkCase> {};

TEST_P(CheckpointWalk, RangeAndRestoredContinuation) {
  const WalkCase wc = GetParam();
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed * 7919 + wc.ring_len);
    Rig r(wc.compression, wc.ring_len);
    uint32_t a;
    ASSERT_EQ(swa_slot_alloc(r.cache, &a), SWA_OK);
    int start = 0;
    if (wc.replay > 0) {
      int32_t rs = -1, rl = -1;
      ASSERT_EQ(swa_slot_begin_replay(r.cache, a, wc.replay, &rs, &rl), SWA_OK);
      start = rs;
    }
    std::vector<float> out;
    Rig::Entries e;
    int q = start;
    CheckRange(r, a, "fresh");
    for (int i = 0; i < 8 && !HasFatalFailure(); ++i) {
      const std::vector<Op> ops = RandomOps(rng, 1);
      r.Step(a, q, ops[0], &out, &e);
      q += ops[0].n;  // the drafts are still in written_end
      CheckRange(r, a, "after step " + std::to_string(i) + " to " + std::to_string(q));
      q -= ops[0].drafts;  // the next step rejects them
      const int32_t cur = r.Info(a).valid_start;
      if (rng() % 4 == 0 && q > cur) {  // valid_start raised, at most to the next q_start
        const int32_t v = cur + 1 + int32_t(rng() % uint32_t(q - cur));
        ASSERT_EQ(swa_slot_set_valid_start(r.cache, a, v), SWA_OK) << swa_last_error();
        CheckRange(r, a, "after valid_start = " + std::to_string(v));
      }
    }
    if (HasFatalFailure()) return;
    // A checkpoint at a random c of the range (the slot still holds rejected drafts).
    int32_t lo = 0, hi = 0;
    ASSERT_EQ(swa_slot_checkpoint_range(r.cache, a, &lo, &hi), SWA_OK);
    // Positions q ... hi - 1 are the last step's rejected drafts.
    const int32_t top = std::min<int32_t>(hi, q);
    if (lo > top) continue;
    const int32_t c = lo + int32_t(rng() % uint32_t(top - lo + 1));
    SCOPED_TRACE("c = " + std::to_string(c) + " of " + std::to_string(lo) + " ... " +
                 std::to_string(hi));
    ASSERT_EQ(swa_slot_save_at(r.cache, a, c, B("ckpt"), 4), SWA_OK) << swa_last_error();
    uint32_t b, s;
    ASSERT_EQ(swa_slot_alloc(r.cache, &b), SWA_OK);
    ASSERT_EQ(swa_slot_alloc(r.cache, &s), SWA_OK);
    ASSERT_EQ(swa_slot_restore(r.cache, b, B("ckpt"), 4), SWA_OK) << swa_last_error();
    EXPECT_EQ(r.Info(b).written_end, c);
    // s: straight to c with accepted rows only.
    std::vector<float> scratch;
    Rig::Entries se;
    if (wc.replay > 0) ASSERT_EQ(swa_slot_begin_replay(r.cache, s, wc.replay, nullptr, nullptr), SWA_OK);
    for (int p = start; p < c;) {
      const int n = std::min<int>(1 + rng() % 9, c - p);
      r.Step(s, p, {n, 0}, &scratch, &se);
      ASSERT_FALSE(HasFatalFailure());
      p += n;
    }
    const int32_t vb = r.Info(b).valid_start;
    if (vb > r.Info(s).valid_start)
      ASSERT_EQ(swa_slot_set_valid_start(r.cache, s, vb), SWA_OK) << swa_last_error();
    // Both continue the same way, past a full turn of every ring.
    const std::vector<Op> cont = RandomOps(rng, 14);
    std::vector<float> out_b, out_s;
    Rig::Entries eb, es;
    const int end_b = r.Run(b, c, cont, &out_b, &eb);
    ASSERT_FALSE(HasFatalFailure());
    const int end_s = r.Run(s, c, cont, &out_s, &es);
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_EQ(end_b, end_s);
    ASSERT_EQ(out_b.size(), out_s.size());
    // Without the section the restored slot's compressor rings are not the
    // sequence's: only the attention layers without a compressor compare
    // then, and the SWA rings.
    if (wc.compression) {
      EXPECT_EQ(std::memcmp(out_b.data(), out_s.data(), out_b.size() * sizeof(float)), 0)
          << "attention outputs differ";
      EXPECT_TRUE(eb == es) << "compressor entries differ";
      if (end_b >= std::max(hi, c) + 24) EXPECT_EQ(r.Image(b), r.Image(s)) << "slots differ";
    } else {
      EXPECT_EQ(std::memcmp(out_b.data(), out_s.data(), out_b.size() * sizeof(float)), 0)
          << "attention outputs differ";  // attention does not read the compressor rings
    }
  }
}

// A dropped layer's typed compressor (not in the blob's section) still bounds
// the range: swa_plan_build checks its ring's rewind rule on the restored slot
// too. Its ring (rate 2, L = 4) is shallower than the stored ones'; the
// restored checkpoint at lo must continue, with the section on and off.
TEST(CheckpointWalkDropped, DroppedCompressorBoundsTheRange) {
  for (const bool compression : {true, false}) {
    SCOPED_TRACE(compression ? "section" : "no section");
    Rig r(compression, 16, true);
    uint32_t a, b;
    ASSERT_EQ(swa_slot_alloc(r.cache, &a), SWA_OK);
    ASSERT_EQ(swa_slot_alloc(r.cache, &b), SWA_OK);
    std::vector<float> out;
    Rig::Entries e;
    const int end = r.Run(a, 0, {{9, 0}, {9, 0}, {8, 0}}, &out, &e);  // E = 26
    ASSERT_FALSE(HasFatalFailure());
    CheckRange(r, a, "E = 26");
    int32_t lo = -1, hi = -1;
    ASSERT_EQ(swa_slot_checkpoint_range(r.cache, a, &lo, &hi), SWA_OK);
    // SWA ring: 26 - 16 + 3 = 13; HCA rate 4 (L = 6): 20; the dropped HCA
    // rate 2 (L = 4): its window open at c starts at 2 floor(c / 2) >= 22.
    EXPECT_EQ(lo, 22);
    EXPECT_EQ(hi, end);
    ASSERT_EQ(swa_slot_save_at(r.cache, a, lo, B("lo"), 2), SWA_OK) << swa_last_error();
    ASSERT_EQ(swa_slot_restore(r.cache, b, B("lo"), 2), SWA_OK) << swa_last_error();
    EXPECT_TRUE(Plannable(r, b, lo)) << swa_last_error();
    EXPECT_EQ(swa_slot_save_at(r.cache, a, 21, B("x"), 1), SWA_OUT_OF_RANGE);
    EXPECT_NE(std::string(swa_last_error()).find("compressor ring of layer 3"), std::string::npos)
        << swa_last_error();
  }
}

// An HCA ring at rate 1 never reads a ring row (the window open at c is c
// alone): it does not bound the range, which the stored rings then set (20).
TEST(CheckpointWalkDropped, RateOneHcaDoesNotBoundTheRange) {
  Rig r(true, 16, true, 1);
  uint32_t a;
  ASSERT_EQ(swa_slot_alloc(r.cache, &a), SWA_OK);
  std::vector<float> out;
  Rig::Entries e;
  r.Run(a, 0, {{9, 0}, {9, 0}, {8, 0}}, &out, &e);  // E = 26
  ASSERT_FALSE(HasFatalFailure());
  CheckRange(r, a, "E = 26");
  int32_t lo = -1, hi = -1;
  ASSERT_EQ(swa_slot_checkpoint_range(r.cache, a, &lo, &hi), SWA_OK);
  EXPECT_EQ(lo, 20);  // the rate-1 ring alone would give 26 - 3 = 23
  EXPECT_EQ(hi, 26);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CheckpointWalk,
    ::testing::Values(WalkCase{true, 0, 0}, WalkCase{false, 0, 0}, WalkCase{true, 16, 0},
                      WalkCase{false, 16, 0}, WalkCase{true, 0, 23}, WalkCase{false, 16, 23}),
    [](const ::testing::TestParamInfo<WalkCase>& i) {
      return std::string(i.param.compression ? "Section" : "NoSection") + "R" +
             std::to_string(i.param.ring_len) + (i.param.replay ? "Replay" : "");
    });

}  // namespace
