// NaN and Inf in stored keys and values (docs/cuda_backend.md "Non-finite keys
// and values"): a row whose band holds such a key gets a non-finite output on
// both backends; every other row, including rows in the same CTA of the
// tensor-core kernel (whose MMA multiplies every row by every key of a tile),
// stays finite and matches the CPU backend. G = 6 query heads per KV head
// (the CPU backend's 6-row register tiles are then one token each; it also
// keeps mixed-token tiles exact, tests/unit/cpu_attention_test.cc).
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

// The small tiles (99 KiB): 16 / 32 query rows per CTA at D 512.
TEST(CudaNonfinite, KeysOutsideTheBandDoNotPoisonRowsSmallTiles) {
  SWA_SKIP_WITHOUT_DEVICE();
  RunScenario({SWA_DTYPE_BF16, SWA_DTYPE_BF16, SWA_DTYPE_BF16}, "101376");
  RunScenario({SWA_DTYPE_FP32, SWA_DTYPE_FP32, SWA_DTYPE_FP32}, "101376");
}

}  // namespace
}  // namespace swa_gpu
