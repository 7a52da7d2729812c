// NaN and Inf in a step's inputs through the public API (docs/semantics.md,
// "Attention", "Logit soft-cap", "Softmax statistics (LSE)"; docs/cpu_attention.md,
// "NaN safety"; docs/cuda_backend.md: a -inf score weighs 0): one NaN or
// infinity in q, k_new, v_new or a sink, in the prefill (staged path) or in a
// decode step (ring-only path), with and without RoPE (de-rotated outputs),
// soft-cap and sinks, on FP32, BF16 and MXFP8 rings with FP32 and BF16 queries.
// Every output value and LSE is compared with an FP64 reference written here
// over the keys and values the ring holds (read back through the layer view
// and decoded here): a value the reference makes non-finite must be
// non-finite, every other one finite and within the step tests' budget. Also
// a row whose every score is -inf (a -inf key dim under a positive query dim):
// zeros and LSE -inf without a sink, the sink's logit with one. And RoPE
// positions given per token (repeats, decreasing, near 2^24 and 2^31 - 1),
// rotated in the reference with the documented FP32 angle.
// Registered once per forced attention path (tests/CMakeLists.txt).
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "api/forced_attention_path.h"
#include "api/test_layers.h"
#include "gtest/gtest.h"
#include "swacache.h"

namespace swa_test {
namespace {

constexpr int kHq = 4, kHkv = 2, kD = 64, kWindow = 8, kDraft = 3;  // R = 12, 5 ring tokens
constexpr int kRopeFirst = 32, kRopeDims = 32;
constexpr double kTheta = 10000.0;
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

enum class Input { kQ, kK, kV, kSink, kAllKeysMinusInf };

struct Shape {
  swa_format_t format;
  swa_dtype_t q_dtype;
  bool rope, sinks;
  float softcap;
};

struct Poison {
  Input input;
  float value;
  int position;  // cache position of the poisoned token (q, k, v)
  int head;      // query head (q, sink) or KV head (k, v)
  int dim;
};

// One value of a decoded ring vector (the formats of docs/semantics.md, "MXFP8").
double E4m3(uint8_t c) {
  const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  return s ? -mag : mag;
}

std::vector<double> DecodeVector(const uint8_t* p, swa_format_t f) {
  std::vector<double> v(kD);
  for (int i = 0; i < kD; ++i) {
    if (f == SWA_FORMAT_FP32) {
      float x;
      std::memcpy(&x, p + 4 * i, 4);
      v[i] = x;
    } else if (f == SWA_FORMAT_BF16) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      v[i] = FromBf16(h);
    } else {
      const uint8_t scale = p[kD + i / 32];
      v[i] = scale == 0xFF ? std::numeric_limits<double>::quiet_NaN()
                           : E4m3(p[i]) * std::ldexp(1.0, int(scale) - 127);
    }
  }
  return v;
}

// GPTJ rotation of dims [kRopeFirst, kRopeFirst + kRopeDims) by `angle_sign`
// times the documented FP32 angle fl(fl(p) f_i), f_i the layer's FP32 table
// (docs/semantics.md, "RoPE inside the step"; tests/api/rope_apply_test.cc
// checks the table), cos and sin in FP64.
void Rotate(double* x, int32_t p, double angle_sign, const std::vector<float>& freq) {
  for (int i = 0; i < kRopeDims / 2; ++i) {
    const float angle = static_cast<float>(p) * freq[i];
    const double a = angle_sign * double(angle), c = std::cos(a), s = std::sin(a);
    double& u = x[kRopeFirst + 2 * i];
    double& w = x[kRopeFirst + 2 * i + 1];
    const double u0 = u, w0 = w;
    u = u0 * c - w0 * s;
    w = w0 * c + u0 * s;
  }
}

class Run {
 public:
  explicit Run(const Shape& s) : s_(s) {
    swa_layer_desc_init(&l_);
    l_.q_heads = kHq, l_.kv_heads = kHkv, l_.head_dim = kD, l_.kv_format = s.format;
    l_.shared_kv = 0;
    l_.has_sinks = s.sinks, l_.logit_softcap = s.softcap;
    if (s.rope) {
      l_.rope_style = SWA_ROPE_GPTJ, l_.rope_first_dim = kRopeFirst, l_.rope_dims = kRopeDims;
      l_.rope_theta = float(kTheta), l_.rope_derotate_output = 1;
    }
    swa_config_t c;
    swa_config_init(&c);
    c.window = kWindow, c.draft_tokens = kDraft, c.max_slots = 1, c.backend = SWA_BACKEND_CPU;
    c.num_threads = 2, c.num_layers = 1, c.layers = &l_;
    EXPECT_EQ(swa_cache_create(&c, &cache_), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_plan_create(cache_, &plan_), SWA_OK);
    EXPECT_EQ(swa_slot_alloc(cache_, &slot_), SWA_OK);
    view_.struct_size = sizeof view_;
    EXPECT_EQ(swa_cache_layer_view(cache_, 0, &view_), SWA_OK);
    if (s.rope) {
      freq_.resize(kRopeDims / 2);
      swa_rope_info_t info;
      info.struct_size = sizeof info;
      EXPECT_EQ(swa_rope_table(&l_, freq_.data(), uint32_t(freq_.size()), &info), SWA_OK);
      EXPECT_EQ(info.attention_factor, 1.0f);
    }
    sinks_.resize(kHq);
    for (float& x : sinks_) x = U(-1.0, 1.0);
  }
  ~Run() {
    swa_plan_destroy(plan_);
    swa_cache_destroy(cache_);
  }

