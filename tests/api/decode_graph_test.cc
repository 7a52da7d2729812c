// The graph decode's C API on the CPU twin: bit-identical outputs and ring
// bytes versus swa_plan_build + swa_step on a twin cache, padding, every
// refused-sequence case, the error record, and the device-advanced guard.
// Slot ownership: decode_graph_ownership_test.cc; idle rows' LSE and merge:
// decode_graph_lse_test.cc.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "api/test_layers.h"
#include "gtest/gtest.h"
#include "swacache.h"
#include "test_random.h"

namespace swa_test {
namespace {

constexpr uint32_t kWindow = 16, kDraft = 3;  // R = 20, R - W + 1 = 5

// Two caches with one configuration: A runs the graph decode, B host-planned
// steps on the valid sequences; both get the same bytes. With
// `scale_in_b_steps`, B's layers have no softmax_scale and B's steps pass
// each layer's as swa_step_args_t::softmax_scale instead.
class Rig {
 public:
  Rig(std::vector<LayerCfg> layers, uint32_t tokens, uint32_t max_seqs, swa_dtype_t dtype,
      uint64_t seed, bool scale_in_b_steps = false)
      : cfg_(std::move(layers)), tokens_(tokens), dtype_(dtype), rng_(seed),
        scale_in_b_steps_(scale_in_b_steps) {
    for (const LayerCfg& c : cfg_) descs_.push_back(ToDesc(c, SWA_LAYER_STORED));
    std::vector<swa_layer_desc_t> descs_b = descs_;
    if (scale_in_b_steps)
      for (swa_layer_desc_t& d : descs_b) d.softmax_scale = 0;
    swa_config_t c;
    swa_config_init(&c);
    c.window = kWindow;
    c.draft_tokens = kDraft;
    c.max_slots = 8;
    c.backend = SWA_BACKEND_CPU;
    c.num_threads = 2;
    c.num_layers = uint32_t(descs_.size());
    c.layers = descs_.data();
    EXPECT_EQ(swa_cache_create(&c, &a_), SWA_OK) << swa_last_error();
    c.layers = descs_b.data();
    EXPECT_EQ(swa_cache_create(&c, &b_), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_plan_create(a_, &plan_a_), SWA_OK);
    EXPECT_EQ(swa_plan_create(b_, &plan_b_), SWA_OK);
    graph_status_ = swa_decode_graph_create(a_, max_seqs, tokens, &graph_);
    swa_layout_t lay;
    lay.struct_size = sizeof lay;
    swa_cache_layout(a_, &lay);
    ring_len_ = int32_t(lay.ring_len);
    for (const LayerCfg& l : cfg_) {
      std::vector<float> s(size_t(l.q_heads));
      for (float& x : s) x = float(Uniform(-1.5, 1.5));
      sinks_.push_back(s);
    }
  }
  ~Rig() {
    swa_decode_graph_destroy(graph_);
    swa_plan_destroy(plan_a_);
    swa_plan_destroy(plan_b_);
    swa_cache_destroy(a_);
    swa_cache_destroy(b_);
  }

  swa_cache_t* a() { return a_; }
  swa_cache_t* b() { return b_; }
  swa_plan_t* plan_a() { return plan_a_; }
  swa_decode_graph_t* graph() { return graph_; }
  int32_t ring_len() const { return ring_len_; }
  double Uniform(double lo, double hi) { return swa_test::UniformReal<double>(lo, hi)(rng_); }
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  // A slot in both caches (the same id), prefilled with `len` tokens by a
  // host-planned step on each.
  uint32_t NewSlot(int32_t len) {
    uint32_t sa = 0, sb = 0;
    EXPECT_EQ(swa_slot_alloc(a_, &sa), SWA_OK);
    EXPECT_EQ(swa_slot_alloc(b_, &sb), SWA_OK);
    EXPECT_EQ(sa, sb);
    HostStep({{sa, len, len, 0}}, true);
    return sa;
  }

