// Per-token RoPE positions (swa_step_args_t::positions): RoPE rotates q, the
// new keys and the de-rotated output by the caller's positions, while the
// ring rows, the window and the causal mask keep the cache positions.
// Checked against the FP64 dense reference (examples/common/dense_reference.h,
// whose rotation is written independently of the library) fed with keys
// rotated by the given positions, for
//  - a packed batch: two prompts in one sequence, positions restarting at 0,
//    then decode steps continuing the second prompt's positions;
//  - a left-padded batch: two sequences, the shorter one's cache positions
//    start at its padding (valid_start hides it) while its RoPE positions
//    start at 0; prefill (staged path) then decode (ring path).
// Also: NULL positions equal the cache positions bit for bit; a negative
// position is INVALID_ARGUMENT naming t and the value and writes nothing.
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/dense_reference.h"
#include "gtest/gtest.h"
#include "swacache.h"
#include "test_random.h"

namespace {

using swa_reference::DenseAttention;
using swa_reference::DenseShape;
using swa_reference::Rope;
using swa_reference::ThroughFormat;

constexpr int kHq = 4, kHkv = 2, kWindow = 8;

struct PosCase {
  const char* name;
  swa_rope_style_t style;
  int first, dims, head_dim;
  float yarn_factor;
  bool shared_kv, derotate;
  swa_format_t format;
};

// One cache of one RoPE layer, and per slot the keys and values the FP64
// reference sees at every cache position (rotated by the positions given).
class Rig {
 public:
  explicit Rig(const PosCase& pc) : pc_(pc) {
    swa_layer_desc_init(&l_);
    l_.q_heads = kHq, l_.kv_heads = kHkv, l_.head_dim = uint32_t(pc.head_dim);
    l_.shared_kv = pc.shared_kv, l_.kv_format = pc.format;
    l_.rope_style = pc.style, l_.rope_first_dim = uint32_t(pc.first);
    l_.rope_dims = uint32_t(pc.dims), l_.rope_theta = 20000.0f;
    l_.rope_yarn_factor = pc.yarn_factor, l_.rope_yarn_original_max_positions = 32;
    l_.rope_derotate_output = pc.derotate;
    swa_config_t c;
    swa_config_init(&c);
    c.window = kWindow, c.draft_tokens = 1, c.max_slots = 4, c.backend = SWA_BACKEND_CPU;
    c.num_layers = 1, c.layers = &l_;
    EXPECT_EQ(swa_cache_create(&c, &cache_), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_plan_create(cache_, &plan_), SWA_OK);
    rope_.style = pc.style, rope_.first = pc.first, rope_.dims = pc.dims, rope_.theta = 20000.0f;
    rope_.yarn_factor = pc.yarn_factor, rope_.original_max = 32, rope_.derotate = pc.derotate;
  }
  ~Rig() {
    swa_plan_destroy(plan_);
    swa_cache_destroy(cache_);
  }
  uint32_t Alloc() {
    uint32_t s = 0;
    EXPECT_EQ(swa_slot_alloc(cache_, &s), SWA_OK);
    return s;
  }
  swa_cache_t* cache() { return cache_; }
  swa_plan_t* plan() { return plan_; }

