// Outputs that share memory with another argument (docs/step.md,
// "Arguments"): swa_step, the graph step, swa_attention_merge, swa_project and
// swa_rope_apply refuse them with INVALID_ARGUMENT naming both tensors and
// their byte ranges, and write nothing (outputs, cache rows, counters). Only
// the in-place forms the header allows pass (out == q; merge out == out_a or
// out_b, lse == lse_a or lse_b), and they give the bits of a separate output.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "api/test_util.h"
#include "swacache.h"

namespace {

constexpr uint32_t kHq = 4, kD = 32;
constexpr int kT = 5;  // new tokens of the plan: 3 + 2
constexpr size_t kQ = size_t(kT) * kHq * kD;

std::vector<uint8_t> Bytes(const void* p, size_t n) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  return std::vector<uint8_t>(b, b + n);
}

// A CPU cache of one layer (sinks, separate K/V), two slots with some history,
// and a built plan of kT new tokens.
class Rig {
 public:
  Rig(uint32_t kv_heads, uint32_t threads) : hkv_(kv_heads) {
    swa_layer_desc_init(&layer_);
    layer_.q_heads = kHq, layer_.kv_heads = kv_heads, layer_.head_dim = kD;
    layer_.shared_kv = false, layer_.has_sinks = true;
    swa_config_t c;
    swa_config_init(&c);
    c.backend = SWA_BACKEND_CPU, c.max_slots = 2, c.num_threads = threads;
    c.window = 8, c.draft_tokens = 3;
    c.num_layers = 1, c.layers = &layer_;
    EXPECT_EQ(swa_cache_create(&c, &cache_), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_plan_create(cache_, &plan_), SWA_OK);
    uint32_t s[2];
    for (uint32_t& x : s) EXPECT_EQ(swa_slot_alloc(cache_, &x), SWA_OK);
    // History: 6 and 4 tokens, then the plan of 3 + 2 new ones.
    std::mt19937 rng(11);
    Step({{s[0], 6, 6, 0}, {s[1], 4, 4, 0}}, rng);
    const swa_seq_t seqs[2] = {{s[0], 3, 9, 0}, {s[1], 2, 6, 0}};
    EXPECT_EQ(swa_plan_build(plan_, seqs, 2), SWA_OK) << swa_last_error();
  }
  ~Rig() {
    swa_plan_destroy(plan_);
    swa_cache_destroy(cache_);
  }

  // The bytes of the layer's ring over all slots, and the step counter.
  std::vector<uint8_t> Pool() const {
    swa_tensor_view_t v;
    v.struct_size = sizeof(v);
    EXPECT_EQ(swa_cache_layer_view(cache_, 0, &v), SWA_OK);
    size_t extent = size_t(v.shape[3]);
    for (int i = 0; i < 3; ++i) extent += size_t(v.shape[i] - 1) * size_t(v.strides[i]);
    return Bytes(v.data, extent);
  }
  uint64_t Steps() const {
    swa_cache_stats_t st;
    st.struct_size = sizeof(st);
    EXPECT_EQ(swa_cache_stats(cache_, &st), SWA_OK);
    return st.steps;
  }
  uint32_t hkv() const { return hkv_; }
  swa_cache_t* cache() { return cache_; }
  swa_plan_t* plan() { return plan_; }

 private:
  void Step(std::vector<swa_seq_t> seqs, std::mt19937& rng) {
    int t = 0;
    for (const swa_seq_t& s : seqs) t += s.seqlen_q;
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> q(size_t(t) * kHq * kD), k(size_t(t) * hkv_ * kD), v(k.size()), o(q.size()),
        sinks(kHq);
    for (auto* x : {&q, &k, &v, &sinks})
      for (float& f : *x) f = u(rng);
    EXPECT_EQ(swa_plan_build(plan_, seqs.data(), seqs.size()), SWA_OK) << swa_last_error();
    swa_step_args_t a;
    swa_step_args_init(&a);
    a.q = q.data(), a.k_new = k.data(), a.v_new = v.data(), a.out = o.data();
    a.sinks = sinks.data();
    EXPECT_EQ(swa_step(cache_, plan_, &a), SWA_OK) << swa_last_error();
  }

  uint32_t hkv_;
  swa_layer_desc_t layer_;
  swa_cache_t* cache_ = nullptr;
  swa_plan_t* plan_ = nullptr;
};

