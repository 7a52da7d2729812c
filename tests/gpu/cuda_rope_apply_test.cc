// RoPE as a service on a CUDA device (swa_rope_apply, device 0, the test's
// stream) against the CUDA step's own rotation, bit for bit: the FP32 and
// BF16 K rows a CUDA step stores at given positions (swa_step_args_t::
// positions), and a de-rotating layer's output of one-key sequences. And the
// CUDA step with given positions against the CPU step with the same ones
// (the two differ by the cosf/sinf of host and device only). The host half
// is tests/api/rope_apply_test.cc.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu/gpu_test_util.h"
#include "gtest/gtest.h"
#include "swacache.h"

namespace {

using swa_gpu::DeviceBuffer;

const std::vector<int32_t> kPositions = {0, 3, 4095, 65537, 1 << 24, 2147483647};

swa_layer_desc_t Layer(swa_rope_style_t style, int first, int dims, float yarn,
                       swa_format_t format, bool shared, bool derotate) {
  swa_layer_desc_t l;
  swa_layer_desc_init(&l);
  l.q_heads = 2, l.kv_heads = 2, l.head_dim = 128, l.shared_kv = shared, l.kv_format = format;
  l.rope_style = style, l.rope_first_dim = uint32_t(first), l.rope_dims = uint32_t(dims);
  l.rope_theta = 150000.0f, l.rope_yarn_factor = yarn, l.rope_yarn_original_max_positions = 4096;
  l.rope_derotate_output = derotate;
  return l;
}

// One single-token sequence per position on `backend`; host copies of the
// output and of each slot's ring row 0.
void StepOnce(const swa_layer_desc_t& l, swa_backend_t backend, const std::vector<uint8_t>& k,
              const std::vector<uint8_t>& v, swa_dtype_t kv_dtype, std::vector<float>* out,
              std::vector<uint8_t>* rows) {
  const int n = int(kPositions.size()), d = int(l.head_dim);
  swa_config_t c;
  swa_config_init(&c);
  c.window = 4, c.max_slots = uint32_t(n), c.backend = backend, c.num_layers = 1, c.layers = &l;
  swa_cache_t* cache = nullptr;
  ASSERT_EQ(swa_cache_create(&c, &cache), SWA_OK) << swa_last_error();
  swa_plan_t* plan = nullptr;
  ASSERT_EQ(swa_plan_create(cache, &plan), SWA_OK);
  std::vector<swa_seq_t> seqs;
  for (int i = 0; i < n; ++i) {
    uint32_t s;
    ASSERT_EQ(swa_slot_alloc(cache, &s), SWA_OK);
    seqs.push_back({s, 1, 1, 0});
  }
  ASSERT_EQ(swa_plan_build(plan, seqs.data(), uint32_t(n)), SWA_OK) << swa_last_error();
  std::vector<float> q(size_t(n) * 2 * d);
  for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.7f * float(i));
  out->assign(q.size(), std::nanf(""));
  const bool dev = backend == SWA_BACKEND_CUDA;
  DeviceBuffer dq(q.size() * 4), dk(k.size()), dv(v.size()), dout(out->size() * 4);
  dq.Upload(q.data(), q.size() * 4), dk.Upload(k.data(), k.size());
  if (!v.empty()) dv.Upload(v.data(), v.size());
  swa_step_args_t a;
  swa_step_args_init(&a);
  a.q = dev ? dq.get() : q.data(), a.k_new = dev ? dk.get() : k.data();
  a.v_new = l.shared_kv ? nullptr : (dev ? dv.get() : v.data());
  a.kv_dtype = kv_dtype, a.out = dev ? dout.get() : out->data();
  a.positions = kPositions.data();
  ASSERT_EQ(swa_step(cache, plan, &a), SWA_OK) << swa_last_error();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  if (dev) dout.Download(out->data(), out->size() * 4);
  swa_tensor_view_t view;
  view.struct_size = sizeof view;
  ASSERT_EQ(swa_cache_layer_view(cache, 0, &view), SWA_OK);
  const size_t row = size_t(view.strides[1]);
  rows->assign(size_t(n) * row, 0);
  for (int i = 0; i < n; ++i) {
    const uint8_t* p = static_cast<const uint8_t*>(view.data) + seqs[i].slot * view.strides[0];
    if (dev)
      ASSERT_EQ(cudaMemcpy(rows->data() + i * row, p, row, cudaMemcpyDeviceToHost), cudaSuccess);
    else
      std::memcpy(rows->data() + i * row, p, row);
  }
  swa_plan_destroy(plan);
  swa_cache_destroy(cache);
}

// swa_rope_apply of host bytes `x` on device 0 (stream of the test's).
std::vector<uint8_t> ApplyOnDevice(const swa_layer_desc_t& l, std::vector<uint8_t> x,
                                   swa_dtype_t dtype, uint32_t inverse) {
  DeviceBuffer dx(x.size());
  dx.Upload(x.data(), x.size());
  cudaStream_t stream;
  EXPECT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  swa_rope_args_t a;
  swa_rope_args_init(&a);
  a.layer = &l, a.x = dx.get(), a.dtype = dtype, a.tokens = int64_t(kPositions.size());
  a.heads = 2, a.positions = kPositions.data(), a.inverse = inverse, a.device = 0;
  a.stream = stream;
  EXPECT_EQ(swa_rope_apply(&a), SWA_OK) << swa_last_error();
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaStreamDestroy(stream);
  dx.Download(x.data(), x.size());
  return x;
}

