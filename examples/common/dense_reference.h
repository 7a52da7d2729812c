// FP64 dense band-mask attention (docs/semantics.md, "Window" and
// "Attention"), written independently of the library: every key of the
// sequence is kept, positions outside [max(0, v, p - W + 1), p] are masked with
// -inf, softmax over the whole row. The `swacache demo` checks its outputs with
// it and the step tests use it as their oracle; it calls the public API only
// (for the codec round trip that keys go through).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "swacache.h"

// The sanitizer trees check the library; the reference's inner loops are test
// code and, instrumented, were most of their run time. clang does not inline
// instrumented functions (std::vector::operator[], std::max) into an
// uninstrumented one, so the inner loops use raw pointers.
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 8)
#define SWA_REFERENCE_UNSANITIZED __attribute__((no_sanitize("address", "undefined", "thread")))
#else
#define SWA_REFERENCE_UNSANITIZED
#endif

namespace swa_reference {

struct DenseShape {
  int q_heads, kv_heads, head_dim, window;
  bool shared_kv;
  double scale;
  const float* sinks;  // [Hq] or nullptr
  double softcap = 0;  // > 0: z = softcap * tanh(z / softcap)
  double* lse = nullptr;  // [Hq] out: ln of the softmax denominator, or nullptr
};

// RoPE as the references (Hugging Face transformers) compute it, written here
// independently of the library: FP32 frequencies (plain, or YaRN in the
// reference's operation order), FP32 angle and cos/sin, FP32 rotation without
// fused multiply-adds.
struct Rope {
  swa_rope_style_t style = SWA_ROPE_NONE;
  int first = 0, dims = 0;
  float theta = 10000.0f;
  float yarn_factor = 0, beta_fast = 32, beta_slow = 1;
  int original_max = 4096;
  bool truncate = true;
  float attention_factor = 0;  // 0 = default
  bool derotate = false;