// Every tensor of a step in one arena of random floats (outputs poisoned):
// q, k_new, v_new, sinks, lse, out, apart, and positions in a vector of its own.
struct Arena {
  explicit Arena(uint32_t hkv) : f(8192) {
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-1, 1);
    for (float& x : f) x = u(rng);
    for (size_t i = 0; i < kQ; ++i) f[kOut + i] = std::nanf("");
    for (size_t i = 0; i < size_t(kT) * kHq; ++i) f[kLse + i] = std::nanf("");
    kv_floats = size_t(kT) * hkv * kD;
  }
  swa_step_args_t Args() {
    swa_step_args_t a;
    swa_step_args_init(&a);
    a.q = &f[kQ0], a.k_new = &f[kK], a.v_new = &f[kV], a.sinks = &f[kSinks];
    a.out = &f[kOut], a.lse = &f[kLse], a.positions = positions.data();
    return a;
  }
  static constexpr size_t kQ0 = 700, kK = 1400, kV = 2400, kSinks = 3072, kLse = 3800, kOut = 4096;
  std::vector<float> f;
  std::vector<int32_t> positions = std::vector<int32_t>{9, 10, 11, 12, 13};
  size_t kv_floats = 0;
};

struct Case {
  std::string what;
  std::function<void(swa_step_args_t&, Arena&)> edit;
  const char* first;   // "out" or "lse"
  const char* second;  // the tensor it overlaps
};

std::vector<Case> StepCases() {
  auto at = [](Arena& ar, size_t i) { return &ar.f[i]; };
  std::vector<Case> cs;
  // out partly over q, at several offsets (in floats; one element included).
  for (long off : {-long(kD), -1L, 1L, long(kD), long(kQ) - 1, -(long(kQ) - 1)})
    cs.push_back({"out at q + " + std::to_string(off),
                  [=](swa_step_args_t& a, Arena& ar) { a.out = at(ar, Arena::kQ0 + off); }, "out",
                  "q"});
  cs.push_back({"out == q as BF16 (half the bytes)",
                [=](swa_step_args_t& a, Arena& ar) {
                  a.out = at(ar, Arena::kQ0), a.out_dtype = SWA_DTYPE_BF16;
                },
                "out", "q"});
  cs.push_back({"out == q with a BF16 q (twice the bytes)",
                [=](swa_step_args_t& a, Arena& ar) {
                  a.out = at(ar, Arena::kQ0), a.q_dtype = SWA_DTYPE_BF16;
                },
                "out", "q"});
  cs.push_back({"out over k_new",
                [=](swa_step_args_t& a, Arena& ar) { a.out = at(ar, Arena::kK + 3); }, "out",
                "k_new"});
  cs.push_back({"out ends on v_new",
                [=](swa_step_args_t& a, Arena& ar) { a.out = at(ar, Arena::kV - kQ + 1); }, "out",
                "v_new"});
  cs.push_back({"out == v_new", [=](swa_step_args_t& a, Arena& ar) { a.out = at(ar, Arena::kV); },
                "out", "v_new"});
  cs.push_back({"out over sinks",
                [=](swa_step_args_t& a, Arena& ar) { a.out = at(ar, Arena::kSinks - 10); }, "out",
                "sinks"});
  cs.push_back({"out over positions",
                [=](swa_step_args_t& a, Arena& ar) {
                  a.positions = reinterpret_cast<const int32_t*>(at(ar, Arena::kOut + kQ - 2));
                },
                "out", "positions"});
  cs.push_back({"lse over q",
                [=](swa_step_args_t& a, Arena& ar) { a.lse = at(ar, Arena::kQ0 + 7); }, "lse",
                "q"});
  cs.push_back(
      {"lse == q", [=](swa_step_args_t& a, Arena& ar) { a.lse = at(ar, Arena::kQ0); }, "lse", "q"});
  cs.push_back({"lse over k_new", [=](swa_step_args_t& a, Arena& ar) { a.lse = at(ar, Arena::kK); },
                "lse", "k_new"});
  cs.push_back({"lse over v_new",
                [=](swa_step_args_t& a, Arena& ar) { a.lse = at(ar, Arena::kV - 1); }, "lse",
                "v_new"});
  cs.push_back({"lse over sinks",
                [=](swa_step_args_t& a, Arena& ar) { a.lse = at(ar, Arena::kSinks + 3); }, "lse",
                "sinks"});
  cs.push_back({"lse over out",
                [=](swa_step_args_t& a, Arena& ar) { a.lse = at(ar, Arena::kOut + kQ - 1); }, "lse",
                "out"});
  cs.push_back({"lse over positions",
                [=](swa_step_args_t& a, Arena& ar) {
                  a.positions = reinterpret_cast<const int32_t*>(at(ar, Arena::kLse + 1));
                },
                "lse", "positions"});
  return cs;
}

