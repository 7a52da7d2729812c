// The graph decode (swa_decode_graph_*) on both caches of a DualCache: the
// CUDA cache's graph on the device (optionally captured once into a CUDA
// graph and replayed), the CPU cache's twin on host memory, with identical
// random inputs; every layer's outputs are compared (the CPU backend is
// checked against the FP64 reference in tests/api/decode_graph_test.cc).
#pragma once

#include <cuda_runtime_api.h>

#include <cmath>
#include <memory>
#include <vector>

#include "gpu/gpu_test_util.h"

namespace swa_gpu {

class GraphTwin {
 public:
  // Graphs of `max_seqs` sequences x `tokens` new tokens on both caches.
  GraphTwin(DualCache& dc, uint32_t max_seqs, uint32_t tokens)
      : dc_(dc), max_seqs_(max_seqs), tokens_(tokens) {
    EXPECT_EQ(swa_decode_graph_create(dc.cpu(), max_seqs, tokens, &cpu_), SWA_OK)
        << swa_last_error();
    EXPECT_EQ(swa_decode_graph_create(dc.gpu(), max_seqs, tokens, &gpu_), SWA_OK)
        << swa_last_error();
    const size_t rows = size_t(max_seqs) * tokens;
    for (size_t l = 0; l < dc.num_layers(); ++l) {
      const LayerCfg& c = dc.layer(l);
      auto d = std::make_unique<Dev>();
      d->q.Resize(rows * c.q_heads * c.head_dim * 4);  // room for FP32
      d->k.Resize(rows * c.kv_heads * c.head_dim * 4);
      d->v.Resize(rows * c.kv_heads * c.head_dim * 4);
      d->out.Resize(rows * c.q_heads * c.head_dim * 4);
      dev_.push_back(std::move(d));
    }
    d_slots_.Resize(max_seqs * 4);
    d_seqlen_k_.Resize(max_seqs * 4);
  }
  ~GraphTwin() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    DestroyGraphs();
  }

  // Both graphs take `slots` (host-planned so far).
  void Import(const std::vector<uint32_t>& slots) {
    ASSERT_EQ(swa_decode_graph_import(cpu_, slots.data(), slots.size(), nullptr), SWA_OK)
        << swa_last_error();
    ASSERT_EQ(swa_decode_graph_import(gpu_, slots.data(), slots.size(), dc_.stream()), SWA_OK)
        << swa_last_error();
  }

  // With capture on, the first Step captures plan + every layer on the
  // DualCache's stream (in `mode`) and every Step launches that graph.
  void set_capture(bool on, cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal) {
    capture_ = on;
    mode_ = mode;
  }
  // Called between the capture's last enqueued step and its end (e.g. to
  // make calls that must not break the capture).
  void set_in_capture(std::function<void()> fn) { in_capture_ = std::move(fn); }
  // Rows non-finite on the CPU must be so on the GPU (and the other way);
  // off: any non-finite output fails.
  void set_nonfinite_rows(bool on) { nonfinite_rows_ = on; }

  // One planned step over `slots` (-1 = padding) and `seqlen_k` (host
  // arrays, max_seqs entries when capturing), all layers; compares outputs.
  void Step(const std::vector<int32_t>& slots, const std::vector<int32_t>& seqlen_k, Dtypes dt,
            const DualCache::InputHook& hook = nullptr) {
    const uint32_t n = uint32_t(slots.size());
    const size_t rows = size_t(n) * tokens_;
    std::vector<std::vector<uint8_t>> q(dc_.num_layers()), k(q.size()), v(q.size()),
        out_cpu(q.size());
    ASSERT_EQ(swa_decode_graph_plan(cpu_, slots.data(), seqlen_k.data(), n, nullptr), SWA_OK)
        << swa_last_error();
    for (size_t l = 0; l < dc_.num_layers(); ++l) {
      const LayerCfg& c = dc_.layer(l);
      q[l] = RandomTensor(dc_.rng(), rows * c.q_heads * c.head_dim, dt.q, 1.0f);
      k[l] = RandomTensor(dc_.rng(), rows * c.kv_heads * c.head_dim, dt.kv, 1.5f);
      v[l] = c.shared_kv ? std::vector<uint8_t>()
                         : RandomTensor(dc_.rng(), rows * c.kv_heads * c.head_dim, dt.kv, 1.0f);
      if (hook) hook(l, c, dt.kv, k[l], v[l]);
      out_cpu[l].assign(rows * c.q_heads * c.head_dim * (dt.out == SWA_DTYPE_FP32 ? 4 : 2), 0xFF);
      swa_step_args_t a = Args(l, dt, q[l].data(), k[l].data(), v[l].data(), out_cpu[l].data(),
                               dc_.sinks(l).data(), nullptr);
      ASSERT_EQ(swa_decode_graph_step(cpu_, &a), SWA_OK) << swa_last_error();
      Dev& d = *dev_[l];
      d.q.Upload(q[l].data(), q[l].size());
      d.k.Upload(k[l].data(), k[l].size());
      if (!v[l].empty()) d.v.Upload(v[l].data(), v[l].size());
      CUDA_ASSERT(cudaMemset(d.out.get(), 0xFF, d.out.bytes()));  // NaN poison
    }
    d_slots_.Upload(slots.data(), n * 4);
    d_seqlen_k_.Upload(seqlen_k.data(), n * 4);
    CUDA_ASSERT(cudaDeviceSynchronize());
    if (!capture_) {
      EnqueueGpu(n, dt);
    } else {
      if (exec_ == nullptr) {
        cudaGraph_t g = nullptr;
        CUDA_ASSERT(cudaStreamBeginCapture(dc_.stream(), mode_));
        EnqueueGpu(n, dt);
        if (in_capture_) in_capture_();
        const cudaError_t ended = cudaStreamEndCapture(dc_.stream(), &g);
        ASSERT_FALSE(::testing::Test::HasFatalFailure());
        CUDA_ASSERT(ended);
        CUDA_ASSERT(cudaGraphInstantiate(&exec_, g, 0));
        cudaGraphDestroy(g);
      }
      CUDA_ASSERT(cudaGraphLaunch(exec_, dc_.stream()));
    }
    CUDA_ASSERT(cudaStreamSynchronize(dc_.stream()));
    for (size_t l = 0; l < dc_.num_layers(); ++l) {
      std::vector<uint8_t> got(out_cpu[l].size());
      dev_[l]->out.Download(got.data(), got.size());
      Compare(l, AsDouble(got, dt.out), AsDouble(out_cpu[l], dt.out), dt.out);
    }
    swa_graph_error_t rec;
    EXPECT_EQ(swa_decode_graph_check(gpu_, dc_.stream(), &rec), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_decode_graph_check(cpu_, nullptr, &rec), SWA_OK) << swa_last_error();
  }

