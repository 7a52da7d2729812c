// NaN and Inf in stored keys and values (docs/cuda_backend.md "Non-finite keys
// and values"): a row whose band holds such a key gets a non-finite output on
// both backends; every other row, including rows in the same CTA of the
// tensor-core kernel (whose MMA multiplies every row by every key of a tile),
// stays finite and matches the CPU backend. G = 6 query heads per KV head
// (the CPU backend's 6-row register tiles are then one token each; it also
// keeps mixed-token tiles exact, tests/unit/cpu_attention_test.cc). And the
// precise kernel's -inf score at a row's first key (issue 27).
#include <cmath>
#include <cstdlib>

#include "gpu/gpu_test_util.h"

namespace swa_gpu {
namespace {

void SetValue(std::vector<uint8_t>& bytes, swa_dtype_t dtype, size_t i, float x) {
  if (dtype == SWA_DTYPE_FP32) {
    std::memcpy(bytes.data() + 4 * i, &x, 4);
  } else {
    const uint16_t h = ToBf16(x);
    std::memcpy(bytes.data() + 2 * i, &h, 2);
  }
}

// Writes x at dim e of every KV head of step token t.
void Poison(std::vector<uint8_t>& bytes, const LayerCfg& c, swa_dtype_t dtype, int t, int e,
            float x) {
  for (int h = 0; h < c.kv_heads; ++h)
    SetValue(bytes, dtype, (size_t(t) * c.kv_heads + h) * c.head_dim + e, x);
}

std::vector<LayerCfg> Layers() {
  return {
      {SWA_FORMAT_MXFP8, 6, 1, 128, true, false},   // shared K/V: a bad K is a bad V
      {SWA_FORMAT_BF16, 6, 1, 128, false, true},     // separate K/V, sinks
      {SWA_FORMAT_BF16, 12, 2, 512, false, false},   // D 512, separate
      {SWA_FORMAT_MXFP8, 6, 1, 256, true, false},
      {SWA_FORMAT_FP32, 6, 1, 64, false, false},     // the precise kernel
      {SWA_FORMAT_FP8_DS_MLA, 6, 1, 512, true, false},  // a NaN poisons its 64-dim group
  };
}

// Slot 0 gets NaN / Inf at chosen positions; slot 1 none. W 16, N 3 (ring
// 20): a 40-token prefill (staged path) whose tokens 5 and 9 carry them
// (tokens 21+ / 25+ cannot see them, in the same CTAs as tokens that do), and
// tokens 25 and 26, which the first decode step's token 0 (position 40) sees
// and its tokens 2 and 3 do not (ring-only path, one CTA for all rows).
void RunScenario(Dtypes dt, const char* smem_limit) {
  if (smem_limit != nullptr) setenv("SWACACHE_CUDA_SMEM_LIMIT", smem_limit, 1);
  DualCache dc(16, 3, Layers(), 2, 11);
  if (smem_limit != nullptr) unsetenv("SWACACHE_CUDA_SMEM_LIMIT");
  dc.set_nonfinite_rows(true);
  // NaN bit patterns may differ between the backends' encoders.
  dc.set_pool_tolerance(1e-3);
  const float nan = std::nanf(""), inf = INFINITY;
  bool prefill = true;
  dc.set_input_hook([&](size_t, const LayerCfg& c, swa_dtype_t kv, std::vector<uint8_t>& k,
                        std::vector<uint8_t>& v) {
    if (!prefill) return;
    std::vector<uint8_t>& val = c.shared_kv ? k : v;
    Poison(k, c, kv, 5, 3, nan);
    Poison(val, c, kv, 9, 7, inf);
    Poison(k, c, kv, 25, 1, -inf);
    Poison(val, c, kv, 26, c.head_dim - 1, nan);
  });
  dc.Step({{0, 40, 40, 0}, {1, 20, 20, 0}}, dt);
  if (::testing::Test::HasFatalFailure()) return;
  prefill = false;
  int32_t len[2] = {40, 20};
  for (int step = 0; step < 4; ++step) {
    std::vector<Seq> seqs;
    for (uint32_t s = 0; s < 2; ++s) {
      seqs.push_back({s, 4, len[s] + 4, 0});
      len[s] += 4;
    }
    dc.Step(seqs, dt);
    if (::testing::Test::HasFatalFailure()) return;
  }
  // The prefill's and the first decode's rows that see the positions.
  EXPECT_GT(dc.nonfinite_rows_seen(), 0u);
}

TEST(CudaNonfinite, KeysOutsideTheBandDoNotPoisonRowsTensorCore) {
  SWA_SKIP_WITHOUT_DEVICE();
  RunScenario({SWA_DTYPE_BF16, SWA_DTYPE_BF16, SWA_DTYPE_BF16}, nullptr);
}

TEST(CudaNonfinite, KeysOutsideTheBandDoNotPoisonRowsPrecise) {
  SWA_SKIP_WITHOUT_DEVICE();
  RunScenario({SWA_DTYPE_FP32, SWA_DTYPE_FP32, SWA_DTYPE_FP32}, nullptr);
}

float GetValue(const std::vector<uint8_t>& bytes, swa_dtype_t dtype, size_t i) {
  if (dtype == SWA_DTYPE_FP32) {
    float x;
    std::memcpy(&x, bytes.data() + 4 * i, 4);
    return x;
  }
  uint16_t h;
  std::memcpy(&h, bytes.data() + 2 * i, 2);
  return FromBf16(h);
}

// The precise kernel (FP32 outputs) on a row whose oldest visible key has a
// score of -inf: K holds -inf at a dim where every query is positive, there
// is no sink and no soft-cap, so the running max is still -inf at that key
// and exp(-inf - -inf) would be NaN. The CPU backend weighs the key 0; so must
// the kernel: every output stays finite and matches. W 16, N 3 (ring 20):
//  - staged: slot 0's prefill of 41 tokens has -inf at position 25, the
//    oldest key of its token 40;
//  - ring-only: slot 1's prefill of 20 has -inf at position 10, the oldest
//    key of position 25, which the second decode step (positions 24..27) runs.
void RunMinusInfOldestKey(Dtypes dt, const char* smem_limit) {
  if (smem_limit != nullptr) setenv("SWACACHE_CUDA_SMEM_LIMIT", smem_limit, 1);
  DualCache dc(16, 3,
               {{SWA_FORMAT_FP32, 6, 1, 64, false, false},
                {SWA_FORMAT_BF16, 6, 1, 128, false, false},
                {SWA_FORMAT_BF16, 12, 2, 512, false, false}},
               2, 31);
  if (smem_limit != nullptr) unsetenv("SWACACHE_CUDA_SMEM_LIMIT");
  constexpr int kDim = 1;
  const float inf = INFINITY;
  bool prefill = true;
  dc.set_query_hook([&](size_t, const LayerCfg& c, swa_dtype_t qd, std::vector<uint8_t>& q) {
    const size_t rows = q.size() / (qd == SWA_DTYPE_FP32 ? 4 : 2) / size_t(c.head_dim);
    for (size_t r = 0; r < rows; ++r) {
      const size_t i = r * size_t(c.head_dim) + kDim;
      SetValue(q, qd, i, std::fabs(GetValue(q, qd, i)) + 0.25f);
    }
  });
  dc.set_input_hook([&](size_t, const LayerCfg& c, swa_dtype_t kv, std::vector<uint8_t>& k,
                        std::vector<uint8_t>&) {
    if (!prefill) return;
    Poison(k, c, kv, 25, kDim, -inf);       // slot 0, position 25
    Poison(k, c, kv, 41 + 10, kDim, -inf);  // slot 1, position 10
  });
  dc.Step({{0, 41, 41, 0}, {1, 20, 20, 0}}, dt);  // any non-finite output fails
  if (::testing::Test::HasFatalFailure()) return;
  prefill = false;
  int32_t len[2] = {41, 20};
  for (int step = 0; step < 3; ++step) {
    std::vector<Seq> seqs;
    for (uint32_t s = 0; s < 2; ++s) {
      seqs.push_back({s, 4, len[s] + 4, 0});
      len[s] += 4;
    }
    dc.Step(seqs, dt);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(CudaNonfinite, MinusInfOldestKeyWithoutSinkStaysFinitePrecise) {
  SWA_SKIP_WITHOUT_DEVICE();
  RunMinusInfOldestKey({SWA_DTYPE_FP32, SWA_DTYPE_FP32, SWA_DTYPE_FP32}, nullptr);
  RunMinusInfOldestKey({SWA_DTYPE_BF16, SWA_DTYPE_BF16, SWA_DTYPE_FP32}, nullptr);
  RunMinusInfOldestKey({SWA_DTYPE_FP32, SWA_DTYPE_FP32, SWA_DTYPE_FP32}, "101376");
}

// The small tiles (99 KiB): 16 / 32 query rows per CTA at D 512.
TEST(CudaNonfinite, KeysOutsideTheBandDoNotPoisonRowsSmallTiles) {
  SWA_SKIP_WITHOUT_DEVICE();
  RunScenario({SWA_DTYPE_BF16, SWA_DTYPE_BF16, SWA_DTYPE_BF16}, "101376");
  RunScenario({SWA_DTYPE_FP32, SWA_DTYPE_FP32, SWA_DTYPE_FP32}, "101376");
}

}  // namespace
}  // namespace swa_gpu
