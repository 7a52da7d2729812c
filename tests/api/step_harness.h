// Drives sequences through swa_plan_build + swa_step over the public API and
// checks every output against the FP64 dense reference of the accepted tokens.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "api/forced_attention_path.h"
#include "api/test_layers.h"
#include "common/dense_reference.h"
#include "gtest/gtest.h"
#include "swacache.h"
#include "test_random.h"

namespace swa_test {

using namespace swa_reference;  // the FP64 oracle shared with the demo

// Whether the step may take the AVX512-BF16 attention kernels for BF16
// queries: SWACACHE_ATTENTION does not force an FP32 set (portable, avx2,
// avx512) and the CPU has AVX512-BF16.
inline bool Bf16AttentionMayRun() {
  const char* env = std::getenv("SWACACHE_ATTENTION");
  const std::string want = env != nullptr ? env : "";
  if (want == "portable" || want == "avx2" || want == "avx512") return false;
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

struct StepSeq {
  uint32_t slot;
  int32_t seqlen_q, seqlen_k, valid_start;
};

class StepHarness {
 public:
  // Odd layers are dropped (not persisted) unless `all_stored`. `threads` is
  // the backend's num_threads; `ring_len` the config's (0: W + N + 1).
  StepHarness(uint32_t window, uint32_t draft, std::vector<LayerCfg> layers, uint32_t slots,
              uint64_t seed, bool all_stored = false, uint32_t threads = 2,
              uint32_t ring_len = 0)
      : cfg_(std::move(layers)), rng_(seed), window_(window), model_(int(window), {}) {
    for (size_t i = 0; i < cfg_.size(); ++i) {
      const swa_layer_desc_t d =
          ToDesc(cfg_[i], i % 2 && !all_stored ? SWA_LAYER_DROPPED : SWA_LAYER_STORED);
      descs_.push_back(d);
      std::vector<float> sinks(cfg_[i].q_heads);
      for (float& s : sinks) s = Uniform(-1.5, 1.5);
      sinks_.push_back(sinks);
    }
    swa_config_t c;
    swa_config_init(&c);
    c.window = window;
    c.draft_tokens = draft;
    c.max_slots = slots;
    c.backend = SWA_BACKEND_CPU;
    c.num_threads = threads;
    c.ring_len = ring_len;
    c.num_layers = uint32_t(descs_.size());
    c.layers = descs_.data();
    std::vector<ReferenceModel::Layer> ref_layers;
    for (size_t i = 0; i < cfg_.size(); ++i) {
      const LayerCfg& c = cfg_[i];
      Rope rope;
      rope.style = c.rope_style;
      rope.first = c.rope_first;
      rope.dims = c.rope_dims;
      rope.theta = c.rope_theta;
      rope.yarn_factor = c.yarn_factor;
      rope.original_max = c.yarn_original;
      rope.truncate = c.yarn_truncate;
      rope.attention_factor = c.rope_attention_factor;
      rope.derotate = c.derotate;
      ref_layers.push_back({c.format, c.q_heads, c.kv_heads, c.head_dim, c.shared_kv,
                            c.sinks ? sinks_[i] : std::vector<float>(), rope, c.softcap});
    }
    model_ = ReferenceModel(int(window), std::move(ref_layers));
    EXPECT_EQ(swa_cache_create(&c, &cache_), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_plan_create(cache_, &plan_), SWA_OK) << swa_last_error();
    swa_layout_t lay;
    lay.struct_size = sizeof lay;
    swa_cache_layout(cache_, &lay);
    ring_len_ = lay.ring_len;
    valid_.assign(slots, 0);
  }
  ~StepHarness() {
    swa_plan_destroy(plan_);
    swa_cache_destroy(cache_);
  }

  swa_cache_t* cache() { return cache_; }
  swa_plan_t* plan() { return plan_; }
  uint32_t ring_len() const { return ring_len_; }
  double max_error() const { return max_error_; }
  // Largest relative L2 error of the steps checked against the BF16-P budget.
  double bf16_max_error() const { return bf16_max_error_; }
  double Uniform(double lo, double hi) { return swa_test::UniformReal<double>(lo, hi)(rng_); }
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  void SetValidStart(uint32_t slot, int32_t v) { valid_[slot] = v; }
  // The sequence in slot `from` continues in slot `to` (restore, fork by copy).
  void MoveSequence(uint32_t from, uint32_t to) {
    model_.Move(int(from), int(to));
    valid_[to] = valid_[from];
  }

  // Builds the plan and runs every layer with fresh random inputs; checks the
  // outputs. Returns false (with a gtest failure) when anything is off.
  bool Step(const std::vector<StepSeq>& seqs, swa_dtype_t q_dtype, swa_dtype_t kv_dtype,
            swa_dtype_t out_dtype) {
    std::vector<swa_seq_t> in;
    int T = 0;
    for (const StepSeq& s : seqs) {
      in.push_back({s.slot, s.seqlen_q, s.seqlen_k, s.valid_start});
      T += s.seqlen_q;
    }
    if (swa_plan_build(plan_, in.data(), uint32_t(in.size())) != SWA_OK) {
      ADD_FAILURE() << "plan build: " << swa_last_error();
      return false;
    }
    for (const StepSeq& s : seqs) valid_[s.slot] = std::max(valid_[s.slot], s.valid_start);
    for (size_t l = 0; l < cfg_.size(); ++l)
      if (!RunLayer(l, seqs, T, q_dtype, kv_dtype, out_dtype)) return false;
    return true;
  }

  // swa_step_args_t::softmax_scale of the following steps (0: the layer's).
  void SetStepScale(float scale) { step_scale_ = scale; }

  // Outputs of the last step, last layer run, converted to float: [T, Hq, D].
  const std::vector<float>& last_output() const { return last_out_; }

 private:
  std::vector<float> RandomTensor(size_t n, double amp, swa_dtype_t dtype, std::vector<uint8_t>* raw) {
    std::vector<float> f(n);
    raw->resize(n * (dtype == SWA_DTYPE_FP32 ? 4 : 2));
    for (size_t i = 0; i < n; ++i) {
      float x = float(Uniform(-amp, amp));
      if (std::fabs(x) < 1e-3) x = 0.5f;  // never zeros
      if (dtype == SWA_DTYPE_BF16) {
        const uint16_t h = ToBf16(x);
        std::memcpy(raw->data() + 2 * i, &h, 2);
        x = FromBf16(h);
      } else {
        std::memcpy(raw->data() + 4 * i, &x, 4);
      }
      f[i] = x;
    }
    return f;
  }

  bool RunLayer(size_t l, const std::vector<StepSeq>& seqs, int T, swa_dtype_t q_dtype,
                swa_dtype_t kv_dtype, swa_dtype_t out_dtype) {
    const LayerCfg& c = cfg_[l];
    const size_t qn = size_t(T) * c.q_heads * c.head_dim, kn = size_t(T) * c.kv_heads * c.head_dim;
    std::vector<uint8_t> q_raw, k_raw, v_raw;
    const std::vector<float> q = RandomTensor(qn, 1.0, q_dtype, &q_raw);
    const std::vector<float> k = RandomTensor(kn, 2.0, kv_dtype, &k_raw);
    const std::vector<float> v = RandomTensor(kn, 2.0, kv_dtype, &v_raw);
    vmax_.resize(cfg_.size(), 0.0);
    for (float x : c.shared_kv ? k : v) vmax_[l] = std::max(vmax_[l], double(std::fabs(x)));
    const size_t out_elem = out_dtype == SWA_DTYPE_FP32 ? 4 : 2;
    std::vector<uint8_t> out(qn * out_elem, 0xFF);  // poison: NaN in both dtypes

    swa_step_args_t a;
    swa_step_args_init(&a);
    a.layer = uint32_t(l);
    a.q = q_raw.data();
    a.q_dtype = q_dtype;
    a.k_new = k_raw.data();
    a.v_new = c.shared_kv ? nullptr : v_raw.data();
    a.kv_dtype = kv_dtype;
    a.out = out.data();
    a.out_dtype = out_dtype;
    a.sinks = c.sinks ? sinks_[l].data() : nullptr;
    a.softmax_scale = step_scale_;
    std::vector<float> lse(size_t(T) * c.q_heads, std::numeric_limits<float>::quiet_NaN());
    a.lse = lse.data();
    if (swa_step(cache_, plan_, &a) != SWA_OK) {
      ADD_FAILURE() << "swa_step layer " << l << ": " << swa_last_error();
      return false;
    }

    // Reference: record each sequence's new K/V, then attend densely, with
    // the scale the step's value (when set) or else the layer's names.
    const double scale = step_scale_ != 0 ? step_scale_ : c.softmax_scale;
    const size_t tok = size_t(c.kv_heads) * c.head_dim;
    const size_t qtok = size_t(c.q_heads) * c.head_dim;
    std::vector<double> ref(qn), ref_lse(size_t(T) * c.q_heads);
    int t0 = 0;
    for (const StepSeq& s : seqs) {
      const int q_start = s.seqlen_k - s.seqlen_q;
      model_.Write(int(s.slot), int(l), q_start, s.seqlen_q, k.data() + t0 * tok,
                   v.data() + t0 * tok);
      for (int j = 0; j < s.seqlen_q; ++j)
        model_.Expected(int(s.slot), int(l), q_start + j, valid_[s.slot], q.data() + (t0 + j) * qtok,
                        ref.data() + (t0 + j) * qtok, ref_lse.data() + size_t(t0 + j) * c.q_heads,
                        scale);
      t0 += s.seqlen_q;
    }
    last_out_.resize(qn);
    for (size_t i = 0; i < qn; ++i) {
      if (out_dtype == SWA_DTYPE_FP32) {
        std::memcpy(&last_out_[i], out.data() + 4 * i, 4);
      } else {
        uint16_t hbits;
        std::memcpy(&hbits, out.data() + 2 * i, 2);
        last_out_[i] = FromBf16(hbits);
      }
    }
    const double err = RelativeL2(last_out_.data(), ref.data(), qn);
    max_error_ = std::max(max_error_, err);
    const double tol = out_dtype == SWA_DTYPE_FP32 ? 1e-5 : 1e-2;
    // BF16 queries on an MXFP8/BF16 ring without RoPE may take the BF16
    // kernels, which round P to BF16 for P.V (docs/cpu_attention.md, "Paths"):
    // |out - ref| <= 2^-8 * max|v| per element (+ the FP32 budget). max|v| is
    // over every V vector written to the layer, times 1 + 2^-4 for MXFP8's
    // rounding of it.
    const bool bf16_path = q_dtype == SWA_DTYPE_BF16 && c.rope_style == SWA_ROPE_NONE &&
                           (c.format == SWA_FORMAT_MXFP8 || c.format == SWA_FORMAT_BF16) &&
                           out_dtype == SWA_DTYPE_FP32 && Bf16AttentionMayRun();
    if (bf16_path && err > tol) {
      double ref_max = 0;
      for (size_t i = 0; i < qn; ++i) ref_max = std::max(ref_max, std::fabs(ref[i]));
      const double bound = std::ldexp(1.0, -8) * vmax_[l] * 1.0625 + 1e-5 * ref_max;
      for (size_t i = 0; i < qn; ++i)
        if (!(std::fabs(last_out_[i] - ref[i]) <= bound)) {
          ADD_FAILURE() << "layer " << l << " (BF16 path): out[" << i << "] = " << last_out_[i]
                        << ", want " << ref[i] << " within " << bound;
          return false;
        }
      bf16_max_error_ = std::max(bf16_max_error_, err);
    } else if (err > tol) {
      ADD_FAILURE() << "layer " << l << ": relative L2 error " << err << " > " << tol;
      return false;
    }
    // The LSE is FP32 arithmetic on FP32 scores (BF16 only rounds the output).
    for (size_t i = 0; i < lse.size(); ++i)
      if (!(std::fabs(lse[i] - ref_lse[i]) <= 1e-4 * std::max(1.0, std::fabs(ref_lse[i])))) {
        ADD_FAILURE() << "layer " << l << ": lse[" << i << "] = " << lse[i] << ", want "
                      << ref_lse[i];
        return false;
      }
    return true;
  }

  std::vector<LayerCfg> cfg_;
  std::vector<swa_layer_desc_t> descs_;
  std::vector<std::vector<float>> sinks_;
  std::mt19937_64 rng_;
  uint32_t window_;
  uint32_t ring_len_ = 0;
  swa_cache_t* cache_ = nullptr;
  swa_plan_t* plan_ = nullptr;
  ReferenceModel model_;
  float step_scale_ = 0;
  std::vector<int32_t> valid_;
  std::vector<float> last_out_;
  double max_error_ = 0;
  double bf16_max_error_ = 0;  // relative L2 of steps that took the BF16 budget
  std::vector<double> vmax_;   // per layer: max |v| ever written
};

}  // namespace swa_test
