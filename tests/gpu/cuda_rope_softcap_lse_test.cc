// swa_step on the CUDA backend against the CPU backend for the per-layer
// features of docs/semantics.md: RoPE inside the step (NEOX and GPT-J pairs,
// partial rotary dims, YaRN, attention factor, output de-rotation), the logit
// soft-cap, and the per-row LSE output; every path (staged prefill, ring-only
// decode and speculative verify) and both kernels (precise: FP32 outputs or
// FP32 rings; tensor-core: BF16 outputs). Outputs and LSEs within 2x the
// "Error budgets"; ring bytes equal (RoPE: up to rare ulp-level differences,
// see DualCache::set_pool_tolerance).
#include <algorithm>

#include "gpu/gpu_test_util.h"

namespace swa_gpu {
namespace {

constexpr Dtypes kAllDtypes[] = {
    {SWA_DTYPE_FP32, SWA_DTYPE_FP32, SWA_DTYPE_FP32},  // precise kernel
    {SWA_DTYPE_BF16, SWA_DTYPE_BF16, SWA_DTYPE_BF16},  // tensor-core kernel
    {SWA_DTYPE_FP32, SWA_DTYPE_BF16, SWA_DTYPE_BF16},
    {SWA_DTYPE_BF16, SWA_DTYPE_FP32, SWA_DTYPE_FP32},
};

LayerCfg Rope(LayerCfg c, swa_rope_style_t style, int first, int dims) {
  c.rope_style = style;
  c.rope_first = first;
  c.rope_dims = dims;
  return c;
}

LayerCfg Yarn(LayerCfg c, float factor, int original, bool truncate, float attention_factor) {
  c.rope_theta = 1e6f;
  c.yarn_factor = factor;
  c.yarn_original = original;
  c.yarn_truncate = truncate;
  c.rope_attention_factor = attention_factor;
  return c;
}

LayerCfg Derotate(LayerCfg c) {
  c.derotate = true;
  return c;
}

LayerCfg Cap(LayerCfg c, float cap) {
  c.softcap = cap;
  return c;
}

// MXFP8 / BF16 rings: stored bytes match the CPU's up to rare rounding flips.
std::vector<LayerCfg> RopeLayers() {
  return {
      // DeepSeek-V4-like: shared K=V, the last 64 of 512 dims rotate, de-rotated output.
      Derotate(Rope({SWA_FORMAT_MXFP8, 16, 1, 512, true, true}, SWA_ROPE_NEOX, 448, 64)),
      Derotate(Rope({SWA_FORMAT_FP8_DS_MLA, 16, 1, 512, true, true}, SWA_ROPE_GPTJ, 448, 64)),
      Rope({SWA_FORMAT_BF16, 8, 2, 128, false, false}, SWA_ROPE_GPTJ, 0, 128),
      Yarn(Rope({SWA_FORMAT_MXFP8, 4, 4, 64, false, true}, SWA_ROPE_NEOX, 0, 64), 8.0f, 2048,
           true, 0),
      Derotate(Yarn(Rope({SWA_FORMAT_MXFP8, 8, 2, 256, false, false}, SWA_ROPE_GPTJ, 32, 96),
                    4.0f, 4096, false, 0.9f)),
      // NEOX over two 32-value blocks' worth of partners, with the soft-cap too.
      Cap(Derotate(Rope({SWA_FORMAT_BF16, 4, 1, 128, true, false}, SWA_ROPE_NEOX, 16, 96)), 1.5f),
  };
}

std::vector<LayerCfg> SoftcapLayers() {
  return {
      Cap({SWA_FORMAT_MXFP8, 8, 2, 128, false, true}, 1.0f),
      Cap({SWA_FORMAT_FP32, 6, 3, 256, false, false}, 0.7f),
      Cap({SWA_FORMAT_BF16, 4, 4, 64, true, false}, 3.0f),
      Cap({SWA_FORMAT_MXFP8, 16, 1, 512, true, true}, 0.5f),
  };
}

std::vector<LayerCfg> PlainLayers() {
  return {
      {SWA_FORMAT_MXFP8, 16, 1, 512, true, true},
      {SWA_FORMAT_BF16, 8, 2, 128, false, false},
      {SWA_FORMAT_MXFP8, 4, 4, 64, false, true},
      {SWA_FORMAT_FP32, 6, 3, 256, false, false},
  };
}

// Prefill (staged), then decode and speculative verify with rewinds (ring-only),
// a chunked-prefill mixed batch, and decodes again; dtypes cycle.
void RunScenario(DualCache& dc, uint32_t slots, uint32_t draft) {
  std::vector<int32_t> len(slots, 0);
  {
    std::vector<Seq> seqs;
    for (uint32_t s = 0; s < slots; ++s) {
      len[s] = 9 + 23 * int32_t(s);
      seqs.push_back({s, len[s], len[s], 0});
    }
    dc.Step(seqs, kAllDtypes[0]);
    if (::testing::Test::HasFatalFailure()) return;
  }
  std::uniform_int_distribution<int> accept(0, int(draft));
  for (int step = 0; step < 12; ++step) {
    std::vector<Seq> seqs;
    for (uint32_t s = 0; s < slots; ++s) {
      if ((step + s) % 4 == 3) continue;
      int32_t q = step % 3 == 0 ? 1 : int32_t(draft) + 1;
      if (step == 6 && s == 0) q = 70;  // a long chunk: this step goes staged
      seqs.push_back({s, q, len[s] + q, 0});
      len[s] += q == int32_t(draft) + 1 ? 1 + accept(dc.rng()) : q;
    }
    std::shuffle(seqs.begin(), seqs.end(), dc.rng());
    dc.Step(seqs, kAllDtypes[step % 4]);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(CudaRope, BothStylesPartialYarnDerotateMatchCpu) {
  SWA_SKIP_WITHOUT_DEVICE();
  DualCache dc(16, 3, RopeLayers(), 4, 21);
  dc.set_pool_tolerance(1e-4);
  RunScenario(dc, 4, 3);
  RecordProperty("worst_rel_l2", std::to_string(dc.worst_error()));
}

// Far positions (large angles) through bounded replay with valid_start > 0.
TEST(CudaRope, FarPositionsMatchCpu) {
  SWA_SKIP_WITHOUT_DEVICE();
  const uint32_t W = 16;
  DualCache dc(W, 1, RopeLayers(), 2, 22);
  dc.set_pool_tolerance(1e-4);
  const int32_t H[2] = {100000, 3000};
  std::vector<Seq> seqs;
  std::vector<int32_t> len(2);
  for (uint32_t s = 0; s < 2; ++s) {
    seqs.push_back({s, int32_t(W), H[s], H[s] - int32_t(W)});
    len[s] = H[s];
  }
  dc.Step(seqs, kAllDtypes[0]);
  for (int step = 0; step < 6; ++step) {
    seqs.clear();
    for (uint32_t s = 0; s < 2; ++s) {
      const int32_t q = 1 + (step + s) % 2;
      len[s] += q;
      seqs.push_back({s, q, len[s], H[s] - int32_t(W)});
    }
    dc.Step(seqs, kAllDtypes[step % 4]);
    if (HasFatalFailure()) return;
  }
}

// An FP32 ring stores the rotated keys' bits, so an ulp of cosf shows in the
// bytes: only the outputs (and LSEs) are compared for it.
TEST(CudaRope, Fp32RingMatchesCpuOutputs) {
  SWA_SKIP_WITHOUT_DEVICE();
  DualCache dc(16, 2, {Derotate(Rope({SWA_FORMAT_FP32, 4, 2, 128, false, true}, SWA_ROPE_NEOX, 0, 64))},
               3, 23);
  dc.set_pool_tolerance(1.0);
  dc.set_lse(true);
  RunScenario(dc, 3, 2);
}

TEST(CudaSoftcap, MatchesCpu) {
  SWA_SKIP_WITHOUT_DEVICE();
  DualCache dc(24, 2, SoftcapLayers(), 4, 24);
  RunScenario(dc, 4, 2);
  RecordProperty("worst_rel_l2", std::to_string(dc.worst_error()));
}

TEST(CudaLse, MatchesCpuWithAndWithoutSinks) {
  SWA_SKIP_WITHOUT_DEVICE();
  DualCache dc(16, 3, PlainLayers(), 4, 25);
  dc.set_lse(true);
  RunScenario(dc, 4, 3);
}

TEST(CudaLse, WithRopeAndSoftcapMatchesCpu) {
  SWA_SKIP_WITHOUT_DEVICE();
  std::vector<LayerCfg> layers = RopeLayers();
  for (const LayerCfg& c : SoftcapLayers()) layers.push_back(c);
  DualCache dc(16, 3, layers, 3, 26);
  dc.set_pool_tolerance(1e-4);
  dc.set_lse(true);
  RunScenario(dc, 3, 3);
}

}  // namespace
}  // namespace swa_gpu