  // Host-planned step on B (and on A too when `both`), same inputs.
  void HostStep(const std::vector<swa_seq_t>& seqs, bool both) {
    int32_t t = 0;
    for (const swa_seq_t& s : seqs) t += s.seqlen_q;
    ASSERT_EQ(swa_plan_build(plan_b_, seqs.data(), uint32_t(seqs.size())), SWA_OK) << swa_last_error();
    if (both) ASSERT_EQ(swa_plan_build(plan_a_, seqs.data(), uint32_t(seqs.size())), SWA_OK) << swa_last_error();
    for (size_t l = 0; l < cfg_.size(); ++l) {
      Inputs in = MakeInputs(l, t);
      std::vector<uint8_t> out_b = Poisoned(l, t), out_a = Poisoned(l, t);
      swa_step_args_t args = Args(l, in, out_b.data(), nullptr, /*for_b=*/true);
      ASSERT_EQ(swa_step(b_, plan_b_, &args), SWA_OK) << swa_last_error();
      if (!both) continue;
      args = Args(l, in, out_a.data(), nullptr);
      ASSERT_EQ(swa_step(a_, plan_a_, &args), SWA_OK) << swa_last_error();
      ASSERT_EQ(out_a, out_b) << "layer " << l;
    }
  }

  // One graph step on A over `slots`/`seqlen_k` (padding and refused entries
  // included); B runs the entries marked valid. Checks outputs bit for bit,
  // zero rows elsewhere, and every ring byte.
  void GraphStep(const std::vector<int32_t>& slots, const std::vector<int32_t>& seqlen_k,
                 const std::vector<bool>& valid) {
    const int32_t n = int32_t(slots.size());
    ASSERT_EQ(swa_decode_graph_plan(graph_, slots.data(), seqlen_k.data(), uint32_t(n), nullptr),
              SWA_OK)
        << swa_last_error();
    std::vector<swa_seq_t> host;
    std::vector<int32_t> rows;  // first row in A of each of B's sequences
    for (int32_t i = 0; i < n; ++i)
      if (valid[i]) {
        host.push_back({uint32_t(slots[i]), int32_t(tokens_), seqlen_k[i], 0});
        rows.push_back(i * int32_t(tokens_));
      }
    if (!host.empty())
      ASSERT_EQ(swa_plan_build(plan_b_, host.data(), uint32_t(host.size())), SWA_OK) << swa_last_error();
    const int32_t t = n * int32_t(tokens_), tb = int32_t(host.size() * tokens_);
    for (size_t l = 0; l < cfg_.size(); ++l) {
      const LayerCfg& c = cfg_[l];
      Inputs in = MakeInputs(l, t);
      std::vector<uint8_t> out_a = Poisoned(l, t);
      std::vector<float> lse_a(size_t(t) * c.q_heads, std::numeric_limits<float>::quiet_NaN());
      swa_step_args_t args = Args(l, in, out_a.data(), lse_a.data());
      ASSERT_EQ(swa_decode_graph_step(graph_, &args), SWA_OK) << swa_last_error();
      // B: the valid sequences' rows, gathered.
      Inputs gb = Gather(l, in, rows);
      std::vector<uint8_t> out_b = Poisoned(l, tb);
      std::vector<float> lse_b(size_t(tb) * c.q_heads, std::numeric_limits<float>::quiet_NaN());
      if (!host.empty()) {
        swa_step_args_t bargs = Args(l, gb, out_b.data(), lse_b.data(), /*for_b=*/true);
        ASSERT_EQ(swa_step(b_, plan_b_, &bargs), SWA_OK) << swa_last_error();
      }
      const size_t orow = OutRowBytes(l), lrow = size_t(c.q_heads);
      size_t k = 0;
      for (int32_t i = 0; i < n; ++i) {
        const uint8_t* oa = out_a.data() + size_t(i) * tokens_ * orow;
        const float* la = lse_a.data() + size_t(i) * tokens_ * lrow;
        if (valid[i]) {
          ASSERT_EQ(0, std::memcmp(oa, out_b.data() + k * tokens_ * orow, tokens_ * orow))
              << "layer " << l << " seqs[" << i << "]";
          ASSERT_EQ(0, std::memcmp(la, lse_b.data() + k * tokens_ * lrow, tokens_ * lrow * 4))
              << "layer " << l << " seqs[" << i << "] lse";
          ++k;
        } else {
          for (size_t j = 0; j < tokens_ * orow; ++j) ASSERT_EQ(oa[j], 0) << "seqs[" << i << "]";
          // The LSE of an empty row, so that a merge gives the zero output no weight.
          for (size_t j = 0; j < tokens_ * lrow; ++j)
            ASSERT_EQ(la[j], -std::numeric_limits<float>::infinity()) << "seqs[" << i << "]";
        }
      }
    }
    ExpectRingsEqual();
  }