  bool on() const { return style != SWA_ROPE_NONE; }
  std::vector<float> InvFreq() const {
    const int half = dims / 2;
    std::vector<float> f(half);
    std::vector<float> pos(half);
    for (int i = 0; i < half; ++i) pos[i] = std::pow(theta, float(2 * i) / float(dims));
    if (!(yarn_factor > 1.0f)) {
      for (int i = 0; i < half; ++i) f[i] = 1.0f / pos[i];
      return f;
    }
    auto corr = [&](double r) {
      return double(dims) * std::log(double(original_max) / (r * 2.0 * M_PI)) /
             (2.0 * std::log(double(theta)));
    };
    double lo = corr(beta_fast), hi = corr(beta_slow);
    if (truncate) lo = std::floor(lo), hi = std::ceil(hi);
    lo = std::max(lo, 0.0);
    hi = std::min(hi, double(dims - 1));
    if (lo == hi) hi += 0.001;
    for (int i = 0; i < half; ++i) {
      float ramp = (float(i) - float(lo)) / float(hi - lo);
      ramp = std::min(1.0f, std::max(0.0f, ramp));
      const float e = 1.0f - ramp;
      f[i] = (1.0f / (yarn_factor * pos[i])) * (1.0f - e) + (1.0f / pos[i]) * e;
    }
    return f;
  }
  float Factor() const {
    if (attention_factor > 0) return attention_factor;
    return yarn_factor > 1.0f ? float(0.1 * std::log(double(yarn_factor)) + 1.0) : 1.0f;
  }
  void Pair(int i, int* a, int* b) const {
    if (style == SWA_ROPE_GPTJ) *a = first + 2 * i, *b = first + 2 * i + 1;
    else *a = first + i, *b = first + i + dims / 2;
  }
  // Rotates `heads` head vectors of `d` floats in place by position p.
  void Rotate(float* v, int heads, int d, int p) const {
    if (!on()) return;
    const std::vector<float> f = InvFreq();
    const float af = Factor();
    for (int i = 0; i < dims / 2; ++i) {
      const float angle = float(p) * f[i];
      const float c = std::cos(angle) * af, s = std::sin(angle) * af;
      int a, b;
      Pair(i, &a, &b);
      for (int h = 0; h < heads; ++h) {
        float* x = v + size_t(h) * d;
        const float xa = x[a], xb = x[b];
        const float t1 = xa * c, t2 = xb * s, t3 = xb * c, t4 = xa * s;
        x[a] = t1 - t2;
        x[b] = t3 + t4;
      }
    }
  }
  // The inverse rotation (no attention factor) in FP64 of an output row.
  void Derotate(double* v, int heads, int d, int p) const {
    if (!on() || !derotate) return;
    const std::vector<float> f = InvFreq();
    for (int i = 0; i < dims / 2; ++i) {
      const float angle = float(p) * f[i];
      const double c = std::cos(angle), s = std::sin(angle);
      int a, b;
      Pair(i, &a, &b);
      for (int h = 0; h < heads; ++h) {
        double* x = v + size_t(h) * d;
        const double xa = x[a], xb = x[b];
        x[a] = xa * c + xb * s;
        x[b] = xb * c - xa * s;
      }
    }
  }
};

// keys/values: [n_pos, Hkv, D] (already dequantised through the layer format);
// q: [Hq, D] of the token at `p`; out: [Hq, D].
SWA_REFERENCE_UNSANITIZED inline void DenseAttention(const DenseShape& s,
                                                     const std::vector<float>& keys,
                                                     const std::vector<float>& values, int n_pos,
                                                     int p, int valid_start, const float* q,
                                                     double* out) {
  const int D = s.head_dim;
  const int group = s.q_heads / s.kv_heads;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  std::vector<double> z(n_pos), acc(D);
  for (int h = 0; h < s.q_heads; ++h) {
    const int g = h / group;
    double m = s.sinks ? double(s.sinks[h]) : neg_inf;
    for (int j = 0; j < n_pos; ++j) {
      const bool visible = j <= p && j >= valid_start && j >= p - s.window + 1;
      if (!visible) {
        z[j] = neg_inf;
        continue;
      }
      double dot = 0;
      const float* k = &keys[(size_t(j) * s.kv_heads + g) * D];
      for (int d = 0; d < D; ++d) dot += double(q[h * D + d]) * double(k[d]);
      z[j] = s.scale * dot;
      if (s.softcap > 0) z[j] = s.softcap * std::tanh(z[j] / s.softcap);
      m = std::max(m, z[j]);
    }
    double denom = s.sinks ? std::exp(double(s.sinks[h]) - m) : 0.0;
    std::fill(acc.begin(), acc.end(), 0.0);
    double* a = acc.data();  // raw pointers in the inner loops (see SWA_REFERENCE_UNSANITIZED)
    const std::vector<float>& vals = s.shared_kv ? keys : values;
    for (int j = 0; j < n_pos; ++j) {
      if (z[j] == neg_inf) continue;
      const double e = std::exp(z[j] - m);
      denom += e;
      const float* v = &vals[(size_t(j) * s.kv_heads + g) * D];
      for (int d = 0; d < D; ++d) a[d] += e * double(v[d]);
    }
    for (int d = 0; d < D; ++d) out[h * D + d] = denom > 0 ? acc[d] / denom : 0.0;
    if (s.lse != nullptr) s.lse[h] = denom > 0 ? m + std::log(denom) : neg_inf;
  }
}

// `x` ([n, dim] FP32) encoded in `format` and decoded again: what the ring holds.
inline std::vector<float> ThroughFormat(swa_format_t format, uint32_t dim,
                                        const std::vector<float>& x) {
  const size_t n = x.size() / dim;
  uint32_t vb = 0;
  std::vector<float> back(x.size(), std::numeric_limits<float>::quiet_NaN());
  if (swa_format_vector_bytes(format, dim, &vb) != SWA_OK) return back;
  std::vector<uint8_t> bytes(n * vb);
  if (swa_codec_encode(format, SWA_SCALE_CEIL, x.data(), SWA_DTYPE_FP32, n, dim, bytes.data(),
                       nullptr) != SWA_OK ||
      swa_codec_decode(format, bytes.data(), n, dim, back.data(), SWA_DTYPE_FP32, nullptr) !=
          SWA_OK)
    std::fill(back.begin(), back.end(), std::numeric_limits<float>::quiet_NaN());
  return back;
}

// Keeps, per (sequence id, layer), the dequantised K/V of every position the
// engine has written, rewinds included, and computes the dense reference.
class ReferenceModel {
 public:
  struct Layer {
    swa_format_t format;
    int q_heads, kv_heads, head_dim;
    bool shared_kv;
    std::vector<float> sinks;  // empty = no sinks
    Rope rope = {};
    double softcap = 0;
  };
  ReferenceModel(int window, std::vector<Layer> layers)
      : window_(window), layers_(std::move(layers)) {}