void ExpectNamesBoth(const std::string& msg, const char* a, const char* b) {
  EXPECT_NE(msg.find(std::string(a) + " [0x"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::string(" and ") + b + " [0x"), std::string::npos) << msg;
  EXPECT_NE(msg.find("overlap"), std::string::npos) << msg;
}

TEST(StepOverlap, RefusedNamingBothAndNothingWritten) {
  for (uint32_t hkv : {1u, 2u}) {
    Rig rig(hkv, 2);
    for (const Case& c : StepCases()) {
      SCOPED_TRACE(c.what + ", Hkv = " + std::to_string(hkv));
      Arena ar(hkv);
      swa_step_args_t a = ar.Args();
      c.edit(a, ar);
      const std::vector<float> before = ar.f;
      const std::vector<uint8_t> pool = rig.Pool();
      const uint64_t steps = rig.Steps();
      ASSERT_EQ(swa_step(rig.cache(), rig.plan(), &a), SWA_INVALID_ARGUMENT);
      ExpectNamesBoth(swa_last_error(), c.first, c.second);
      EXPECT_EQ(std::memcmp(before.data(), ar.f.data(), before.size() * sizeof(float)), 0);
      EXPECT_EQ(rig.Pool(), pool);
      EXPECT_EQ(rig.Steps(), steps);
    }
    // The plan was not used up: the untouched arguments still run.
    Arena ar(hkv);
    swa_step_args_t a = ar.Args();
    EXPECT_EQ(swa_step(rig.cache(), rig.plan(), &a), SWA_OK) << swa_last_error();
  }
}

// out == q (the same bytes) runs in place and gives the bits of a separate
// output, lse too; checked on twin caches with the same history.
TEST(StepOverlap, OutExactlyQEqualsSeparateOutput) {
  for (uint32_t hkv : {1u, 2u})
    for (uint32_t threads : {1u, 3u})
      for (swa_dtype_t dt : {SWA_DTYPE_FP32, SWA_DTYPE_BF16}) {
        SCOPED_TRACE("Hkv = " + std::to_string(hkv) + ", threads = " + std::to_string(threads) +
                     ", dtype = " + std::to_string(int(dt)));
        Rig separate(hkv, threads), in_place(hkv, threads);
        Arena ar(hkv);
        if (dt == SWA_DTYPE_BF16) {  // q as BF16 bit patterns of the arena's values
          uint16_t* q16 = reinterpret_cast<uint16_t*>(&ar.f[Arena::kQ0]);
          std::vector<float> src(ar.f.begin() + Arena::kQ0, ar.f.begin() + Arena::kQ0 + kQ);
          for (size_t i = 0; i < kQ; ++i) {
            uint32_t b;
            std::memcpy(&b, &src[i], 4);
            q16[i] = uint16_t(b >> 16);
          }
        }
        swa_step_args_t a = ar.Args();
        a.q_dtype = dt, a.out_dtype = dt;
        std::vector<float> lse_sep(size_t(kT) * kHq, std::nanf(""));
        a.lse = lse_sep.data();
        ASSERT_EQ(swa_step(separate.cache(), separate.plan(), &a), SWA_OK) << swa_last_error();
        const size_t out_bytes = kQ * (dt == SWA_DTYPE_BF16 ? 2 : 4);
        const std::vector<uint8_t> out_sep = Bytes(&ar.f[Arena::kOut], out_bytes);
        a.out = &ar.f[Arena::kQ0];  // in place
        a.lse = &ar.f[Arena::kLse];
        ASSERT_EQ(swa_step(in_place.cache(), in_place.plan(), &a), SWA_OK) << swa_last_error();
        EXPECT_EQ(Bytes(&ar.f[Arena::kQ0], out_bytes), out_sep);
        EXPECT_EQ(Bytes(&ar.f[Arena::kLse], lse_sep.size() * 4),
                  Bytes(lse_sep.data(), lse_sep.size() * 4));
        EXPECT_EQ(in_place.Pool(), separate.Pool());
      }
}