  double U(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }

  // One step of n tokens from position p0 (the poison applied where it falls);
  // checks every output and LSE against the reference.
  // `positions`: the step's RoPE positions (swa_step_args_t::positions), or
  // empty for the cache positions.
  void Step(int n, const Poison& poison, const std::vector<int32_t>& positions = {}) {
    const int p0 = int(keys_.size());
    const swa_seq_t seq = {slot_, n, p0 + n, 0};
    ASSERT_EQ(swa_plan_build(plan_, &seq, 1), SWA_OK) << swa_last_error();
    std::vector<float> q(size_t(n) * kHq * kD), k(size_t(n) * kHkv * kD), v(k.size());
    for (float& x : q) x = float(U(-1, 1));
    for (float& x : k) x = float(U(-1, 1));
    for (float& x : v) x = float(U(-1, 1));
    if (poison.input == Input::kAllKeysMinusInf) {
      // Every key of KV head 0 holds -inf at dim 3; head 0's queries are
      // positive there, so their every score is -inf.
      for (int t = 0; t < n; ++t) {
        k[(size_t(t) * kHkv + 0) * kD + 3] = -kInf;
        for (int h = 0; h < kHq / kHkv; ++h) q[(size_t(t) * kHq + h) * kD + 3] = float(U(0.5, 1));
      }
    }
    const int t = poison.position - p0;
    if (t >= 0 && t < n) {
      if (poison.input == Input::kQ) q[(size_t(t) * kHq + poison.head) * kD + poison.dim] = poison.value;
      if (poison.input == Input::kK) k[(size_t(t) * kHkv + poison.head) * kD + poison.dim] = poison.value;
      if (poison.input == Input::kV) v[(size_t(t) * kHkv + poison.head) * kD + poison.dim] = poison.value;
    }
    std::vector<uint16_t> q16;
    if (s_.q_dtype == SWA_DTYPE_BF16) {
      for (float x : q) q16.push_back(ToBf16(x));
      for (size_t i = 0; i < q.size(); ++i) q[i] = std::isnan(q[i]) ? q[i] : FromBf16(q16[i]);
      for (size_t i = 0; i < q.size(); ++i)
        if (std::isnan(q[i])) q16[i] = 0x7FC0;
    }
    std::vector<float> out(q.size(), kNaN), lse(size_t(n) * kHq, 12345.0f);
    swa_step_args_t a;
    swa_step_args_init(&a);
    a.q = s_.q_dtype == SWA_DTYPE_BF16 ? static_cast<const void*>(q16.data()) : q.data();
    a.q_dtype = s_.q_dtype;
    a.k_new = k.data(), a.v_new = v.data(), a.out = out.data(), a.lse = lse.data();
    if (!positions.empty()) a.positions = positions.data();
    if (s_.sinks) a.sinks = sinks_.data();
    ASSERT_EQ(swa_step(cache_, plan_, &a), SWA_OK) << swa_last_error();
    // The keys and values the ring now holds for the step's positions.
    const uint8_t* base = static_cast<const uint8_t*>(view_.data) + slot_ * view_.strides[0];
    const int R = int(view_.shape[1]);
    for (int j = 0; j < n; ++j) {
      const uint8_t* row = base + ((p0 + j) % R) * view_.strides[1];
      std::vector<std::vector<double>> kk, vv;
      for (int g = 0; g < kHkv; ++g) {
        kk.push_back(DecodeVector(row + g * view_.strides[2], s_.format));
        vv.push_back(DecodeVector(row + (kHkv + g) * view_.strides[2], s_.format));
      }
      keys_.push_back(kk);
      values_.push_back(vv);
    }
    for (int j = 0; j < n; ++j)
      for (int h = 0; h < kHq; ++h)
        CheckRow(p0 + j, positions.empty() ? p0 + j : positions[j], h, &q[(size_t(j) * kHq + h) * kD], &out[(size_t(j) * kHq + h) * kD],
                 lse[size_t(j) * kHq + h], poison);
  }