  void DestroyGraphs() {
    swa_decode_graph_destroy(cpu_);
    swa_decode_graph_destroy(gpu_);
    cpu_ = gpu_ = nullptr;
  }

 private:
  struct Dev {
    DeviceBuffer q, k, v, out;
  };

  swa_step_args_t Args(size_t l, Dtypes dt, const void* q, const void* k, const void* v,
                       void* out, const float* sinks, void* stream) const {
    swa_step_args_t a;
    swa_step_args_init(&a);
    a.layer = uint32_t(l);
    a.q_dtype = dt.q;
    a.kv_dtype = dt.kv;
    a.out_dtype = dt.out;
    a.q = q;
    a.k_new = k;
    a.v_new = dc_.layer(l).shared_kv ? nullptr : v;
    a.out = out;
    a.sinks = dc_.layer(l).sinks ? sinks : nullptr;
    a.stream = stream;
    return a;
  }

  void EnqueueGpu(uint32_t n, Dtypes dt) {
    ASSERT_EQ(swa_decode_graph_plan(gpu_, static_cast<const int32_t*>(d_slots_.get()),
                                    static_cast<const int32_t*>(d_seqlen_k_.get()), n,
                                    dc_.stream()),
              SWA_OK)
        << swa_last_error();
    for (size_t l = 0; l < dc_.num_layers(); ++l) {
      Dev& d = *dev_[l];
      swa_step_args_t a =
          Args(l, dt, d.q.get(), d.k.get(), d.v.get(), d.out.get(), dc_.device_sinks(l),
               dc_.stream());
      ASSERT_EQ(swa_decode_graph_step(gpu_, &a), SWA_OK) << swa_last_error();
    }
  }

  void Compare(size_t l, const std::vector<double>& got, const std::vector<double>& want,
               swa_dtype_t out) {
    const size_t d = size_t(dc_.layer(l).head_dim);
    std::vector<double> g, w;
    for (size_t r = 0; r < want.size() / d; ++r) {
      bool g_bad = false, w_bad = false;
      for (size_t e = 0; e < d; ++e) {
        g_bad |= !std::isfinite(got[r * d + e]);
        w_bad |= !std::isfinite(want[r * d + e]);
      }
      if (nonfinite_rows_ && (g_bad || w_bad)) {
        EXPECT_EQ(g_bad, w_bad) << "layer " << l << " row " << r;
        continue;
      }
      g.insert(g.end(), got.begin() + r * d, got.begin() + (r + 1) * d);
      w.insert(w.end(), want.begin() + r * d, want.begin() + (r + 1) * d);
    }
    EXPECT_LE(RelL2(g, w), Budget(out)) << "graph decode, layer " << l;
  }

  DualCache& dc_;
  uint32_t max_seqs_, tokens_;
  swa_decode_graph_t* cpu_ = nullptr;
  swa_decode_graph_t* gpu_ = nullptr;
  std::vector<std::unique_ptr<Dev>> dev_;
  DeviceBuffer d_slots_, d_seqlen_k_;
  bool capture_ = false;
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeThreadLocal;
  std::function<void()> in_capture_;
  bool nonfinite_rows_ = false;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace swa_gpu