  void ExpectRingsEqual() {
    swa_layout_t lay;
    lay.struct_size = sizeof lay;
    swa_cache_layout(a_, &lay);
    for (uint32_t l = 0; l < cfg_.size(); ++l) {
      swa_tensor_view_t va, vb;
      va.struct_size = vb.struct_size = sizeof va;
      ASSERT_EQ(swa_cache_layer_view(a_, l, &va), SWA_OK);
      ASSERT_EQ(swa_cache_layer_view(b_, l, &vb), SWA_OK);
      const size_t ring = size_t(va.shape[1]) * size_t(va.strides[1]);
      for (uint32_t s = 0; s < lay.max_slots; ++s)
        ASSERT_EQ(0, std::memcmp(static_cast<uint8_t*>(va.data) + s * lay.slot_bytes,
                                 static_cast<uint8_t*>(vb.data) + s * lay.slot_bytes, ring))
            << "layer " << l << " slot " << s;
    }
  }

 private:
  struct Inputs {
    std::vector<uint8_t> q, k, v;
  };
  size_t Elem() const { return dtype_ == SWA_DTYPE_FP32 ? 4 : 2; }
  size_t OutRowBytes(size_t l) const { return size_t(cfg_[l].q_heads) * cfg_[l].head_dim * Elem(); }
  size_t KvRowBytes(size_t l) const { return size_t(cfg_[l].kv_heads) * cfg_[l].head_dim * Elem(); }

  void Fill(std::vector<uint8_t>* raw, size_t n, double amp) {
    raw->resize(n * Elem());
    for (size_t i = 0; i < n; ++i) {
      float x = float(Uniform(-amp, amp));
      if (std::fabs(x) < 1e-3) x = 0.5f;  // never zeros
      if (dtype_ == SWA_DTYPE_BF16) {
        const uint16_t h = ToBf16(x);
        std::memcpy(raw->data() + 2 * i, &h, 2);
      } else {
        std::memcpy(raw->data() + 4 * i, &x, 4);
      }
    }
  }
  Inputs MakeInputs(size_t l, int32_t t) {
    const LayerCfg& c = cfg_[l];
    Inputs in;
    Fill(&in.q, size_t(t) * c.q_heads * c.head_dim, 1.0);
    Fill(&in.k, size_t(t) * c.kv_heads * c.head_dim, 2.0);
    Fill(&in.v, size_t(t) * c.kv_heads * c.head_dim, 2.0);
    return in;
  }
  Inputs Gather(size_t l, const Inputs& in, const std::vector<int32_t>& rows) const {
    Inputs g;
    const size_t qr = OutRowBytes(l), kr = KvRowBytes(l);
    for (int32_t r : rows) {
      g.q.insert(g.q.end(), in.q.begin() + r * qr, in.q.begin() + (r + tokens_) * qr);
      g.k.insert(g.k.end(), in.k.begin() + r * kr, in.k.begin() + (r + tokens_) * kr);
      g.v.insert(g.v.end(), in.v.begin() + r * kr, in.v.begin() + (r + tokens_) * kr);
    }
    return g;
  }
  std::vector<uint8_t> Poisoned(size_t l, int32_t t) const {
    return std::vector<uint8_t>(size_t(t) * OutRowBytes(l) + 1, 0xFF);  // NaN in both dtypes
  }
  swa_step_args_t Args(size_t l, const Inputs& in, void* out, float* lse,
                       bool for_b = false) const {
    const LayerCfg& c = cfg_[l];
    swa_step_args_t a;
    swa_step_args_init(&a);
    a.layer = uint32_t(l);
    a.q = in.q.data();
    a.q_dtype = dtype_;
    a.k_new = in.k.data();
    a.v_new = c.shared_kv ? nullptr : in.v.data();
    a.kv_dtype = dtype_;
    a.out = out;
    a.out_dtype = dtype_;
    a.sinks = c.sinks ? sinks_[l].data() : nullptr;
    a.lse = lse;
    if (for_b && scale_in_b_steps_) a.softmax_scale = c.softmax_scale;
    return a;
  }