// The graph step shares the check: the same refusal, rows n_seqs * tokens_per_seq.
TEST(StepOverlap, GraphStepRefusesTheSame) {
  swa_layer_desc_t l;
  swa_layer_desc_init(&l);
  l.q_heads = kHq, l.kv_heads = 1, l.head_dim = kD, l.shared_kv = true;
  swa_config_t c;
  swa_config_init(&c);
  c.backend = SWA_BACKEND_CPU, c.max_slots = 2, c.num_threads = 1, c.window = 8;
  c.num_layers = 1, c.layers = &l;
  swa_cache_t* cache = nullptr;
  ASSERT_EQ(swa_cache_create(&c, &cache), SWA_OK) << swa_last_error();
  uint32_t s[2];
  for (uint32_t& x : s) ASSERT_EQ(swa_slot_alloc(cache, &x), SWA_OK);
  swa_decode_graph_t* g = nullptr;
  ASSERT_EQ(swa_decode_graph_create(cache, 2, 1, &g), SWA_OK) << swa_last_error();
  ASSERT_EQ(swa_decode_graph_import(g, s, 2, nullptr), SWA_OK) << swa_last_error();
  const int32_t slots[2] = {int32_t(s[0]), int32_t(s[1])}, lens[2] = {1, 1};
  ASSERT_EQ(swa_decode_graph_plan(g, slots, lens, 2, nullptr), SWA_OK) << swa_last_error();
  std::vector<float> buf(4 * kHq * kD, 0.25f), k(2 * kD, 0.5f);
  swa_step_args_t a;
  swa_step_args_init(&a);
  a.q = buf.data(), a.k_new = k.data();
  a.out = buf.data() + kHq * kD + 1;  // the second row of q onwards, one element in
  std::vector<float> before = buf;
  ASSERT_EQ(swa_decode_graph_step(g, &a), SWA_INVALID_ARGUMENT);
  ExpectNamesBoth(swa_last_error(), "out", "q");
  EXPECT_EQ(buf, before);
  a.out = buf.data() + 2 * kHq * kD;  // right after q's 2 rows: apart
  EXPECT_EQ(swa_decode_graph_step(g, &a), SWA_OK) << swa_last_error();
  swa_decode_graph_destroy(g);
  swa_cache_destroy(cache);
}

