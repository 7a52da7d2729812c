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

namespace swa_reference {

struct DenseShape {
  int q_heads, kv_heads, head_dim, window;
  bool shared_kv;
  double scale;
  const float* sinks;  // [Hq] or nullptr
};

// keys/values: [n_pos, Hkv, D] (already dequantised through the layer format);
// q: [Hq, D] of the token at `p`; out: [Hq, D].
inline void DenseAttention(const DenseShape& s, const std::vector<float>& keys,
                           const std::vector<float>& values, int n_pos, int p, int valid_start,
                           const float* q, double* out) {
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
      m = std::max(m, z[j]);
    }
    double denom = s.sinks ? std::exp(double(s.sinks[h]) - m) : 0.0;
    std::fill(acc.begin(), acc.end(), 0.0);
    const std::vector<float>& vals = s.shared_kv ? keys : values;
    for (int j = 0; j < n_pos; ++j) {
      if (z[j] == neg_inf) continue;
      const double e = std::exp(z[j] - m);
      denom += e;
      const float* v = &vals[(size_t(j) * s.kv_heads + g) * D];
      for (int d = 0; d < D; ++d) acc[d] += e * double(v[d]);
    }
    for (int d = 0; d < D; ++d) out[h * D + d] = denom > 0 ? acc[d] / denom : 0.0;
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
  };
  ReferenceModel(int window, std::vector<Layer> layers)
      : window_(window), layers_(std::move(layers)) {}

  // Records the new K/V ([seqlen_q, Hkv, D] FP32 as given to swa_step) of
  // positions q_start ... q_start + seqlen_q - 1 and drops everything after.
  void Write(int seq, int layer, int q_start, int seqlen_q, const float* k, const float* v) {
    const Layer& c = layers_[layer];
    const size_t tok = size_t(c.kv_heads) * c.head_dim;
    const std::vector<float> kin(k, k + seqlen_q * tok);
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

  // Expected output [Hq, D] of the token at `p` with query q [Hq, D].
  void Expected(int seq, int layer, int p, int valid_start, const float* q, double* out) const {
    const Layer& c = layers_[layer];
    const History& h = hist_.at({seq, layer});
    const DenseShape shape{c.q_heads, c.kv_heads, c.head_dim, window_, c.shared_kv,
                           1.0 / std::sqrt(double(c.head_dim)),
                           c.sinks.empty() ? nullptr : c.sinks.data()};
    DenseAttention(shape, h.k, h.v, h.n, p, valid_start, q, out);
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
inline double RelativeL2(const float* got, const double* want, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace swa_reference
