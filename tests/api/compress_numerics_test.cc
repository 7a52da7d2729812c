// swa_compress_step's numerics on the CPU backend against an FP64 reference
// written here from docs/semantics.md, "Compression state": per feature a
// softmax over the window's present slots of gate + position_bias, the kv
// values weighted by it and summed, RMSNorm, then RoPE (interleaved pairs on
// the trailing compress_rope_dims dims, at position w c). HCA and CSA, FP32
// and BF16 rings, FP32 and BF16 inputs; a prefill, decode steps and a window
// closed by a draft that the next step rejects (it closes again with the
// accepted row). Edge inputs: huge logits (expf overflows without the max
// subtraction), all-equal logits, a -inf gate in one slot (weight 0) and in
// every slot of a window (0/0: NaN, as transformers' softmax), tiny and
// large kv, and one NaN or infinity in kv, gate, position_bias or
// norm_weight: an entry is non-finite exactly where the reference's is (the
// windows that read the value), every other entry within 1e-5 relative L2.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "api/test_layers.h"
#include "gtest/gtest.h"
#include "swacache.h"

namespace swa_test {
namespace {

constexpr int kRate = 4, kDim = 8, kRopeDims = 4, kDraft = 1;
constexpr double kTheta = 10000.0, kEps = 1e-6;
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

struct Shape {
  swa_compress_kind_t kind;
  swa_format_t row_format;
  swa_dtype_t dtype;
};

// The inputs of one scenario; an edit may change them (per position p rows of
// S values, bias [c, S], weight [d]).
struct Inputs {
  std::vector<std::vector<float>> kv, gate;  // [position][S]
  std::vector<float> bias, weight;
};

struct Scenario {
  std::string name;
  std::function<void(Inputs&, int S)> edit;
};

class Rig {
 public:
  explicit Rig(const Shape& s) : s_(s) {
    S_ = s.kind == SWA_COMPRESS_CSA ? 2 * kDim : kDim;
    swa_layer_desc_init(&l_);
    l_.q_heads = 2, l_.kv_heads = 1, l_.head_dim = 32, l_.kv_format = SWA_FORMAT_FP32;
    l_.compress_kind = s.kind, l_.compress_ratio = kRate, l_.compress_head_dim = kDim;
    l_.compress_rope_dims = kRopeDims, l_.compress_row_format = s.row_format;
    l_.rope_theta = float(kTheta);
    swa_config_t c;
    swa_config_init(&c);
    c.window = 8, c.draft_tokens = kDraft, c.max_slots = 1, c.backend = SWA_BACKEND_CPU;
    c.num_threads = 2, c.num_layers = 1, c.layers = &l_;
    EXPECT_EQ(swa_cache_create(&c, &cache_), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_plan_create(cache_, &plan_), SWA_OK);
    EXPECT_EQ(swa_slot_alloc(cache_, &slot_), SWA_OK);
  }
  ~Rig() {
    swa_plan_destroy(plan_);
    swa_cache_destroy(cache_);
  }
  int S() const { return S_; }
  // swa_slot_begin_replay(H): valid_start = max(0, H - W) (W = 8).
  int BeginReplay(int hit_len) {
    int32_t start = -1, len = -1;
    EXPECT_EQ(swa_slot_begin_replay(cache_, slot_, hit_len, &start, &len), SWA_OK)
        << swa_last_error();
    return start;
  }