TEST(MergeOverlap, InPlaceAllowedPartialRefused) {
  constexpr int64_t kRows = 6;
  constexpr size_t kO = size_t(kRows) * kD;
  // out_a, out_b, lse_a, lse_b, out, lse apart in one arena.
  constexpr size_t kA = 0, kB = 512, kLa = 1024, kLb = 1100, kOut = 1200, kL = 1500;
  std::vector<float> f(2048);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-2, 2);
  for (float& x : f) x = u(rng);
  auto args = [&](std::vector<float>& m) {
    swa_merge_args_t a;
    swa_merge_args_init(&a);
    a.rows = kRows, a.head_dim = kD;
    a.out_a = &m[kA], a.out_b = &m[kB], a.lse_a = &m[kLa], a.lse_b = &m[kLb];
    a.out = &m[kOut], a.lse = &m[kL];
    return a;
  };
  // A separate output first: the in-place forms must give these bits.
  std::vector<float> sep = f;
  swa_merge_args_t a = args(sep);
  ASSERT_EQ(swa_attention_merge(nullptr, &a), SWA_OK) << swa_last_error();
  const std::vector<float> want_out(sep.begin() + kOut, sep.begin() + kOut + kO),
      want_lse(sep.begin() + kL, sep.begin() + kL + kRows);
  for (int which : {0, 1}) {
    std::vector<float> m = f;
    a = args(m);
    a.out = const_cast<void*>(which == 0 ? a.out_a : a.out_b);
    a.lse = const_cast<float*>(which == 0 ? a.lse_a : a.lse_b);
    ASSERT_EQ(swa_attention_merge(nullptr, &a), SWA_OK) << swa_last_error();
    const float* o = static_cast<const float*>(a.out);
    EXPECT_EQ(std::memcmp(o, want_out.data(), kO * 4), 0) << "out == out_"
                                                          << "ab"[which];
    EXPECT_EQ(std::memcmp(a.lse, want_lse.data(), kRows * 4), 0);
  }
  struct MCase {
    const char* what;
    std::function<void(swa_merge_args_t&, std::vector<float>&)> edit;
    const char* first;
    const char* second;
  };
  const std::vector<MCase> cases = {
      {"out one element into out_a",
       [](swa_merge_args_t& x, std::vector<float>& m) { x.out = &m[kA + 1]; }, "out", "out_a"},
      {"out one row before out_b",
       [](swa_merge_args_t& x, std::vector<float>& m) { x.out = &m[kB - kD]; }, "out", "out_b"},
      {"out over lse_a", [](swa_merge_args_t& x, std::vector<float>& m) { x.out = &m[kLa - 10]; },
       "out", "lse_a"},
      {"out over lse_b", [](swa_merge_args_t& x, std::vector<float>& m) { x.out = &m[kLb + 2]; },
       "out", "lse_b"},
      {"lse partly over lse_a",
       [](swa_merge_args_t& x, std::vector<float>& m) { x.lse = &m[kLa + 1]; }, "lse", "lse_a"},
      {"lse over out_b", [](swa_merge_args_t& x, std::vector<float>& m) { x.lse = &m[kB + 5]; },
       "lse", "out_b"},
      {"lse over out", [](swa_merge_args_t& x, std::vector<float>& m) { x.lse = &m[kOut + 3]; },
       "lse", "out"},
      {"lse over out_a while out is out_a",
       [](swa_merge_args_t& x, std::vector<float>& m) { x.out = &m[kA], x.lse = &m[kA]; }, "lse",
       "out_a"},
  };
  swa_cache_t* cache = nullptr;
  {
    swa_layer_desc_t l;
    swa_layer_desc_init(&l);
    l.q_heads = 1, l.kv_heads = 1, l.head_dim = kD;
    swa_config_t c;
    swa_config_init(&c);
    c.backend = SWA_BACKEND_CPU, c.max_slots = 1, c.num_threads = 1, c.window = 8;
    c.num_layers = 1, c.layers = &l;
    ASSERT_EQ(swa_cache_create(&c, &cache), SWA_OK) << swa_last_error();
  }
  for (swa_cache_t* on : {static_cast<swa_cache_t*>(nullptr), cache})
    for (const MCase& c : cases) {
      SCOPED_TRACE(std::string(c.what) + (on ? ", cache" : ", no cache"));
      std::vector<float> m = f;
      a = args(m);
      c.edit(a, m);
      ASSERT_EQ(swa_attention_merge(on, &a), SWA_INVALID_ARGUMENT);
      ExpectNamesBoth(swa_last_error(), c.first, c.second);
      EXPECT_EQ(std::memcmp(m.data(), f.data(), f.size() * 4), 0);
    }
  swa_cache_destroy(cache);
}

TEST(ProjectOverlap, OutOverAnInputRefused) {
  swa_layer_desc_t l;
  swa_layer_desc_init(&l);
  l.q_heads = 1, l.kv_heads = 1, l.head_dim = kD;
  swa_config_t c;
  swa_config_init(&c);
  c.backend = SWA_BACKEND_CPU, c.max_slots = 1, c.num_threads = 1, c.window = 8;
  c.num_layers = 1, c.layers = &l;
  swa_cache_t* cache = nullptr;
  ASSERT_EQ(swa_cache_create(&c, &cache), SWA_OK) << swa_last_error();
  // hidden [4, 8] BF16 at 0, weight [8, 8] BF16 at 64 (uint16 units), out FP32 at 256.
  std::vector<uint16_t> m(1024, 0x3f80);
  for (const char* which : {"hidden", "weight"}) {
    swa_project_args_t a;
    swa_project_args_init(&a);
    a.hidden = &m[0], a.weight = &m[64], a.n_tokens = 4, a.hidden_dim = 8, a.q_dim = 4,
    a.kv_dim = 4;
    a.out = std::string(which) == "hidden" ? &m[30] : &m[64 + 62];
    const std::vector<uint16_t> before = m;
    ASSERT_EQ(swa_project(cache, &a), SWA_INVALID_ARGUMENT) << which;
    ExpectNamesBoth(swa_last_error(), "out", which);
    EXPECT_EQ(m, before);
    a.out = &m[256];
    EXPECT_EQ(swa_project(cache, &a), SWA_OK) << swa_last_error();
  }
  swa_cache_destroy(cache);
}