std::vector<uint8_t> Bytes(size_t n, uint32_t seed, bool bf16) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-3, 3);
  std::vector<uint8_t> b(n * (bf16 ? 2 : 4));
  for (size_t i = 0; i < n; ++i) {
    float f = u(rng);
    if (bf16) {
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      const uint16_t h = uint16_t(bits >> 16);
      std::memcpy(&b[2 * i], &h, 2);
    } else {
      std::memcpy(&b[4 * i], &f, 4);
    }
  }
  return b;
}

struct Case {
  const char* name;
  swa_rope_style_t style;
  int first, dims;
  float yarn;
};

class CudaRopeApply : public ::testing::TestWithParam<Case> {};

TEST_P(CudaRopeApply, ForwardEqualsTheCudaStepsKeys) {
  SWA_SKIP_WITHOUT_DEVICE();
  const Case cs = GetParam();
  for (const bool bf16 : {false, true}) {
    const swa_layer_desc_t l = Layer(cs.style, cs.first, cs.dims, cs.yarn,
                                     bf16 ? SWA_FORMAT_BF16 : SWA_FORMAT_FP32, false, false);
    const size_t n = kPositions.size() * 2 * 128, elem = bf16 ? 2 : 4;
    const std::vector<uint8_t> k = Bytes(n, 1, bf16), v = Bytes(n, 2, bf16);
    std::vector<float> out;
    std::vector<uint8_t> rows;
    StepOnce(l, SWA_BACKEND_CUDA, k, v, bf16 ? SWA_DTYPE_BF16 : SWA_DTYPE_FP32, &out, &rows);
    const std::vector<uint8_t> mine =
        ApplyOnDevice(l, k, bf16 ? SWA_DTYPE_BF16 : SWA_DTYPE_FP32, 0);
    const size_t row = rows.size() / kPositions.size(), key = 2 * 128 * elem;
    for (size_t t = 0; t < kPositions.size(); ++t)
      ASSERT_EQ(0, std::memcmp(rows.data() + t * row, mine.data() + t * key, key))
          << cs.name << (bf16 ? " BF16" : " FP32") << ": position " << kPositions[t];
  }
}

TEST_P(CudaRopeApply, InverseEqualsTheCudaStepsDerotation) {
  SWA_SKIP_WITHOUT_DEVICE();
  const Case cs = GetParam();
  const swa_layer_desc_t l = Layer(cs.style, cs.first, cs.dims, cs.yarn, SWA_FORMAT_FP32, true, true);
  const std::vector<uint8_t> k = Bytes(kPositions.size() * 2 * 128, 3, false);
  std::vector<float> out;
  std::vector<uint8_t> rows;
  StepOnce(l, SWA_BACKEND_CUDA, k, {}, SWA_DTYPE_FP32, &out, &rows);
  const std::vector<uint8_t> fwd = ApplyOnDevice(l, k, SWA_DTYPE_FP32, 0);
  const std::vector<uint8_t> back = ApplyOnDevice(l, fwd, SWA_DTYPE_FP32, 1);
  ASSERT_EQ(back.size(), out.size() * 4);
  EXPECT_EQ(0, std::memcmp(back.data(), out.data(), back.size())) << cs.name;
}

// The CUDA step with given positions against the CPU step with them.
TEST_P(CudaRopeApply, CudaStepPositionsMatchTheCpuStep) {
  SWA_SKIP_WITHOUT_DEVICE();
  const Case cs = GetParam();
  const swa_layer_desc_t l = Layer(cs.style, cs.first, cs.dims, cs.yarn, SWA_FORMAT_FP32, false, false);
  const size_t n = kPositions.size() * 2 * 128;
  const std::vector<uint8_t> k = Bytes(n, 4, false), v = Bytes(n, 5, false);
  std::vector<float> out_gpu, out_cpu;
  std::vector<uint8_t> rows_gpu, rows_cpu;
  StepOnce(l, SWA_BACKEND_CUDA, k, v, SWA_DTYPE_FP32, &out_gpu, &rows_gpu);
  StepOnce(l, SWA_BACKEND_CPU, k, v, SWA_DTYPE_FP32, &out_cpu, &rows_cpu);
  for (size_t i = 0; i < out_cpu.size(); ++i)
    ASSERT_NEAR(out_gpu[i], out_cpu[i], 2e-5f * std::max(1.0f, std::fabs(out_cpu[i])))
        << cs.name << " element " << i;
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaRopeApply,
                         ::testing::Values(Case{"neox_full", SWA_ROPE_NEOX, 0, 128, 0},
                                           Case{"gptj_trailing_yarn", SWA_ROPE_GPTJ, 64, 64, 16},
                                           Case{"neox_middle", SWA_ROPE_NEOX, 32, 32, 0}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