  // One step over positions [q_start, q_start + n) from `in`; checks every
  // entry it emits.
  void Step(int q_start, int n, const Inputs& in, const std::string& what, int valid_start = 0) {
    SCOPED_TRACE(what + ", step at " + std::to_string(q_start) + " of " + std::to_string(n));
    const swa_seq_t seq = {slot_, n, q_start + n, valid_start};
    ASSERT_EQ(swa_plan_build(plan_, &seq, 1), SWA_OK) << swa_last_error();
    std::vector<swa_compress_window_t> wins(16);
    size_t count = 0;
    ASSERT_EQ(swa_plan_compress_windows(plan_, 0, wins.data(), wins.size(), &count), SWA_OK);
    const bool bf16_in = s_.dtype == SWA_DTYPE_BF16;
    std::vector<float> kv32, gate32;
    std::vector<uint16_t> kv16, gate16;
    for (int t = 0; t < n; ++t)
      for (int i = 0; i < S_; ++i) {
        const float k = in.kv[q_start + t][i], g = in.gate[q_start + t][i];
        kv32.push_back(k), gate32.push_back(g);
        kv16.push_back(Bf16(k)), gate16.push_back(Bf16(g));
      }
    std::vector<float> out(std::max<size_t>(count, 1) * kDim, kNaN);
    swa_compress_args_t a;
    swa_compress_args_init(&a);
    a.kv = bf16_in ? static_cast<const void*>(kv16.data()) : kv32.data();
    a.gate = bf16_in ? static_cast<const void*>(gate16.data()) : gate32.data();
    a.dtype = s_.dtype, a.row_width = uint32_t(S_), a.rows = n;
    a.position_bias = in.bias.data(), a.norm_weight = in.weight.data(), a.norm_eps = float(kEps);
    a.out = out.data(), a.out_rows = out.size() / kDim;
    ASSERT_EQ(swa_compress_step(cache_, plan_, &a), SWA_OK) << swa_last_error();
    for (size_t k = 0; k < count; ++k) {
      // The windows of positions < q_start + n: rows of the accepted inputs.
      std::vector<double> want = Reference(wins[k].entry, in, q_start + n, valid_start);
      CheckEntry(wins[k].entry, &out[k * kDim], want);
    }
  }

 private:
  static uint16_t Bf16(float x) { return std::isnan(x) ? uint16_t(0x7FC0) : ToBf16(x); }
  // A value as the compressor reads it: BF16-rounded where the ring or the input is BF16.
  double Read(float x) const {
    if (s_.row_format == SWA_FORMAT_BF16 || s_.dtype == SWA_DTYPE_BF16)
      return std::isnan(x) ? double(x) : double(FromBf16(ToBf16(x)));
    return x;
  }

  std::vector<double> Reference(int w, const Inputs& in, int end, int valid_start) const {
    const bool csa = s_.kind == SWA_COMPRESS_CSA;
    const int slots = csa ? 2 * kRate : kRate, a = csa ? (w - 1) * kRate : w * kRate;
    std::vector<double> x(kDim);
    for (int f = 0; f < kDim; ++f) {
      std::vector<double> logit, value;
      for (int j = 0; j < slots; ++j) {
        const int p = a + j;
        if (p < 0 || p < valid_start) continue;  // missing: zero weight
        EXPECT_LT(p, end);
        const bool cb = csa && j >= kRate;
        const int vi = cb ? kDim + f : f, br = cb ? j - kRate : j;
        // gate + bias is one FP32 addition (its rounding is the definition's:
        // at 3e4 it moves a weight by 1e-3); the rest in FP64.
        logit.push_back(float(Read(in.gate[p][vi])) + in.bias[size_t(br) * S_ + vi]);
        value.push_back(Read(in.kv[p][vi]));
      }
      double m = -INFINITY, sum = 0, acc = 0;
      for (double l : logit)
        if (!std::isnan(l)) m = std::max(m, l);  // a NaN logit makes the sum NaN
      for (double l : logit) sum += std::exp(l - m);
      for (size_t j = 0; j < logit.size(); ++j) acc += value[j] * (std::exp(logit[j] - m) / sum);
      x[f] = acc;
    }
    double ss = 0;
    for (double v : x) ss += v * v;
    const double r = 1.0 / std::sqrt(ss / kDim + kEps);
    for (int f = 0; f < kDim; ++f) x[f] = x[f] * r * in.weight[f];
    const int first = kDim - kRopeDims;
    for (int i = 0; i < kRopeDims / 2; ++i) {
      const double fr = std::pow(kTheta, -2.0 * i / kRopeDims), ang = double(w) * kRate * fr;
      const double u = x[first + 2 * i], v = x[first + 2 * i + 1];
      x[first + 2 * i] = u * std::cos(ang) - v * std::sin(ang);
      x[first + 2 * i + 1] = v * std::cos(ang) + u * std::sin(ang);
    }
    return x;
  }

