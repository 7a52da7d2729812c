// swa_project on the CUDA backend (cuBLASLt) against an FP64 reference, both
// weight layouts and output dtypes, captured into a CUDA graph next to
// uncaptured calls on another stream, and the CUDA backend's memory calls.
#include "gpu/gpu_test_util.h"

namespace swa_gpu {
namespace {

swa_cache_t* MakeCudaCache() {
  swa_layer_desc_t d;
  swa_layer_desc_init(&d);
  d.q_heads = 2;
  d.head_dim = 64;
  swa_config_t c;
  swa_config_init(&c);
  c.backend = SWA_BACKEND_CUDA;
  c.max_slots = 2;
  c.num_layers = 1;
  c.layers = &d;
  swa_cache_t* cache = nullptr;
  EXPECT_EQ(swa_cache_create(&c, &cache), SWA_OK) << swa_last_error();
  return cache;
}

TEST(CudaProject, MatchesFp64Reference) {
  SWA_SKIP_WITHOUT_DEVICE();
  swa_cache_t* cache = MakeCudaCache();
  ASSERT_NE(cache, nullptr);
  std::mt19937_64 rng(3);
  struct Shape { uint32_t t, k, q, kv; } shapes[] = {{1, 64, 32, 32}, {37, 300, 128, 40}, {256, 1024, 512, 576}};
  for (const Shape& sh : shapes)
    for (swa_weight_layout_t layout : {SWA_WEIGHT_OUT_IN, SWA_WEIGHT_IN_OUT})
      for (swa_dtype_t od : {SWA_DTYPE_FP32, SWA_DTYPE_BF16}) {
        const uint32_t n = sh.q + sh.kv;
        const auto h = RandomTensor(rng, size_t(sh.t) * sh.k, SWA_DTYPE_BF16, 1.0f);
        const auto w = RandomTensor(rng, size_t(sh.k) * n, SWA_DTYPE_BF16, 1.0f);
        const size_t out_bytes = size_t(sh.t) * n * (od == SWA_DTYPE_FP32 ? 4 : 2);
        DeviceBuffer dh(h.size()), dw(w.size()), dout(out_bytes);
        dh.Upload(h.data(), h.size());
        dw.Upload(w.data(), w.size());
        CUDA_ASSERT(cudaMemset(dout.get(), 0xFF, out_bytes));
        swa_project_args_t a;
        swa_project_args_init(&a);
        a.hidden = dh.get();
        a.weight = dw.get();
        a.weight_layout = layout;
        a.out = dout.get();
        a.out_dtype = od;
        a.n_tokens = sh.t;
        a.hidden_dim = sh.k;
        a.q_dim = sh.q;
        a.kv_dim = sh.kv;
        ASSERT_EQ(swa_project(cache, &a), SWA_OK) << swa_last_error();
        CUDA_ASSERT(cudaDeviceSynchronize());
        std::vector<uint8_t> out(out_bytes);
        dout.Download(out.data(), out_bytes);
        const auto got = AsDouble(out, od);
        const auto hd = AsDouble(h, SWA_DTYPE_BF16), wd = AsDouble(w, SWA_DTYPE_BF16);
        std::vector<double> ref(size_t(sh.t) * n);
        for (uint32_t i = 0; i < sh.t; ++i)
          for (uint32_t j = 0; j < n; ++j) {
            double s = 0;
            for (uint32_t k = 0; k < sh.k; ++k)
              s += hd[size_t(i) * sh.k + k] *
                   (layout == SWA_WEIGHT_OUT_IN ? wd[size_t(j) * sh.k + k] : wd[size_t(k) * n + j]);
            ref[size_t(i) * n + j] = s;
          }
        EXPECT_LE(RelL2(got, ref), od == SWA_DTYPE_FP32 ? 1e-5 : 5e-3)
            << "T " << sh.t << " K " << sh.k << " N " << n << " layout " << layout << " dtype " << od;
      }
  swa_cache_destroy(cache);
}

// FP64 reference of out[T, N] = hidden[T, K] x W ([N, K] layout), both BF16.
std::vector<double> ProjectRef(const std::vector<uint8_t>& h, const std::vector<uint8_t>& w,
                               uint32_t t, uint32_t k, uint32_t n) {
  const auto hd = AsDouble(h, SWA_DTYPE_BF16), wd = AsDouble(w, SWA_DTYPE_BF16);
  std::vector<double> ref(size_t(t) * n);
  for (uint32_t i = 0; i < t; ++i)
    for (uint32_t j = 0; j < n; ++j) {
      double s = 0;
      for (uint32_t e = 0; e < k; ++e) s += hd[size_t(i) * k + e] * wd[size_t(j) * k + e];
      ref[size_t(i) * n + j] = s;
    }
  return ref;
}

// A projection captured on stream A after an uncaptured one on stream B (so
// the library's ordering event was last recorded outside the capture), then
// replayed on A while uncaptured projections run on B: the capture must end
// valid and every output must be right. The captured call uses no workspace,
// so nothing the replays write is shared with the calls on B (issue 27: the
// ordering event recorded in a capture is not recorded again at replay).
TEST(CudaProject, CapturedProjectionSharesNoWorkspaceWithUncapturedOnes) {
  SWA_SKIP_WITHOUT_DEVICE();
  swa_cache_t* cache = MakeCudaCache();
  ASSERT_NE(cache, nullptr);
  std::mt19937_64 rng(11);
  // Few tokens, deep K: shapes where cuBLASLt likes split-K and its workspace.
  const uint32_t t = 8, k = 4096, q = 1536, kv = 512, n = q + kv;
  cudaStream_t a = nullptr, b = nullptr;
  CUDA_ASSERT(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  CUDA_ASSERT(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  const auto w = RandomTensor(rng, size_t(k) * n, SWA_DTYPE_BF16, 0.05f);
  const auto ha = RandomTensor(rng, size_t(t) * k, SWA_DTYPE_BF16, 1.0f);
  const auto hb = RandomTensor(rng, size_t(t) * k, SWA_DTYPE_BF16, 1.0f);
  DeviceBuffer dw(w.size()), dha(ha.size()), dhb(hb.size()), oa(size_t(t) * n * 4),
      ob(size_t(t) * n * 4);
  dw.Upload(w.data(), w.size());
  dha.Upload(ha.data(), ha.size());
  dhb.Upload(hb.data(), hb.size());
  auto args = [&](const DeviceBuffer& hidden, DeviceBuffer& out, cudaStream_t s) {
    swa_project_args_t p;
    swa_project_args_init(&p);
    p.hidden = hidden.get();
    p.weight = dw.get();
    p.weight_layout = SWA_WEIGHT_OUT_IN;
    p.out = out.get();
    p.out_dtype = SWA_DTYPE_FP32;
    p.n_tokens = t;
    p.hidden_dim = k;
    p.q_dim = q;
    p.kv_dim = kv;
    p.stream = s;
    return p;
  };
  const swa_project_args_t pa = args(dha, oa, a), pb = args(dhb, ob, b);
  ASSERT_EQ(swa_project(cache, &pb), SWA_OK) << swa_last_error();
  CUDA_ASSERT(cudaDeviceSynchronize());

  cudaGraph_t g = nullptr;
  CUDA_ASSERT(cudaStreamBeginCapture(a, cudaStreamCaptureModeThreadLocal));
  const swa_status_t captured = swa_project(cache, &pa);
  const cudaError_t ended = cudaStreamEndCapture(a, &g);
  ASSERT_EQ(captured, SWA_OK) << swa_last_error();
  CUDA_ASSERT(ended);
  cudaGraphExec_t exec = nullptr;
  CUDA_ASSERT(cudaGraphInstantiate(&exec, g, 0));

  const std::vector<double> want_a = ProjectRef(ha, w, t, k, n), want_b = ProjectRef(hb, w, t, k, n);
  std::vector<uint8_t> host(size_t(t) * n * 4);
  for (int it = 0; it < 20; ++it) {
    CUDA_ASSERT(cudaMemsetAsync(oa.get(), 0xFF, oa.bytes(), a));
    CUDA_ASSERT(cudaMemsetAsync(ob.get(), 0xFF, ob.bytes(), b));
    CUDA_ASSERT(cudaGraphLaunch(exec, a));
    for (int j = 0; j < 3; ++j) ASSERT_EQ(swa_project(cache, &pb), SWA_OK) << swa_last_error();
    CUDA_ASSERT(cudaGraphLaunch(exec, a));
    CUDA_ASSERT(cudaDeviceSynchronize());
    oa.Download(host.data(), host.size());
    EXPECT_LE(RelL2(AsDouble(host, SWA_DTYPE_FP32), want_a), 1e-5) << "replay " << it;
    ob.Download(host.data(), host.size());
    EXPECT_LE(RelL2(AsDouble(host, SWA_DTYPE_FP32), want_b), 1e-5) << "uncaptured " << it;
    if (HasFailure()) break;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
  swa_cache_destroy(cache);
}

TEST(CudaBackend, PoolIsDeviceMemoryAndZeroed) {
  SWA_SKIP_WITHOUT_DEVICE();
  swa_cache_t* cache = MakeCudaCache();
  ASSERT_NE(cache, nullptr);
  swa_tensor_view_t v;
  v.struct_size = sizeof v;
  ASSERT_EQ(swa_cache_layer_view(cache, 0, &v), SWA_OK);
  EXPECT_EQ(v.backend, SWA_BACKEND_CUDA);
  EXPECT_EQ(v.device, 0);
  cudaPointerAttributes attr;
  CUDA_ASSERT(cudaPointerGetAttributes(&attr, v.data));
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
  swa_layout_t lay;
  lay.struct_size = sizeof lay;
  ASSERT_EQ(swa_cache_layout(cache, &lay), SWA_OK);
  std::vector<uint8_t> host(lay.pool_bytes, 0xAB);
  CUDA_ASSERT(cudaMemcpy(host.data(), v.data, lay.pool_bytes, cudaMemcpyDeviceToHost));
  for (uint8_t b : host) ASSERT_EQ(b, 0);
  swa_cache_destroy(cache);
}

TEST(CudaBackend, MissingDeviceOrdinalIsRejected) {
  SWA_SKIP_WITHOUT_DEVICE();
  int n = 0;
  cudaGetDeviceCount(&n);
  swa_layer_desc_t d;
  swa_layer_desc_init(&d);
  swa_config_t c;
  swa_config_init(&c);
  c.backend = SWA_BACKEND_CUDA;
  c.device = n;  // one past the last
  c.num_layers = 1;
  c.layers = &d;
  swa_cache_t* cache = nullptr;
  EXPECT_EQ(swa_cache_create(&c, &cache), SWA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(swa_last_error()).find("device = " + std::to_string(n)), std::string::npos)
      << swa_last_error();
  EXPECT_EQ(cache, nullptr);
}

}  // namespace
}  // namespace swa_gpu