  std::vector<LayerCfg> cfg_;
  std::vector<swa_layer_desc_t> descs_;
  std::vector<std::vector<float>> sinks_;
  size_t tokens_;
  swa_dtype_t dtype_;
  std::mt19937_64 rng_;
  bool scale_in_b_steps_ = false;
  int32_t ring_len_ = 0;
  swa_cache_t* a_ = nullptr;
  swa_cache_t* b_ = nullptr;
  swa_plan_t* plan_a_ = nullptr;
  swa_plan_t* plan_b_ = nullptr;
  swa_decode_graph_t* graph_ = nullptr;
  swa_status_t graph_status_ = SWA_OK;

 public:
  swa_status_t graph_status() const { return graph_status_; }
};

std::vector<LayerCfg> Layers() {
  LayerCfg mqa{SWA_FORMAT_MXFP8, 4, 1, 64, true, true};  // MQA, sinks
  LayerCfg gqa{SWA_FORMAT_BF16, 4, 2, 32, false, true};  // GQA, separate K/V, sinks
  LayerCfg f32{SWA_FORMAT_FP32, 6, 3, 32, false, false};
  f32.softcap = 2.0f;
  return {mqa, gqa, f32};
}

struct Track {
  int32_t end, high;
};

// A legal seqlen_k for a slot at `t`: continue, or rewind within the ring.
int32_t NextLength(Rig& rig, const Track& t, int32_t tokens) {
  int32_t q = t.end;
  if (rig.Int(0, 2) == 0) {
    const int32_t r = rig.Int(1, rig.ring_len() - int32_t(kWindow) + 1);
    const int32_t cand = std::max(0, t.end - r);
    const int32_t oldest = std::max(0, cand - int32_t(kWindow) + 1);
    if (oldest >= std::max(t.end, t.high) - rig.ring_len()) q = cand;
  }
  return q + tokens;
}

void RunRandomSteps(uint32_t tokens, swa_dtype_t dtype, uint64_t seed,
                    const std::vector<LayerCfg>& layers = Layers(), bool scale_in_b_steps = false) {
  const uint32_t max_seqs = 6;
  Rig rig(layers, tokens, max_seqs, dtype, seed, scale_in_b_steps);
  ASSERT_EQ(rig.graph_status(), SWA_OK) << swa_last_error();
  std::vector<uint32_t> slots;
  std::vector<Track> track;
  for (int i = 0; i < 5; ++i) {
    const int32_t len = rig.Int(1, 45);
    slots.push_back(rig.NewSlot(len));
    track.push_back({len, len});
  }
  ASSERT_EQ(swa_decode_graph_import(rig.graph(), slots.data(), slots.size(), nullptr), SWA_OK)
      << swa_last_error();
  for (int step = 0; step < 8; ++step) {
    std::vector<int32_t> order(slots.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = int32_t(i);
    std::shuffle(order.begin(), order.end(), std::mt19937(uint32_t(seed + step)));
    const int active = rig.Int(1, int(slots.size()));
    std::vector<int32_t> bs(max_seqs, -1), bk(max_seqs, 0);
    std::vector<bool> valid(max_seqs, false);
    std::vector<int32_t> pos(max_seqs);
    for (size_t i = 0; i < pos.size(); ++i) pos[i] = int32_t(i);
    std::shuffle(pos.begin(), pos.end(), std::mt19937(uint32_t(seed * 7 + step)));
    for (int j = 0; j < active; ++j) {
      const int32_t si = order[j], at = pos[j];
      bs[at] = int32_t(slots[si]);
      bk[at] = NextLength(rig, track[si], int32_t(tokens));
      valid[at] = true;
      track[si].end = bk[at];
      track[si].high = std::max(track[si].high, bk[at]);
    }
    for (int32_t at = 0; at < int32_t(max_seqs); ++at) bk[at] = bs[at] < 0 ? 12345 : bk[at];
    rig.GraphStep(bs, bk, valid);
    if (::testing::Test::HasFatalFailure()) return;
    swa_graph_error_t rec;
    ASSERT_EQ(swa_decode_graph_check(rig.graph(), nullptr, &rec), SWA_OK) << swa_last_error();
    EXPECT_EQ(rec.reason, SWA_GRAPH_OK);
  }
  // The host learns the lengths and takes over: host-planned steps on both caches agree.
  std::vector<int32_t> ends;
  for (const Track& t : track) ends.push_back(t.end);
  ASSERT_EQ(swa_slot_set_lengths(rig.a(), slots.data(), ends.data(), nullptr, slots.size()), SWA_OK)
      << swa_last_error();
  std::vector<swa_seq_t> seqs;
  for (size_t i = 0; i < slots.size(); ++i) seqs.push_back({slots[i], 2, ends[i] + 2, 0});
  rig.HostStep(seqs, true);
  rig.ExpectRingsEqual();
}

TEST(DecodeGraph, MatchesHostPlannedDecodeFp32) { RunRandomSteps(1, SWA_DTYPE_FP32, 11); }
TEST(DecodeGraph, MatchesHostPlannedVerifyFp32) { RunRandomSteps(4, SWA_DTYPE_FP32, 12); }
TEST(DecodeGraph, MatchesHostPlannedVerifyBf16) { RunRandomSteps(5, SWA_DTYPE_BF16, 13); }
TEST(DecodeGraph, MatchesHostPlannedDecodeBf16) { RunRandomSteps(1, SWA_DTYPE_BF16, 14); }

// A layer's softmax_scale (swa_layer_desc_t) in the graph decode: its bits
// equal host-planned steps on a twin whose layers have none and whose steps
// pass the same scale as swa_step_args_t::softmax_scale (that path is checked
// against FP64 in step_scale_test.cc).
TEST(DecodeGraph, HonoursTheLayersSoftmaxScale) {
  std::vector<LayerCfg> layers = Layers();
  const float scales[] = {0.37f, 0.09f, 0.5f};  // none is 1/sqrt(head_dim)
  for (size_t i = 0; i < layers.size(); ++i) layers[i].softmax_scale = scales[i];
  RunRandomSteps(1, SWA_DTYPE_FP32, 15, layers, /*scale_in_b_steps=*/true);
  RunRandomSteps(3, SWA_DTYPE_BF16, 16, layers, /*scale_in_b_steps=*/true);
}

struct BadCase {
  const char* name;
  int32_t reason;
  swa_status_t status;
};

// Every refused-sequence case between two valid sequences: zeros in its rows,
// the others exact, nothing in its ring, the record and the status.
TEST(DecodeGraph, RefusedSequences) {
  const int32_t tokens = 2;
  Rig rig(Layers(), tokens, 4, SWA_DTYPE_FP32, 21);
  const uint32_t s0 = rig.NewSlot(30), s1 = rig.NewSlot(7), s2 = rig.NewSlot(40);
  const uint32_t outsider = rig.NewSlot(9);  // allocated, never imported
  std::vector<uint32_t> imported = {s0, s1, s2};
  ASSERT_EQ(swa_decode_graph_import(rig.graph(), imported.data(), 3, nullptr), SWA_OK);
  int32_t e0 = 30, e1 = 7;
  const int32_t e2 = 40, r = rig.ring_len();
  struct Bad {
    const char* name;
    int32_t slot, seqlen_k, reason;
    swa_status_t status;
  };
  const std::vector<Bad> bad = {
      {"slot past the pool", 99, 10, SWA_GRAPH_SLOT_OUT_OF_RANGE, SWA_INVALID_ARGUMENT},
      {"negative slot", -7, 10, SWA_GRAPH_SLOT_OUT_OF_RANGE, SWA_INVALID_ARGUMENT},
      {"not imported", int32_t(outsider), 9 + tokens, SWA_GRAPH_SLOT_NOT_IMPORTED,
       SWA_FAILED_PRECONDITION},
      {"seqlen_k below tokens", int32_t(s2), tokens - 1, SWA_GRAPH_SEQLEN_K_OUT_OF_RANGE,
       SWA_INVALID_ARGUMENT},
      {"negative seqlen_k", int32_t(s2), -5, SWA_GRAPH_SEQLEN_K_OUT_OF_RANGE, SWA_INVALID_ARGUMENT},
      {"gap", int32_t(s2), e2 + 1 + tokens, SWA_GRAPH_GAP, SWA_FAILED_PRECONDITION},
      {"forward jump", int32_t(s2), e2 + 3 * tokens, SWA_GRAPH_GAP, SWA_FAILED_PRECONDITION},
      {"rewind too deep", int32_t(s2), e2 - (r - int32_t(kWindow) + 2) + tokens,
       SWA_GRAPH_REWIND_TOO_DEEP, SWA_FAILED_PRECONDITION},
      {"duplicate", int32_t(s0), -1, SWA_GRAPH_DUPLICATE_SLOT, SWA_INVALID_ARGUMENT},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.name);
    const int32_t k0 = e0 + tokens, k1 = e1 + tokens;
    const int32_t bk = b.reason == SWA_GRAPH_DUPLICATE_SLOT ? k0 : b.seqlen_k;
    // [s0, bad, padding, s1]
    rig.GraphStep({int32_t(s0), b.slot, -1, int32_t(s1)}, {k0, bk, 0, k1}, {true, false, false, true});
    if (HasFatalFailure()) return;
    e0 = k0;
    e1 = k1;
    const swa_graph_error_t* dev = swa_decode_graph_error_record(rig.graph());
    ASSERT_NE(dev, nullptr);
    EXPECT_EQ(dev->reason, b.reason);
    EXPECT_EQ(dev->seq, 1);
    EXPECT_EQ(dev->slot, b.slot);
    EXPECT_EQ(dev->seqlen_k, bk);
    swa_graph_error_t rec;
    EXPECT_EQ(swa_decode_graph_check(rig.graph(), nullptr, &rec), b.status);
    const std::string msg = swa_last_error();
    EXPECT_NE(msg.find("seqs[1]"), std::string::npos) << msg;
    EXPECT_EQ(rec.reason, b.reason);
    // The record keeps the first error until reset.
    rig.GraphStep({int32_t(s0), -1, 99, int32_t(s1)}, {e0 + tokens, 0, 5, e1 + tokens},
                  {true, false, false, true});
    e0 += tokens;
    e1 += tokens;
    EXPECT_EQ(swa_decode_graph_error_record(rig.graph())->seq, 1);
    ASSERT_EQ(swa_decode_graph_reset_error(rig.graph(), nullptr), SWA_OK);
    EXPECT_EQ(swa_decode_graph_check(rig.graph(), nullptr, nullptr), SWA_OK);
  }
  // A released slot is refused; s2 never ran, so its graph lengths are still 40.
  ASSERT_EQ(swa_decode_graph_release(rig.graph(), &s2, 1, nullptr), SWA_OK);
  rig.GraphStep({int32_t(s2)}, {e2 + tokens}, {false});
  EXPECT_EQ(swa_decode_graph_error_record(rig.graph())->reason, SWA_GRAPH_SLOT_NOT_IMPORTED);
}

TEST(DecodeGraph, DeviceAdvancedGuardAndSetLengths) {
  Rig rig(Layers(), 1, 2, SWA_DTYPE_FP32, 31);
  const uint32_t s = rig.NewSlot(20), other = rig.NewSlot(5);
  swa_store_memory_config_t mc;
  swa_store_memory_config_init(&mc);
  swa_kv_store_t store;
  swa_kv_store_init(&store);
  ASSERT_EQ(swa_store_memory_create(&mc, &store), SWA_OK);
  ASSERT_EQ(swa_cache_set_store(rig.a(), &store), SWA_OK) << swa_last_error();
  const uint8_t key[] = {1, 2, 3};
  ASSERT_EQ(swa_slot_save(rig.a(), s, key, sizeof key), SWA_OK) << swa_last_error();

  ASSERT_EQ(swa_decode_graph_import(rig.graph(), &s, 1, nullptr), SWA_OK);
  EXPECT_EQ(swa_decode_graph_import(rig.graph(), &s, 1, nullptr), SWA_FAILED_PRECONDITION);
  const std::string name = "slot " + std::to_string(s);
  auto expect_guarded = [&](swa_status_t st, const char* what) {
    EXPECT_EQ(st, SWA_FAILED_PRECONDITION) << what;
    EXPECT_NE(std::string(swa_last_error()).find(name), std::string::npos) << what << ": " << swa_last_error();
    EXPECT_NE(std::string(swa_last_error()).find("device-advanced"), std::string::npos) << what;
  };
  const swa_seq_t seq = {s, 1, 21, 0};
  expect_guarded(swa_plan_build(rig.plan_a(), &seq, 1), "plan_build");
  expect_guarded(swa_slot_save(rig.a(), s, key, sizeof key), "save");
  expect_guarded(swa_slot_restore(rig.a(), s, key, sizeof key), "restore");
  // A key the store does not hold: the guard still answers, before any store
  // I/O (fuzz_capi found NOT_FOUND here).
  const uint8_t missing[] = {9, 9};
  expect_guarded(swa_slot_restore(rig.a(), s, missing, sizeof missing), "restore of a missing key");
  expect_guarded(swa_slot_copy(rig.a(), s, other), "copy from");
  expect_guarded(swa_slot_copy(rig.a(), other, s), "copy to");
  expect_guarded(swa_slot_set_valid_start(rig.a(), s, 1), "set_valid_start");
  int32_t rs = 0, rl = 0;
  expect_guarded(swa_slot_begin_replay(rig.a(), s, 4, &rs, &rl), "begin_replay");
  // Another slot is not affected.
  const swa_seq_t ok_seq = {other, 1, 6, 0};
  EXPECT_EQ(swa_plan_build(rig.plan_a(), &ok_seq, 1), SWA_OK) << swa_last_error();
  EXPECT_EQ(swa_plan_cancel(rig.plan_a()), SWA_OK);

  // Graph steps 20 -> 21 -> 22; the host learns 22.
  const int32_t slot = int32_t(s);
  for (int32_t k : {21, 22}) {
    ASSERT_EQ(swa_decode_graph_plan(rig.graph(), &slot, &k, 1, nullptr), SWA_OK);
    EXPECT_EQ(swa_decode_graph_check(rig.graph(), nullptr, nullptr), SWA_OK) << swa_last_error();
  }
  // set_lengths validation (nothing changes on error).
  int32_t bad_end = 3, vs = 5;
  EXPECT_EQ(swa_slot_set_lengths(rig.a(), &s, &bad_end, &vs, 1), SWA_INVALID_ARGUMENT);
  int32_t neg = -1;
  EXPECT_EQ(swa_slot_set_lengths(rig.a(), &s, &neg, nullptr, 1), SWA_INVALID_ARGUMENT);
  const uint32_t twice[] = {s, s};
  const int32_t ends2[] = {22, 22};
  EXPECT_EQ(swa_slot_set_lengths(rig.a(), twice, ends2, nullptr, 2), SWA_INVALID_ARGUMENT);
  const uint32_t past = 1000;
  EXPECT_EQ(swa_slot_set_lengths(rig.a(), &past, ends2, nullptr, 1), SWA_OUT_OF_RANGE);
  const uint32_t pair[] = {s, other};
  const int32_t forward[] = {22, 50};  // `other` is not device-advanced: may not move forward
  EXPECT_EQ(swa_slot_set_lengths(rig.a(), pair, forward, nullptr, 2), SWA_FAILED_PRECONDITION);
  expect_guarded(swa_plan_build(rig.plan_a(), &seq, 1), "plan_build after a refused set");
  EXPECT_EQ(swa_slot_set_lengths(rig.a(), nullptr, ends2, nullptr, 1), SWA_INVALID_ARGUMENT);

  int32_t end = 22;
  ASSERT_EQ(swa_slot_set_lengths(rig.a(), &s, &end, nullptr, 1), SWA_OK) << swa_last_error();
  swa_slot_info_t info;
  info.struct_size = sizeof info;
  ASSERT_EQ(swa_slot_info(rig.a(), s, &info), SWA_OK);
  EXPECT_EQ(info.written_end, 22);
  // The host may continue at written_end, not rewind below it (the ring may
  // hold rejected drafts past it).
  const swa_seq_t cont = {s, 1, 23, 0}, rewind = {s, 1, 21, 0};
  EXPECT_EQ(swa_plan_build(rig.plan_a(), &rewind, 1), SWA_FAILED_PRECONDITION);
  EXPECT_EQ(swa_plan_build(rig.plan_a(), &cont, 1), SWA_OK) << swa_last_error();
  EXPECT_EQ(swa_plan_cancel(rig.plan_a()), SWA_OK);
  EXPECT_EQ(swa_slot_save(rig.a(), s, key, sizeof key), SWA_OK) << swa_last_error();
  // A slot the host knows may be rewound.
  const int32_t back = 3;
  EXPECT_EQ(swa_slot_set_lengths(rig.a(), &other, &back, nullptr, 1), SWA_OK) << swa_last_error();
}

TEST(DecodeGraph, CreateChecks) {
  Rig rig(Layers(), 1, 1, SWA_DTYPE_FP32, 41);
  swa_decode_graph_t* g = nullptr;
  EXPECT_EQ(swa_decode_graph_create(rig.a(), 4, 0, &g), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_decode_graph_create(rig.a(), 4, kDraft + 3, &g), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_decode_graph_create(rig.a(), 0, 1, &g), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_decode_graph_create(nullptr, 4, 1, &g), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_decode_graph_create(rig.a(), 4, kDraft + 2, &g), SWA_OK) << swa_last_error();
  // n_seqs above max_seqs, a step before any plan.
  const int32_t slot = -1, k = 0;
  swa_step_args_t args;
  swa_step_args_init(&args);
  float dummy[4096];
  args.q = args.k_new = args.out = dummy;
  args.sinks = dummy;
  EXPECT_EQ(swa_decode_graph_step(g, &args), SWA_FAILED_PRECONDITION);
  int32_t slots5[5] = {-1, -1, -1, -1, -1}, k5[5] = {};
  EXPECT_EQ(swa_decode_graph_plan(g, slots5, k5, 5, nullptr), SWA_INVALID_ARGUMENT);
  EXPECT_EQ(swa_decode_graph_plan(g, &slot, &k, 1, nullptr), SWA_OK);
  // Only padding: every row zero.
  std::fill(dummy, dummy + 4096, std::numeric_limits<float>::quiet_NaN());
  args.q = args.k_new = dummy;
  std::vector<float> out(size_t(kDraft + 2) * 4 * 64, std::numeric_limits<float>::quiet_NaN());
  args.out = out.data();
  // RoPE positions are host arrays a captured graph could not read: refused,
  // naming the field, with nothing written.
  const int32_t positions[kDraft + 2] = {};
  args.positions = positions;
  EXPECT_EQ(swa_decode_graph_step(g, &args), SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(swa_last_error()).find("positions"), std::string::npos);
  for (float x : out) ASSERT_TRUE(std::isnan(x));
  args.positions = nullptr;
  ASSERT_EQ(swa_decode_graph_step(g, &args), SWA_OK) << swa_last_error();
  for (float x : out) ASSERT_EQ(x, 0.0f);
  swa_decode_graph_destroy(g);
  swa_decode_graph_destroy(nullptr);

  LayerCfg rope{SWA_FORMAT_BF16, 4, 2, 32, false, false};
  rope.rope_style = SWA_ROPE_NEOX;
  rope.rope_dims = 32;
  Rig rope_rig({rope}, 1, 1, SWA_DTYPE_FP32, 42);  // its own graph fails to create
  EXPECT_EQ(swa_decode_graph_create(rope_rig.a(), 4, 1, &g), SWA_UNIMPLEMENTED);
  EXPECT_NE(std::string(swa_last_error()).find("layers[0]"), std::string::npos);
}

}  // namespace
}  // namespace swa_test
