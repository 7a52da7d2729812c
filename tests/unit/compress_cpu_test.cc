// The CPU compressor (backend/cpu/compress_cpu.cc) computes, bit for bit, the
// per-feature arithmetic of common/compress_entry.h (CompressPoolFeature,
// CompressNorm, then the interleaved RoPE of common/rope.h) that a device
// kernel may run per (window, feature): random windows of HCA and CSA
// geometry with missing, ring and new slots, FP32 and BF16 rings and inputs.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/compress_cpu.h"
#include "common/compress_entry.h"
#include "common/rope.h"
#include "gtest/gtest.h"

namespace swa {
namespace {

TEST(CompressCpu, MatchesTheSharedPerFeatureArithmeticBitForBit) {
  std::mt19937 rng(2026);
  std::normal_distribution<float> nd(0.0f, 1.5f);
  for (CompressKind kind : {CompressKind::kHca, CompressKind::kCsa}) {
    for (Format fmt : {Format::kFp32, Format::kBf16}) {
      for (Dtype dt : {Dtype::kFp32, Dtype::kBf16}) {
        const int32_t rate = 4, L = (kind == CompressKind::kCsa ? 8 : 4) + 2;
        const uint32_t d = 16, sv = kind == CompressKind::kCsa ? 2 * d : d;
        const uint32_t vb = fmt == Format::kBf16 ? 2 : 4, ib = dt == Dtype::kBf16 ? 2 : 4;
        const uint32_t row_bytes = 2 * sv * vb;
        std::vector<uint8_t> ring(2 * L * row_bytes);
        for (size_t i = 0; i < ring.size() / vb; ++i) {
          const float v = nd(rng);
          if (vb == 2) {
            const uint16_t h = codec::Bf16FromFloat(v);
            std::memcpy(&ring[i * 2], &h, 2);
          } else {
            std::memcpy(&ring[i * 4], &v, 4);
          }
        }
        const int T = 12;
        std::vector<uint8_t> kv(T * sv * ib), gate(T * sv * ib);
        for (auto* buf : {&kv, &gate})
          for (size_t i = 0; i < buf->size() / ib; ++i) {
            const float v = nd(rng);
            if (ib == 2) {
              const uint16_t h = codec::Bf16FromFloat(v);
              std::memcpy(&(*buf)[i * 2], &h, 2);
            } else {
              std::memcpy(&(*buf)[i * 4], &v, 4);
            }
          }
        std::vector<float> bias(rate * sv), weight(d);
        for (float& b : bias) b = nd(rng);
        for (float& w : weight) w = 1.0f + 0.1f * nd(rng);
        const CompressGeometry g{kind, rate, L};
        const int32_t S = CompressWindowSlots(g);
        // Windows with every split: missing, ring (wrapping), new.
        std::vector<CompressWindow> wins;
        for (int32_t miss = 0; miss <= 2; ++miss)
          for (int32_t ring_n = 0; ring_n + miss <= S; ring_n += 3) {
            const int32_t nn = S - miss - ring_n;
            if (nn > T) continue;
            wins.push_back({0, 1, 5, 5 * rate, 5 * rate - (S - rate), miss, ring_n,
                            ring_n ? static_cast<int32_t>(rng() % L) : 0, nn,
                            nn ? static_cast<int32_t>(rng() % (T - nn + 1)) : 0});
          }
        RopeTable rope;
        rope.style = RopeStyle::kGptj;
        rope.dims = 8;
        rope.attention_factor = 1.25f;
        for (int i = 0; i < 4; ++i) rope.inv_freq.push_back(std::pow(160000.0f, -0.25f * i));
        std::vector<float> out(wins.size() * d, NAN);
        CompressWork w;
        w.geometry = g;
        w.entry_dim = d;
        w.row_values = sv;
        w.row_format = fmt;
        w.ring_base = ring.data();
        w.slot_bytes = static_cast<uint64_t>(L) * row_bytes;
        w.row_bytes = row_bytes;
        w.windows = wins.data();
        w.n_windows = wins.size();
        w.kv = kv.data();
        w.gate = gate.data();
        w.dtype = dt;
        w.n_tokens = T;
        w.position_bias = bias.data();
        w.norm_weight = weight.data();
        w.norm_eps = 1e-6f;
        w.out = out.data();
        w.rope = &rope;
        cpu::CompressCpu(w, nullptr);
        for (size_t k = 0; k < wins.size(); ++k) {
          const CompressWindow& win = wins[k];
          std::vector<CompressSlotSrc> src(S);
          for (int32_t j = 0; j < S; ++j) {
            if (j < win.n_missing) {
              src[j] = {nullptr, nullptr, false, false};
            } else if (j < win.n_missing + win.n_ring) {
              const uint8_t* p =
                  ring.data() + w.slot_bytes +
                  ((win.ring_row + j - win.n_missing) % L) * uint64_t{row_bytes};
              src[j] = {p, p + sv * vb, vb == 2, false};
            } else {
              const size_t t = win.new_row + (j - win.n_missing - win.n_ring);
              src[j] = {kv.data() + t * sv * ib, gate.data() + t * sv * ib, ib == 2,
                        vb == 2 && ib == 4};
            }
          }
          std::vector<float> x(d);
          for (uint32_t f = 0; f < d; ++f)
            x[f] = CompressPoolFeature(g, d, sv, src.data(), bias.data(), f);
          CompressNorm(x.data(), d, weight.data(), 1e-6f);
          for (uint32_t i = 0; i < 4; ++i) {
            float c, s;
            RopeAngle(static_cast<float>(win.position), rope.inv_freq[i], rope.attention_factor,
                      &c, &s);
            RotatePair(&x[d - 8 + 2 * i], &x[d - 8 + 2 * i + 1], c, s);
          }
          ASSERT_EQ(std::memcmp(x.data(), &out[k * d], d * sizeof(float)), 0)
              << "kind " << int(kind) << " fmt " << int(fmt) << " dtype " << int(dt) << " window "
              << k << " (missing " << win.n_missing << ", ring " << win.n_ring << ")";
        }
      }
    }
  }
}

}  // namespace
}  // namespace swa