  // One step of `seqs` with RoPE positions `pos` ([T]); checks every output
  // row against the FP64 reference.
  void StepAndCheck(const std::vector<swa_seq_t>& seqs, const std::vector<int32_t>& pos,
                    uint32_t seed) {
    const int d = pc_.head_dim, T = int(pos.size());
    std::mt19937 rng(seed);
    swa_test::UniformReal<float> u(-1.5f, 1.5f);
    std::vector<float> q(size_t(T) * kHq * d), k(size_t(T) * kHkv * d), v(k.size());
    for (float& x : q) x = u(rng);
    for (float& x : k) x = u(rng);
    for (float& x : v) x = u(rng);
    ASSERT_EQ(swa_plan_build(plan_, seqs.data(), uint32_t(seqs.size())), SWA_OK)
        << swa_last_error();
    std::vector<float> out(q.size(), std::nanf(""));
    swa_step_args_t a;
    swa_step_args_init(&a);
    a.q = q.data(), a.k_new = k.data(), a.v_new = pc_.shared_kv ? nullptr : v.data();
    a.out = out.data(), a.positions = pos.data();
    ASSERT_EQ(swa_step(cache_, plan_, &a), SWA_OK) << swa_last_error();

    const size_t tok = size_t(kHkv) * d;
    int t0 = 0;
    for (const swa_seq_t& s : seqs) {
      History& h = hist_[s.slot];
      const int first = s.seqlen_k - s.seqlen_q;
      h.keys.resize(size_t(s.seqlen_k) * tok), h.values.resize(h.keys.size());
      for (int i = 0; i < s.seqlen_q; ++i) {
        std::vector<float> kr(k.begin() + (t0 + i) * tok, k.begin() + (t0 + i + 1) * tok);
        rope_.Rotate(kr.data(), kHkv, d, pos[t0 + i]);
        const std::vector<float> kq = ThroughFormat(pc_.format, uint32_t(d), kr);
        std::copy(kq.begin(), kq.end(), h.keys.begin() + (first + i) * tok);
        const std::vector<float> vq =
            pc_.shared_kv ? kq
                          : ThroughFormat(pc_.format, uint32_t(d),
                                          std::vector<float>(v.begin() + (t0 + i) * tok,
                                                             v.begin() + (t0 + i + 1) * tok));
        std::copy(vq.begin(), vq.end(), h.values.begin() + (first + i) * tok);
      }
      h.valid_start = std::max(h.valid_start, s.valid_start);
      for (int i = 0; i < s.seqlen_q; ++i) {
        const int t = t0 + i, p = first + i;
        std::vector<float> qr(q.begin() + size_t(t) * kHq * d, q.begin() + size_t(t + 1) * kHq * d);
        rope_.Rotate(qr.data(), kHq, d, pos[t]);
        DenseShape sh{kHq, kHkv, d, kWindow, pc_.shared_kv, 1.0 / std::sqrt(double(d)), nullptr};
        std::vector<double> ref(size_t(kHq) * d);
        DenseAttention(sh, h.keys, h.values, s.seqlen_k, p, h.valid_start, qr.data(), ref.data());
        rope_.Derotate(ref.data(), kHq, d, pos[t]);
        for (size_t e = 0; e < ref.size(); ++e)
          ASSERT_NEAR(out[size_t(t) * kHq * d + e], ref[e], 2e-5 + 2e-5 * std::fabs(ref[e]))
              << pc_.name << ": token " << t << " (cache position " << p << ", RoPE position "
              << pos[t] << ") element " << e;
      }
      t0 += s.seqlen_q;
    }
  }