  std::vector<float> sinks_;

 private:
  void CheckRow(int p, int32_t rope_p, int h, const float* q32, const float* got, float got_lse,
                const Poison& poison) {
    const int g = h / (kHq / kHkv);
    std::vector<double> q(q32, q32 + kD);
    if (s_.rope) Rotate(q.data(), rope_p, 1.0, freq_);
    const double scale = 1.0 / std::sqrt(double(kD));
    const int lo = std::max(0, p - kWindow + 1);
    std::vector<double> z;
    for (int j = lo; j <= p; ++j) {
      double dot = 0;
      for (int e = 0; e < kD; ++e) dot += q[e] * keys_[j][g][e];
      double zj = scale * dot;
      if (s_.softcap > 0) zj = s_.softcap * std::tanh(zj / s_.softcap);
      z.push_back(zj);
    }
    const double sink = s_.sinks ? double(sinks_[h]) : -INFINITY;
    double m = sink;
    bool nan = std::isnan(sink);
    for (double zj : z) nan = nan || std::isnan(zj), m = std::max(m, zj);
    // A -inf score (or sink) weighs 0, also while m is -inf.
    auto weight = [&](double x) { return x == -INFINITY ? 0.0 : std::exp(x - m); };
    double l = s_.sinks ? weight(sink) : 0.0;
    std::vector<double> o(kD, 0.0);
    for (size_t j = 0; j < z.size(); ++j) {
      const double w = weight(z[j]);
      l += w;
      for (int e = 0; e < kD; ++e) o[e] += w * values_[lo + j][g][e];
    }
    double want_lse = l > 0 ? m + std::log(l) : -INFINITY;
    if (s_.sinks && sink == -INFINITY && l == 0) want_lse = -INFINITY;
    for (int e = 0; e < kD; ++e) o[e] = l != 0 ? o[e] / l : 0.0;
    if (nan || std::isnan(l)) {
      for (double& x : o) x = NAN;
      want_lse = NAN;
    }
    if (s_.rope) Rotate(o.data(), rope_p, -1.0, freq_);
    const std::string where = "position " + std::to_string(p) + " head " + std::to_string(h);
    // Values: non-finite exactly where the reference is.
    double err2 = 0, ref2 = 0, vmax = 0;
    for (int e = 0; e < kD; ++e) {
      if (!std::isfinite(o[e])) {
        EXPECT_FALSE(std::isfinite(got[e])) << where << " dim " << e << ": " << got[e]
                                            << ", want non-finite";
        continue;
      }
      ASSERT_TRUE(std::isfinite(got[e])) << where << " dim " << e << ": " << got[e] << ", want "
                                         << o[e];
      err2 += (got[e] - o[e]) * (got[e] - o[e]);
      ref2 += o[e] * o[e];
      vmax = std::max(vmax, std::fabs(o[e]));
    }
    // The step tests' budgets (tests/api/step_harness.h): relative L2 1e-5 for
    // FP32 queries; BF16 queries without RoPE on a BF16/MXFP8 ring may take
    // the BF16 kernels (P rounded to BF16): 2^-8 max|v| per value.
    const bool bf16_path = s_.q_dtype == SWA_DTYPE_BF16 && !s_.rope && s_.format != SWA_FORMAT_FP32;
    const double tol = bf16_path ? std::ldexp(1.0, -8) * 1.0625 * std::sqrt(double(kD)) + 1e-5 * std::sqrt(ref2)
                                 : 1e-5 * std::sqrt(ref2) + 1e-30;
    EXPECT_LE(std::sqrt(err2), tol) << where << " (" << poison_name_ << ")";
    // LSE: the same class for non-finite values, else within 1e-4.
    if (std::isnan(want_lse)) {
      EXPECT_TRUE(std::isnan(got_lse)) << where << ": lse " << got_lse << ", want NaN";
    } else if (std::isinf(want_lse)) {
      EXPECT_EQ(got_lse, float(want_lse)) << where;
    } else {
      EXPECT_NEAR(got_lse, want_lse, 1e-4 * std::max(1.0, std::fabs(want_lse))) << where;
    }
  }

 public:
  std::string poison_name_;