  // Records the new K/V ([seqlen_q, Hkv, D] FP32 as given to swa_step) of
  // positions q_start ... q_start + seqlen_q - 1 and drops everything after.
  void Write(int seq, int layer, int q_start, int seqlen_q, const float* k, const float* v) {
    const Layer& c = layers_[layer];
    const size_t tok = size_t(c.kv_heads) * c.head_dim;
    std::vector<float> kin(k, k + seqlen_q * tok);
    for (int t = 0; t < seqlen_q; ++t)
      c.rope.Rotate(kin.data() + t * tok, c.kv_heads, c.head_dim, q_start + t);
    const std::vector<float> kq = ThroughFormat(c.format, c.head_dim, kin);
    std::vector<float> vq = kq;
    if (!c.shared_kv) vq = ThroughFormat(c.format, c.head_dim, std::vector<float>(v, v + seqlen_q * tok));
    History& h = hist_[{seq, layer}];
    h.k.resize(size_t(q_start + seqlen_q) * tok, std::numeric_limits<float>::quiet_NaN());
    h.v.resize(h.k.size(), std::numeric_limits<float>::quiet_NaN());
    std::copy(kq.begin(), kq.end(), h.k.begin() + q_start * tok);
    std::copy(vq.begin(), vq.end(), h.v.begin() + q_start * tok);
    h.n = q_start + seqlen_q;
  }

  // Expected output [Hq, D] (and LSE [Hq] when `lse`) of the token at `p`
  // with query q [Hq, D] (before any RoPE). `scale` multiplies the scores;
  // 0 = 1/sqrt(head_dim).
  void Expected(int seq, int layer, int p, int valid_start, const float* q, double* out,
                double* lse = nullptr, double scale = 0) const {
    const Layer& c = layers_[layer];
    const History& h = hist_.at({seq, layer});
    DenseShape shape{c.q_heads, c.kv_heads, c.head_dim, window_, c.shared_kv,
                     scale != 0 ? scale : 1.0 / std::sqrt(double(c.head_dim)),
                     c.sinks.empty() ? nullptr : c.sinks.data()};
    shape.softcap = c.softcap;
    shape.lse = lse;
    std::vector<float> qr(q, q + size_t(c.q_heads) * c.head_dim);
    c.rope.Rotate(qr.data(), c.q_heads, c.head_dim, p);
    DenseAttention(shape, h.k, h.v, h.n, p, valid_start, qr.data(), out);
    c.rope.Derotate(out, c.q_heads, c.head_dim, p);
  }

  const Layer& layer(int i) const { return layers_[i]; }

  // The sequence's history now lives under another id (e.g. a restored slot).
  void Move(int from, int to) {
    if (from == to) return;
    for (int l = 0; l < int(layers_.size()); ++l) {
      auto it = hist_.find({from, l});
      if (it == hist_.end()) continue;
      hist_[{to, l}] = std::move(it->second);
      hist_.erase(it);
    }
  }

 private:
  struct History {
    std::vector<float> k, v;
    int n = 0;
  };
  int window_;
  std::vector<Layer> layers_;
  std::map<std::pair<int, int>, History> hist_;
};

// ||got - want|| / ||want||; +inf when anything is not finite.
SWA_REFERENCE_UNSANITIZED inline double RelativeL2(const float* got, const double* want, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace swa_reference