 private:
  struct History {
    std::vector<float> keys, values;  // [position, Hkv, D]
    int valid_start = 0;
  };
  PosCase pc_;
  swa_layer_desc_t l_;
  swa_cache_t* cache_ = nullptr;
  swa_plan_t* plan_ = nullptr;
  Rope rope_;
  std::map<uint32_t, History> hist_;
};

std::vector<uint8_t> Ring(swa_cache_t* cache) {
  swa_tensor_view_t view;
  view.struct_size = sizeof view;
  EXPECT_EQ(swa_cache_layer_view(cache, 0, &view), SWA_OK);
  const uint8_t* p = static_cast<const uint8_t*>(view.data);
  return std::vector<uint8_t>(p, p + view.shape[1] * view.strides[1]);
}

class StepPositions : public ::testing::TestWithParam<PosCase> {};

// Prompt A (5 tokens, positions 0..4) and prompt B (6 tokens, positions
// 0..5) packed into one sequence, then B decodes on (positions 6, 7, 8 at
// cache positions 11, 12, 13) and a two-token step (ring path).
TEST_P(StepPositions, PackedBatch) {
  Rig r(GetParam());
  const uint32_t s = r.Alloc();
  r.StepAndCheck({{s, 11, 11, 0}}, {0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5}, 1);
  r.StepAndCheck({{s, 1, 12, 0}}, {6}, 2);
  r.StepAndCheck({{s, 2, 14, 0}}, {7, 8}, 3);
}

// A batch of two prompts left-padded to 7: the long one at cache positions
// 0..6 (RoPE 0..6), the short one (4 tokens) at cache positions 3..6 behind 3
// missing padding positions (valid_start 3), RoPE positions 0..3. Then both
// decode, at cache position 7 with RoPE positions 7 and 4, then 8 and 5.
TEST_P(StepPositions, LeftPaddedBatch) {
  Rig r(GetParam());
  const uint32_t a = r.Alloc(), b = r.Alloc();
  r.StepAndCheck({{a, 7, 7, 0}, {b, 4, 7, 3}}, {0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3}, 4);
  r.StepAndCheck({{a, 1, 8, 0}, {b, 1, 8, 0}}, {7, 4}, 5);
  r.StepAndCheck({{a, 1, 9, 0}, {b, 1, 9, 0}}, {8, 5}, 6);
}

INSTANTIATE_TEST_SUITE_P(
    Styles, StepPositions,
    ::testing::Values(
        PosCase{"neox_full_fp32", SWA_ROPE_NEOX, 0, 64, 64, 0, false, false, SWA_FORMAT_FP32},
        PosCase{"gptj_last_yarn_mxfp8", SWA_ROPE_GPTJ, 32, 32, 64, 4, false, false,
                SWA_FORMAT_MXFP8},
        PosCase{"neox_tail_derotate_shared_bf16", SWA_ROPE_NEOX, 32, 32, 64, 0, true, true,
                SWA_FORMAT_BF16}),
    [](const auto& info) { return std::string(info.param.name); });

// One staged step run twice on fresh caches: NULL positions and explicit
// cache positions give the same outputs and ring bytes, bit for bit; and
// explicit positions that differ give different ones (the field is read).
TEST(StepPositionsArgs, NullMeansCachePositions) {
  const PosCase pc{"neox", SWA_ROPE_NEOX, 0, 32, 32, 0, false, false, SWA_FORMAT_FP32};
  auto run = [&](const int32_t* pos, std::vector<float>* out, std::vector<uint8_t>* ring) {
    Rig r(pc);
    const uint32_t s = r.Alloc();
    const swa_seq_t seq{s, 5, 5, 0};
    ASSERT_EQ(swa_plan_build(r.plan(), &seq, 1), SWA_OK);
    std::vector<float> q(5 * kHq * 32), k(5 * kHkv * 32), v(k.size());
    for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.37f * float(i));
    for (size_t i = 0; i < k.size(); ++i) k[i] = std::cos(0.11f * float(i)), v[i] = 0.01f * float(i % 29);
    out->assign(q.size(), -9.0f);
    swa_step_args_t a;
    swa_step_args_init(&a);
    a.q = q.data(), a.k_new = k.data(), a.v_new = v.data(), a.out = out->data(), a.positions = pos;
    ASSERT_EQ(swa_step(r.cache(), r.plan(), &a), SWA_OK) << swa_last_error();
    *ring = Ring(r.cache());
  };
  const int32_t cache_pos[5] = {0, 1, 2, 3, 4}, other[5] = {3, 1, 2, 3, 4};
  std::vector<float> o_null, o_given, o_other;
  std::vector<uint8_t> r_null, r_given, r_other;
  run(nullptr, &o_null, &r_null);
  run(cache_pos, &o_given, &r_given);
  run(other, &o_other, &r_other);
  EXPECT_EQ(0, std::memcmp(o_null.data(), o_given.data(), o_null.size() * sizeof(float)));
  EXPECT_EQ(r_null, r_given);
  EXPECT_NE(r_null, r_other);
  EXPECT_NE(o_null, o_other);
}

TEST(StepPositionsArgs, NegativePositionIsRefusedNamingIt) {
  const PosCase pc{"neox", SWA_ROPE_NEOX, 0, 32, 32, 0, false, false, SWA_FORMAT_FP32};
  Rig r(pc);
  const uint32_t s = r.Alloc();
  const swa_seq_t seq{s, 3, 3, 0};
  ASSERT_EQ(swa_plan_build(r.plan(), &seq, 1), SWA_OK);
  std::vector<float> q(3 * kHq * 32, 0.5f), k(3 * kHkv * 32, 0.25f), v(k.size(), 1.0f);
  std::vector<float> out(q.size(), -9.0f);
  const int32_t pos[3] = {0, -5, 2};
  const std::vector<uint8_t> ring_before = Ring(r.cache());
  swa_step_args_t a;
  swa_step_args_init(&a);
  a.q = q.data(), a.k_new = k.data(), a.v_new = v.data(), a.out = out.data(), a.positions = pos;
  EXPECT_EQ(swa_step(r.cache(), r.plan(), &a), SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(swa_last_error()).find("positions[1] = -5"), std::string::npos)
      << swa_last_error();
  for (float x : out) ASSERT_EQ(x, -9.0f) << "a refused step wrote its output";
  EXPECT_EQ(Ring(r.cache()), ring_before) << "a refused step wrote the ring";
  // The plan is still usable: the same step with valid positions runs.
  const int32_t good[3] = {7, 8, 9};
  a.positions = good;
  EXPECT_EQ(swa_step(r.cache(), r.plan(), &a), SWA_OK) << swa_last_error();
}

}  // namespace