 private:
  Shape s_;
  swa_layer_desc_t l_;
  swa_cache_t* cache_ = nullptr;
  swa_plan_t* plan_ = nullptr;
  uint32_t slot_ = 0;
  swa_tensor_view_t view_{};
  std::mt19937_64 rng_{2026};
  std::vector<float> freq_;
  std::vector<std::vector<std::vector<double>>> keys_, values_;  // [p][g][e]
};

const char* Name(Input i) {
  switch (i) {
    case Input::kQ: return "q";
    case Input::kK: return "k_new";
    case Input::kV: return "v_new";
    case Input::kSink: return "sink";
    case Input::kAllKeysMinusInf: return "all keys -inf";
  }
  return "?";
}

// Prefill of 12 (staged), then three decode steps of 3 (ring-only).
void RunScenario(const Shape& s, const Poison& poison) {
  swa_test::Run r(s);
  r.poison_name_ = std::string(Name(poison.input)) + " = " + std::to_string(poison.value) +
                   " at position " + std::to_string(poison.position) + " head " +
                   std::to_string(poison.head) + " dim " + std::to_string(poison.dim);
  SCOPED_TRACE(r.poison_name_);
  if (poison.input == Input::kSink) r.sinks_[poison.head] = poison.value;
  // Head 0 of an all -inf row with a -inf sink too: still empty (0, LSE -inf).
  if (poison.input == Input::kAllKeysMinusInf && s.sinks) r.sinks_[0] = -kInf;
  r.Step(12, poison);
  for (int i = 0; i < 3 && !::testing::Test::HasFatalFailure(); ++i) r.Step(3, poison);
}

class StepNonfinite : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override {
    const std::string missing = ForcedAttentionPathMissing();
    if (!missing.empty()) GTEST_SKIP() << missing;
  }
};

TEST_P(StepNonfinite, PoisonReachesExactlyTheRowsThatSeeIt) {
  const Shape& s = GetParam();
  std::vector<Poison> cases;
  for (int pos : {5, 14}) {  // prefill, second decode step
    for (float v : {kNaN, kInf, -kInf}) {
      cases.push_back({Input::kQ, v, pos, 1, kRopeFirst + 3});  // a rotary dim
      cases.push_back({Input::kQ, v, pos, 2, 7});
      cases.push_back({Input::kK, v, pos, 0, 9});
      cases.push_back({Input::kK, v, pos, 1, kRopeFirst + 6});
      cases.push_back({Input::kV, v, pos, 1, 40});
      cases.push_back({Input::kV, v, pos, 0, 2});
    }
  }
  if (s.sinks)
    for (float v : {kNaN, kInf, -kInf}) cases.push_back({Input::kSink, v, 0, 3, 0});
  cases.push_back({Input::kAllKeysMinusInf, 0, -1, 0, 0});
  for (const Poison& p : cases) {
    RunScenario(s, p);
    if (HasFatalFailure()) return;
  }
}

std::vector<Shape> Setups() {
  std::vector<Shape> v;
  for (swa_format_t f : {SWA_FORMAT_FP32, SWA_FORMAT_BF16, SWA_FORMAT_MXFP8})
    for (swa_dtype_t qd : {SWA_DTYPE_FP32, SWA_DTYPE_BF16})
      for (bool rope : {false, true})
        for (bool sinks : {false, true})
          for (float cap : {0.0f, 5.0f}) v.push_back({f, qd, rope, sinks, cap});
  v.push_back({SWA_FORMAT_FP32, SWA_DTYPE_FP32, true, true, 1e30f});  // a cap that never bites
  return v;
}

std::string SetupName(const ::testing::TestParamInfo<Shape>& i) {
  const Shape& s = i.param;
  std::string n = s.format == SWA_FORMAT_FP32 ? "Fp32" : s.format == SWA_FORMAT_BF16 ? "Bf16" : "Mxfp8";
  n += s.q_dtype == SWA_DTYPE_BF16 ? "QBf16" : "QFp32";
  n += s.rope ? "Rope" : "";
  n += s.sinks ? "Sinks" : "";
  n += s.softcap > 1e6f ? "HugeCap" : s.softcap > 0 ? "Cap" : "";
  return n;
}

// RoPE positions given per token (swa_step_args_t::positions) with repeats,
// decreasing values and values near 2^24 and 2^31 - 1, prefill and decode,
// against the reference rotating by the same positions with the documented
// FP32 angle; one NaN in a key of the prefill as well.
TEST_P(StepNonfinite, ArbitraryRopePositions) {
  const Shape& s = GetParam();
  if (!s.rope) GTEST_SKIP() << "no RoPE";
  swa_test::Run r(s);
  r.poison_name_ = "positions";
  const Poison nan_key = {Input::kK, kNaN, 3, 1, 0};
  r.Step(12, nan_key, {7, 7, 7, 3, 2, 1, 0, 16777215, 16777216, 16777217, 2147483647, 2147483647});
  r.Step(3, nan_key, {1073741824, 5, 5});
  r.Step(3, nan_key, {2147483646, 0, 123456789});
}

INSTANTIATE_TEST_SUITE_P(All, StepNonfinite, ::testing::ValuesIn(Setups()), SetupName);

}  // namespace
}  // namespace swa_test
