// swa_compress_step on the CUDA backend (kernels/compress/compress_entries.cu)
// against the CPU backend (itself checked against transformers' DeepSeek-V4
// compressors in tests/api and the oracle tests), on identical random inputs:
// a CSA layer with its indexer (FP32 rows) and an HCA layer (BF16 rows), two
// sequences driven through chunked prefill and speculative steps whose drafts
// are rejected at every depth, FP32 and BF16 inputs and outputs. Every
// entry must agree to the two expf/cosf implementations' rounding, and after
// every step the compressor rings must hold the same bytes.
#include <cmath>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu/gpu_test_util.h"
#include "gtest/gtest.h"
#include "swacache.h"

namespace {

using swa_gpu::DeviceBuffer;

constexpr uint32_t kDrafts = 3;

std::vector<swa_layer_desc_t> Layers() {
  std::vector<swa_layer_desc_t> ls(2);
  for (auto& l : ls) {
    swa_layer_desc_init(&l);
    l.q_heads = 2, l.kv_heads = 1, l.head_dim = 128, l.shared_kv = 1, l.kv_format = SWA_FORMAT_FP32;
    l.rope_style = SWA_ROPE_GPTJ, l.rope_first_dim = 64, l.rope_dims = 64, l.rope_theta = 160000.0f;
    l.rope_yarn_factor = 16.0f, l.rope_yarn_original_max_positions = 65536;
  }
  ls[0].compress_kind = SWA_COMPRESS_CSA, ls[0].compress_ratio = 4, ls[0].compress_head_dim = 64;
  ls[0].index_head_dim = 32, ls[0].compress_rope_dims = 16;
  ls[1].compress_kind = SWA_COMPRESS_HCA, ls[1].compress_ratio = 8, ls[1].compress_head_dim = 128;
  ls[1].compress_rope_dims = 32, ls[1].compress_row_format = SWA_FORMAT_BF16;
  return ls;
}

swa_cache_t* MakeCache(swa_backend_t backend, const std::vector<swa_layer_desc_t>& ls) {
  swa_config_t c;
  swa_config_init(&c);
  c.window = 8, c.draft_tokens = kDrafts, c.max_slots = 2, c.backend = backend;
  c.num_layers = uint32_t(ls.size()), c.layers = ls.data();
  swa_cache_t* cache = nullptr;
  EXPECT_EQ(swa_cache_create(&c, &cache), SWA_OK) << swa_last_error();
  return cache;
}

// A compressor of a layer: its row width S, entry width d, rate c.
struct Comp {
  uint32_t layer, compressor, row_width, d, rate;
};

float ValueAt(const std::vector<uint8_t>& o, swa_dtype_t dtype, size_t i) {
  if (dtype == SWA_DTYPE_FP32) {
    float f;
    std::memcpy(&f, &o[4 * i], 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, &o[2 * i], 2);
  return swa_gpu::FromBf16(h);
}

// The ring bytes of one compressor of every slot (the view's whole extent).
std::vector<uint8_t> RingBytes(swa_cache_t* cache, const Comp& c, bool device) {
  swa_tensor_view_t v;
  v.struct_size = sizeof v;
  EXPECT_EQ(swa_cache_compress_view(cache, c.layer, c.compressor, &v), SWA_OK) << swa_last_error();
  const size_t bytes = size_t(v.shape[0] - 1) * size_t(v.strides[0]) +
                       size_t(v.shape[1]) * size_t(v.strides[1]);
  std::vector<uint8_t> out(bytes);
  if (device)
    EXPECT_EQ(cudaMemcpy(out.data(), v.data, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  else
    std::memcpy(out.data(), v.data, bytes);
  // Only the rows, not the padding between slots (never written by either backend).
  std::vector<uint8_t> rows;
  for (int64_t s = 0; s < v.shape[0]; ++s) {
    const uint8_t* p = out.data() + size_t(s) * size_t(v.strides[0]);
    rows.insert(rows.end(), p, p + size_t(v.shape[1]) * size_t(v.strides[1]));
  }
  return rows;
}

class CudaCompress : public ::testing::TestWithParam<std::pair<swa_dtype_t, swa_dtype_t>> {};

TEST_P(CudaCompress, MatchesTheCpuBackendThroughPrefillDraftsAndRewinds) {
  SWA_SKIP_WITHOUT_DEVICE();
  const swa_dtype_t in_dt = GetParam().first, out_dt = GetParam().second;
  const size_t in_b = in_dt == SWA_DTYPE_FP32 ? 4 : 2, out_b = out_dt == SWA_DTYPE_FP32 ? 4 : 2;
  const auto ls = Layers();
  swa_cache_t* cpu = MakeCache(SWA_BACKEND_CPU, ls);
  swa_cache_t* gpu = MakeCache(SWA_BACKEND_CUDA, ls);
  ASSERT_NE(cpu, nullptr);
  ASSERT_NE(gpu, nullptr);
  swa_plan_t *pc = nullptr, *pg = nullptr;
  ASSERT_EQ(swa_plan_create(cpu, &pc), SWA_OK);
  ASSERT_EQ(swa_plan_create(gpu, &pg), SWA_OK);
  uint32_t slots[2];
  for (uint32_t& s : slots) {
    uint32_t g = 0;
    ASSERT_EQ(swa_slot_alloc(cpu, &s), SWA_OK);
    ASSERT_EQ(swa_slot_alloc(gpu, &g), SWA_OK);
    ASSERT_EQ(s, g);
  }
  const std::vector<Comp> comps = {{0, 0, 128, 64, 4}, {0, 1, 64, 32, 4}, {1, 0, 128, 128, 8}};
  std::mt19937_64 rng(31);
  // Per-compressor weights, shared by both caches.
  std::vector<std::vector<float>> bias(comps.size()), weight(comps.size());
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (size_t i = 0; i < comps.size(); ++i) {
    bias[i].resize(size_t(comps[i].rate) * comps[i].row_width);
    for (float& b : bias[i]) b = 0.5f * nd(rng);
    weight[i].resize(comps[i].d);
    for (float& w : weight[i]) w = 1.0f + 0.2f * nd(rng);
  }
  // Steps: (q_start, seqlen_q) for each sequence; a q_start below the last
  // step's end rejects that step's drafts. Prefill chunks of 1 ... 11 tokens,
  // then decode steps of 1 + N tokens rejected at every depth.
  int32_t end[2] = {0, 0};
  std::uniform_int_distribution<int> chunk(1, 11), accept(0, int(kDrafts) + 1);
  for (int step = 0; step < 40; ++step) {
    swa_seq_t seqs[2];
    int32_t T = 0;
    for (int s = 0; s < 2; ++s) {
      int32_t q_start = end[s], n = 0;
      if (step < 8) {
        n = chunk(rng);
      } else {
        q_start = end[s] == 0 ? 0 : end[s] - int32_t(kDrafts) - 1 + accept(rng);
        if (q_start < 0) q_start = 0;
        n = 1 + int32_t(kDrafts);
      }
      seqs[s] = {slots[s], n, q_start + n, 0};
      end[s] = q_start + n;
      T += n;
    }
    ASSERT_EQ(swa_plan_build(pc, seqs, 2), SWA_OK) << "step " << step << ": " << swa_last_error();
    ASSERT_EQ(swa_plan_build(pg, seqs, 2), SWA_OK) << "step " << step << ": " << swa_last_error();
    for (size_t ci = 0; ci < comps.size(); ++ci) {
      const Comp& c = comps[ci];
      size_t nw = 0;
      ASSERT_EQ(swa_plan_compress_windows(pc, c.layer, nullptr, 0, &nw), SWA_OK);
      const auto kv = swa_gpu::RandomTensor(rng, size_t(T) * c.row_width, in_dt, 2.0f);
      const auto gate = swa_gpu::RandomTensor(rng, size_t(T) * c.row_width, in_dt, 3.0f);
      const size_t out_n = std::max<size_t>(nw, 1) * c.d;
      std::vector<uint8_t> oc(out_n * out_b, 0xA5), og(out_n * out_b, 0x5A);
      DeviceBuffer dkv(kv.size()), dgate(gate.size()), dbias(bias[ci].size() * 4),
          dw(weight[ci].size() * 4), dout(og.size());
      dkv.Upload(kv.data(), kv.size()), dgate.Upload(gate.data(), gate.size());
      dbias.Upload(bias[ci].data(), bias[ci].size() * 4);
      dw.Upload(weight[ci].data(), weight[ci].size() * 4);
      dout.Upload(og.data(), og.size());
      swa_compress_args_t a;
      swa_compress_args_init(&a);
      a.layer = c.layer, a.compressor = c.compressor, a.dtype = in_dt, a.row_width = c.row_width;
      a.rows = T, a.norm_eps = 1e-6f, a.out_dtype = out_dt, a.out_rows = nw;
      a.kv = kv.data(), a.gate = gate.data(), a.position_bias = bias[ci].data();
      a.norm_weight = weight[ci].data(), a.out = oc.data();
      ASSERT_EQ(swa_compress_step(cpu, pc, &a), SWA_OK) << swa_last_error();
      a.kv = dkv.get(), a.gate = dgate.get(), a.position_bias = static_cast<float*>(dbias.get());
      a.norm_weight = static_cast<float*>(dw.get()), a.out = dout.get();
      ASSERT_EQ(swa_compress_step(gpu, pg, &a), SWA_OK) << swa_last_error();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      dout.Download(og.data(), og.size());
      const float tol = out_dt == SWA_DTYPE_FP32 ? 2e-5f : 8e-3f;
      for (size_t i = 0; i < nw * c.d; ++i) {
        const float x = ValueAt(og, out_dt, i), y = ValueAt(oc, out_dt, i);
        ASSERT_TRUE(std::isfinite(y)) << "CPU entry value " << i;
        ASSERT_LE(std::fabs(x - y), tol * std::max(1.0f, std::fabs(y)))
            << "step " << step << " layer " << c.layer << " compressor " << c.compressor
            << " entry row " << i / c.d << " feature " << i % c.d << ": CUDA " << x << " CPU " << y;
      }
      // Rows past the window count stay untouched (0x5A bytes).
      for (size_t i = nw * c.d * out_b; i < og.size(); ++i) ASSERT_EQ(og[i], 0x5A);
      ASSERT_EQ(RingBytes(gpu, c, true), RingBytes(cpu, c, false))
          << "step " << step << " layer " << c.layer << " compressor " << c.compressor;
    }
  }
  swa_plan_destroy(pc);
  swa_plan_destroy(pg);
  swa_cache_destroy(cpu);
  swa_cache_destroy(gpu);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaCompress,
                         ::testing::Values(std::make_pair(SWA_DTYPE_FP32, SWA_DTYPE_FP32),
                                           std::make_pair(SWA_DTYPE_BF16, SWA_DTYPE_FP32),
                                           std::make_pair(SWA_DTYPE_FP32, SWA_DTYPE_BF16)));

}  // namespace