  void CheckEntry(int w, const float* got, const std::vector<double>& want) {
    double err2 = 0, ref2 = 0;
    for (int f = 0; f < kDim; ++f) {
      if (!std::isfinite(want[f])) {
        EXPECT_FALSE(std::isfinite(got[f])) << "entry " << w << " feature " << f << ": "
                                            << got[f] << ", want non-finite";
        continue;
      }
      EXPECT_TRUE(std::isfinite(got[f])) << "entry " << w << " feature " << f << ": " << got[f]
                                         << ", want " << want[f];
      if (!std::isfinite(got[f])) continue;
      err2 += (got[f] - want[f]) * (got[f] - want[f]);
      ref2 += want[f] * want[f];
    }
    EXPECT_LE(std::sqrt(err2), 1e-5 * std::sqrt(ref2) + 1e-30) << "entry " << w;
  }

  Shape s_;
  int S_ = 0;
  swa_layer_desc_t l_;
  swa_cache_t* cache_ = nullptr;
  swa_plan_t* plan_ = nullptr;
  uint32_t slot_ = 0;
};

constexpr int kPositions = 24;

Inputs RandomInputs(int S, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  Inputs in;
  in.kv.assign(kPositions + 1, std::vector<float>(S));
  in.gate.assign(kPositions + 1, std::vector<float>(S));
  for (auto& r : in.kv)
    for (float& x : r) x = u(rng);
  for (auto& r : in.gate)
    for (float& x : r) x = u(rng);
  in.bias.resize(size_t(kRate) * S);
  for (float& x : in.bias) x = u(rng);
  in.weight.resize(kDim);
  for (float& x : in.weight) x = 0.5f + 0.25f * u(rng);
  return in;
}

// Prefill of 9, decode steps of 2 (the second token a draft), each step
// after the first rejecting the previous step's draft with a new row: the
// draft at 11 closes window 2, which the next step closes again.
void RunScenario(const Shape& s, const Scenario& sc) {
  Rig rig(s);
  Inputs in = RandomInputs(rig.S(), 7);
  sc.edit(in, rig.S());
  rig.Step(0, 9, in, sc.name);
  int accepted = 10;  // after the step at 9: position 9 accepted, 10 a draft
  rig.Step(9, 2, in, sc.name);
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  while (accepted + 2 <= kPositions && !::testing::Test::HasFatalFailure()) {
    // Reject the draft at `accepted`: its row changes (unless the scenario
    // poisoned that position, kept as is).
    Inputs next = in;
    for (int i = 0; i < rig.S(); ++i)
      if (std::isfinite(in.kv[accepted][i]) && std::fabs(in.kv[accepted][i]) < 10)
        next.kv[accepted][i] = u(rng);
    in = next;
    rig.Step(accepted, 2, in, sc.name);
    accepted += 1;
  }
}

std::vector<Scenario> Scenarios() {
  std::vector<Scenario> v;
  v.push_back({"random", [](Inputs&, int) {}});
  v.push_back({"huge logits", [](Inputs& in, int) {
                 std::mt19937_64 rng(3);
                 std::uniform_real_distribution<float> u(-1.0f, 1.0f);
                 for (auto& r : in.gate)
                   for (float& x : r) x = 1e30f * u(rng);
               }});
  v.push_back({"huge logits, close", [](Inputs& in, int) {
                 for (auto& r : in.gate)
                   for (float& x : r) x = 3e4f + x;  // exp overflows without the max
               }});
  v.push_back({"all-equal logits", [](Inputs& in, int) {
                 for (auto& r : in.gate)
                   for (float& x : r) x = 0.75f;
                 for (float& x : in.bias) x = 0;
               }});
  v.push_back({"-inf gate at one position", [](Inputs& in, int) {
                 for (float& x : in.gate[5]) x = -kInf;
               }});
  v.push_back({"-inf gate in a whole window", [](Inputs& in, int) {
                 for (int p = 4; p < 8; ++p)
                   for (float& x : in.gate[p]) x = -kInf;
               }});
  v.push_back({"-inf bias row", [](Inputs& in, int S) {
                 for (int i = 0; i < S; ++i) in.bias[size_t(1) * S + i] = -kInf;
               }});
  v.push_back({"tiny kv", [](Inputs& in, int) {
                 for (auto& r : in.kv)
                   for (float& x : r) x *= 1e-20f;
               }});
  v.push_back({"large kv", [](Inputs& in, int) {
                 for (auto& r : in.kv)
                   for (float& x : r) x *= 1e15f;
               }});
  v.push_back({"denormal kv", [](Inputs& in, int) {
                 for (auto& r : in.kv)
                   for (float& x : r) x *= 1e-39f;
               }});
  for (float bad : {kNaN, kInf, -kInf}) {
    const std::string b = std::isnan(bad) ? "NaN" : bad > 0 ? "+inf" : "-inf";
    auto add = [&](const std::string& n, std::function<void(Inputs&, int)> e) {
      v.push_back({n + " " + b, std::move(e)});
    };
    add("kv Ca/HCA feature at 6", [bad](Inputs& in, int) { in.kv[6][2] = bad; });
    add("kv Cb/last feature at 13", [bad](Inputs& in, int S) { in.kv[13][S - 1] = bad; });
    add("gate at 6", [bad](Inputs& in, int) { in.gate[6][3] = bad; });
    add("gate at 14", [bad](Inputs& in, int S) { in.gate[14][S - 2] = bad; });
    add("bias row 2 first half", [bad](Inputs& in, int S) { in.bias[size_t(2) * S + 1] = bad; });
    add("bias row 0 last", [bad](Inputs& in, int S) { in.bias[size_t(0) * S + S - 1] = bad; });
    add("norm_weight 1", [bad](Inputs& in, int) { in.weight[1] = bad; });
    add("norm_weight rotary", [bad](Inputs& in, int) { in.weight[kDim - 1] = bad; });
  }
  return v;
}

class CompressNumerics : public ::testing::TestWithParam<Shape> {};

TEST_P(CompressNumerics, MatchesTheFp64ReferenceNonFiniteExactlyWhereItIs) {
  for (const Scenario& sc : Scenarios()) {
    RunScenario(GetParam(), sc);
    if (HasFatalFailure()) return;
  }
}

std::vector<Shape> Shapes() {
  std::vector<Shape> v;
  for (swa_compress_kind_t k : {SWA_COMPRESS_HCA, SWA_COMPRESS_CSA})
    for (swa_format_t f : {SWA_FORMAT_FP32, SWA_FORMAT_BF16})
      for (swa_dtype_t d : {SWA_DTYPE_FP32, SWA_DTYPE_BF16}) v.push_back({k, f, d});
  return v;
}

std::string ShapeName(const ::testing::TestParamInfo<Shape>& i) {
  std::string n = i.param.kind == SWA_COMPRESS_CSA ? "Csa" : "Hca";
  n += i.param.row_format == SWA_FORMAT_BF16 ? "Bf16Ring" : "Fp32Ring";
  n += i.param.dtype == SWA_DTYPE_BF16 ? "Bf16In" : "Fp32In";
  return n;
}

// After a bounded replay (valid_start 7): the windows that straddle it pool
// only their slots at or above it (docs/semantics.md, "Compression state":
// missing slots carry zero weight), then decode steps with rejected drafts.
TEST_P(CompressNumerics, ReplayedWindowsPoolOnlyPresentSlots) {
  for (const char* name : {"replay random", "replay huge logits"}) {
    Rig rig(GetParam());
    Inputs in = RandomInputs(rig.S(), 13);
    if (std::string(name) == "replay huge logits")
      for (auto& r : in.gate)
        for (float& x : r) x *= 1e30f;
    const int v = rig.BeginReplay(15);
    ASSERT_EQ(v, 7);
    rig.Step(7, 8, in, name, v);
    for (int q = 15; q + 2 <= kPositions && !HasFatalFailure(); ++q) {
      in.kv[q][0] += 0.5f;  // the previous step's draft at q is rejected: a new row
      rig.Step(q, 2, in, name, v);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, CompressNumerics, ::testing::ValuesIn(Shapes()), ShapeName);

}  // namespace
}  // namespace swa_test