TEST(RopeOverlap, XOverPositionsRefused) {
  swa_layer_desc_t l;
  swa_layer_desc_init(&l);
  l.q_heads = 1, l.kv_heads = 1, l.head_dim = kD;
  l.rope_style = SWA_ROPE_NEOX, l.rope_dims = kD;
  std::vector<int32_t> m(4 * kD + 8, 3);  // x [4, 1, kD] FP32 as int32 storage, then positions
  swa_rope_args_t a;
  swa_rope_args_init(&a);
  a.layer = &l, a.heads = 1, a.tokens = 4;
  a.x = m.data();
  a.positions = &m[4 * kD - 1];  // its first value is x's last
  const std::vector<int32_t> before = m;
  ASSERT_EQ(swa_rope_apply(&a), SWA_INVALID_ARGUMENT);
  ExpectNamesBoth(swa_last_error(), "x", "positions");
  EXPECT_EQ(m, before);
  a.positions = &m[4 * kD];  // right after x
  EXPECT_EQ(swa_rope_apply(&a), SWA_OK) << swa_last_error();
}

TEST(CompressOverlap, OutOverAnInputRefused) {
  swa_layer_desc_t l;
  swa_layer_desc_init(&l);
  l.q_heads = 2, l.head_dim = kD, l.kv_format = SWA_FORMAT_FP32;
  l.compress_kind = SWA_COMPRESS_CSA, l.compress_ratio = 2, l.compress_head_dim = 4;
  swa_config_t c;
  swa_config_init(&c);
  c.backend = SWA_BACKEND_CPU, c.max_slots = 1, c.num_threads = 1, c.window = 4;
  c.draft_tokens = 1, c.num_layers = 1, c.layers = &l;
  swa_cache_t* cache = nullptr;
  swa_plan_t* plan = nullptr;
  ASSERT_EQ(swa_cache_create(&c, &cache), SWA_OK) << swa_last_error();
  ASSERT_EQ(swa_plan_create(cache, &plan), SWA_OK);
  swa_layout_t lay{sizeof lay};
  ASSERT_EQ(swa_cache_layout(cache, &lay), SWA_OK);
  const uint8_t* pool = swa_test::PoolBase(cache);
  ASSERT_NE(pool, nullptr) << swa_last_error();
  uint32_t slot = 0;
  ASSERT_EQ(swa_slot_alloc(cache, &slot), SWA_OK);
  const swa_seq_t seq{slot, 5, 5, 0};  // closes entries 0 and 1: out is [2, 4]
  ASSERT_EQ(swa_plan_build(plan, &seq, 1), SWA_OK) << swa_last_error();
  // kv [5, 8] at 0, gate [5, 8] at 64, bias [2, 8] at 128, weight [4] at 160, out at 192.
  std::vector<float> m(256, 0.25f);
  for (size_t i = 192; i < 200; ++i) m[i] = std::nanf("");
  auto args = [&]() {
    swa_compress_args_t a;
    swa_compress_args_init(&a);
    a.kv = &m[0], a.gate = &m[64], a.position_bias = &m[128], a.norm_weight = &m[160];
    a.row_width = 8, a.rows = 5, a.out = &m[192], a.out_rows = 2;
    return a;
  };
  const struct {
    size_t out_at;
    const char* second;
  } cases[] = {{3, "kv"}, {100, "gate"}, {140, "position_bias"}, {154, "norm_weight"}};
  const std::vector<float> before = m;
  const std::vector<uint8_t> pool_before(pool, pool + lay.pool_bytes);
  for (const auto& cs : cases) {
    SCOPED_TRACE(cs.second);
    swa_compress_args_t a = args();
    a.out = &m[cs.out_at];
    ASSERT_EQ(swa_compress_step(cache, plan, &a), SWA_INVALID_ARGUMENT);
    ExpectNamesBoth(swa_last_error(), "out", cs.second);
    EXPECT_EQ(std::memcmp(m.data(), before.data(), m.size() * 4), 0);
    EXPECT_EQ(std::memcmp(pool, pool_before.data(), pool_before.size()), 0);
  }
  const swa_compress_args_t a = args();
  EXPECT_EQ(swa_compress_step(cache, plan, &a), SWA_OK) << swa_last_error();
  for (size_t i = 192; i < 200; ++i) EXPECT_FALSE(std::isnan(m[i]));
  swa_plan_destroy(plan);
  swa_cache_destroy(cache);
}

}  // namespace
