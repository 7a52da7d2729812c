// Shared by the GPU tests: device detection, and a pair of caches (CPU and
// CUDA backends, same configuration) driven through the public API with
// identical random inputs, so that every CUDA result is checked against the
// CPU backend (itself checked against the FP64 reference in tests/api/).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "api/test_layers.h"
#include "gtest/gtest.h"
#include "swacache.h"

namespace swa_gpu {

// Empty when a device is usable, else why not (for GTEST_SKIP).
inline std::string NoDeviceReason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return std::string("no usable CUDA device: cudaGetDeviceCount failed with ") +
           cudaGetErrorString(e);
  }
  if (n == 0) return "no CUDA device on this machine";
  return "";
}

#define SWA_SKIP_WITHOUT_DEVICE()                                   \
  do {                                                              \
    const std::string why = ::swa_gpu::NoDeviceReason();            \
    if (!why.empty()) GTEST_SKIP() << why;                          \
  } while (0)

#define CUDA_ASSERT(expr)                                                            \
  do {                                                                               \
    const cudaError_t e_ = (expr);                                                   \
    ASSERT_EQ(e_, cudaSuccess) << #expr << ": " << cudaGetErrorString(e_);           \
  } while (0)

using swa_test::FromBf16;
using swa_test::ToBf16;

// Random tensor bytes in `dtype` (FP32 or BF16 values in [-a, a]).
inline std::vector<uint8_t> RandomTensor(std::mt19937_64& rng, size_t n, swa_dtype_t dtype,
                                         float a) {
  std::uniform_real_distribution<float> d(-a, a);
  std::vector<uint8_t> out(n * (dtype == SWA_DTYPE_FP32 ? 4 : 2));
  for (size_t i = 0; i < n; ++i) {
    const float v = d(rng);
    if (dtype == SWA_DTYPE_FP32)
      std::memcpy(out.data() + 4 * i, &v, 4);
    else {
      const uint16_t h = ToBf16(v);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

inline std::vector<double> AsDouble(const std::vector<uint8_t>& bytes, swa_dtype_t dtype) {
  const size_t n = bytes.size() / (dtype == SWA_DTYPE_FP32 ? 4 : 2);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (dtype == SWA_DTYPE_FP32) {
      float f;
      std::memcpy(&f, bytes.data() + 4 * i, 4);
      out[i] = f;
    } else {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      out[i] = FromBf16(h);
    }
  }
  return out;
}

// Device buffer with RAII.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { Resize(bytes); }
  ~DeviceBuffer() {
    if (p_ != nullptr) cudaFree(p_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void Resize(size_t bytes) {
    if (p_ != nullptr) cudaFree(p_);
    p_ = nullptr;
    bytes_ = bytes;
    if (cudaMalloc(&p_, bytes == 0 ? 1 : bytes) != cudaSuccess) p_ = nullptr;
  }
  void* get() const { return p_; }
  size_t bytes() const { return bytes_; }
  void Upload(const void* host, size_t n) { cudaMemcpy(p_, host, n, cudaMemcpyHostToDevice); }
  void Download(void* host, size_t n) const { cudaMemcpy(host, p_, n, cudaMemcpyDeviceToHost); }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

using swa_test::LayerCfg;

struct Seq {
  uint32_t slot;
  int32_t seqlen_q, seqlen_k, valid_start;
};

struct Dtypes {
  swa_dtype_t q, kv, out;
};

// Relative L2 error of `got` against `ref`; +inf when got has a NaN or Inf.
inline double RelL2(const std::vector<double>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// docs/semantics.md "Error budgets", doubled: both backends sit within them of the FP64 reference.
inline double Budget(swa_dtype_t out) { return out == SWA_DTYPE_FP32 ? 2e-5 : 2e-2; }

class DualCache {
 public:
  DualCache(uint32_t window, uint32_t draft, std::vector<LayerCfg> layers, uint32_t slots,
            uint64_t seed)
      : layers_(std::move(layers)), rng_(seed) {
    for (size_t i = 0; i < layers_.size(); ++i) {
      const swa_layer_desc_t d =
          swa_test::ToDesc(layers_[i], i % 2 ? SWA_LAYER_DROPPED : SWA_LAYER_STORED);
      descs_.push_back(d);
      std::vector<float> s(layers_[i].q_heads);
      std::uniform_real_distribution<float> u(-1.5f, 1.5f);
      for (float& x : s) x = u(rng_);
      sinks_.push_back(s);
    }
    swa_config_t c;
    swa_config_init(&c);
    c.window = window;
    c.draft_tokens = draft;
    c.max_slots = slots;
    c.num_threads = 2;
    c.num_layers = uint32_t(descs_.size());
    c.layers = descs_.data();
    c.backend = SWA_BACKEND_CPU;
    EXPECT_EQ(swa_cache_create(&c, &cpu_), SWA_OK) << swa_last_error();
    c.backend = SWA_BACKEND_CUDA;
    EXPECT_EQ(swa_cache_create(&c, &gpu_), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_plan_create(cpu_, &cpu_plan_), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_plan_create(gpu_, &gpu_plan_), SWA_OK) << swa_last_error();
    for (uint32_t i = 0; i < slots; ++i) {
      uint32_t a = 0, b = 0;
      EXPECT_EQ(swa_slot_alloc(cpu_, &a), SWA_OK);
      EXPECT_EQ(swa_slot_alloc(gpu_, &b), SWA_OK);
      EXPECT_EQ(a, b);
    }
    cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    for (size_t i = 0; i < layers_.size(); ++i) {
      d_sinks_.emplace_back(std::make_unique<DeviceBuffer>(sinks_[i].size() * 4));
      d_sinks_.back()->Upload(sinks_[i].data(), sinks_[i].size() * 4);
    }
  }
  ~DualCache() {
    swa_plan_destroy(cpu_plan_);
    swa_plan_destroy(gpu_plan_);
    swa_cache_destroy(cpu_);
    swa_cache_destroy(gpu_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  swa_cache_t* gpu() { return gpu_; }
  swa_cache_t* cpu() { return cpu_; }
  cudaStream_t stream() const { return stream_; }
  std::mt19937_64& rng() { return rng_; }
  const LayerCfg& layer(size_t i) const { return layers_[i]; }
  size_t num_layers() const { return layers_.size(); }
  const std::vector<float>& sinks(size_t l) const { return sinks_[l]; }
  const float* device_sinks(size_t l) const {
    return static_cast<const float*>(d_sinks_[l]->get());
  }
  double worst_error() const { return worst_; }
  // Also ask both backends for the per-row LSE and compare it.
  void set_lse(bool on) { lse_ = on; }
  // Fraction of pool bytes allowed to differ after a step (default 0: identical).
  // RoPE layers: the device's cosf/sinf may differ from the host's by an ulp,
  // which moves a stored value across a rounding boundary now and then.
  void set_pool_tolerance(double fraction) { pool_tolerance_ = fraction; }
  // Called with each layer's random K and V inputs (V empty for shared K/V)
  // before the step: a test writes NaN / Inf into chosen tokens.
  using InputHook = std::function<void(size_t layer, const LayerCfg& cfg, swa_dtype_t kv_dtype,
                                       std::vector<uint8_t>& k, std::vector<uint8_t>& v)>;
  void set_input_hook(InputHook hook) { hook_ = std::move(hook); }
  // Called with each layer's random queries before the step.
  using QueryHook =
      std::function<void(size_t layer, const LayerCfg& cfg, swa_dtype_t q_dtype,
                         std::vector<uint8_t>& q)>;
  void set_query_hook(QueryHook hook) { query_hook_ = std::move(hook); }
  // Outputs compared row by row (a row = one token's query head): a row is
  // non-finite on the GPU exactly when it is on the CPU, and the finite rows
  // are within the budget. Off: any non-finite output fails.
  void set_nonfinite_rows(bool on) { nonfinite_rows_ = on; }
  // Rows found non-finite (on both backends) so far, with set_nonfinite_rows.
  size_t nonfinite_rows_seen() const { return nonfinite_seen_; }

  // Plans the step on both caches and runs every layer; checks outputs and,
  // after the step, that both pools hold the same bytes.
  void Step(const std::vector<Seq>& seqs, Dtypes dt) {
    std::vector<swa_seq_t> in;
    int32_t T = 0;
    for (const Seq& s : seqs) {
      in.push_back({s.slot, s.seqlen_q, s.seqlen_k, s.valid_start});
      T += s.seqlen_q;
    }
    ASSERT_EQ(swa_plan_build(cpu_plan_, in.data(), uint32_t(in.size())), SWA_OK) << swa_last_error();
    ASSERT_EQ(swa_plan_build(gpu_plan_, in.data(), uint32_t(in.size())), SWA_OK) << swa_last_error();
    for (size_t l = 0; l < layers_.size(); ++l) RunLayer(l, T, dt);
    ComparePools();
  }

  void ComparePools() {
    swa_layout_t lay;
    lay.struct_size = sizeof lay;
    ASSERT_EQ(swa_cache_layout(gpu_, &lay), SWA_OK);
    swa_layer_layout_t l0;
    l0.struct_size = sizeof l0;
    ASSERT_EQ(swa_cache_layer_layout(gpu_, 0, &l0), SWA_OK);
    swa_tensor_view_t vc, vg;
    vc.struct_size = vg.struct_size = sizeof vc;
    ASSERT_EQ(swa_cache_layer_view(cpu_, 0, &vc), SWA_OK);
    ASSERT_EQ(swa_cache_layer_view(gpu_, 0, &vg), SWA_OK);
    ASSERT_EQ(vg.backend, SWA_BACKEND_CUDA);
    const uint8_t* cpu_pool = static_cast<const uint8_t*>(vc.data) - l0.ring_offset;
    const uint8_t* gpu_pool = static_cast<const uint8_t*>(vg.data) - l0.ring_offset;
    std::vector<uint8_t> host(lay.pool_bytes);
    CUDA_ASSERT(cudaStreamSynchronize(stream_));
    CUDA_ASSERT(cudaMemcpy(host.data(), gpu_pool, lay.pool_bytes, cudaMemcpyDeviceToHost));
    size_t first = lay.pool_bytes, differing = 0;
    for (size_t i = 0; i < lay.pool_bytes; ++i)
      if (host[i] != cpu_pool[i]) {
        if (differing++ == 0) first = i;
      }
    if (pool_tolerance_ > 0) {
      ASSERT_LE(double(differing), pool_tolerance_ * double(lay.pool_bytes))
          << differing << " of " << lay.pool_bytes << " pool bytes differ, first at byte "
          << first;
      return;
    }
    ASSERT_EQ(first, lay.pool_bytes) << "pools differ first at byte " << first << " (slot "
                                     << first / lay.slot_bytes << ", offset "
                                     << first % lay.slot_bytes << ")";
  }

 private:
  void RunLayer(size_t l, int32_t T, Dtypes dt) {
    const LayerCfg& c = layers_[l];
    const size_t nq = size_t(T) * c.q_heads * c.head_dim;
    const size_t nkv = size_t(T) * c.kv_heads * c.head_dim;
    auto q = RandomTensor(rng_, nq, dt.q, 1.0f);
    if (query_hook_) query_hook_(l, c, dt.q, q);
    auto k = RandomTensor(rng_, nkv, dt.kv, 1.5f);
    auto v = c.shared_kv ? std::vector<uint8_t>() : RandomTensor(rng_, nkv, dt.kv, 1.0f);
    if (hook_) hook_(l, c, dt.kv, k, v);
    const size_t out_bytes = nq * (dt.out == SWA_DTYPE_FP32 ? 4 : 2);
    std::vector<uint8_t> out_cpu(out_bytes, 0xFF), out_gpu(out_bytes, 0xFF);  // NaN poison

    swa_step_args_t a;
    swa_step_args_init(&a);
    a.layer = uint32_t(l);
    a.q_dtype = dt.q;
    a.kv_dtype = dt.kv;
    a.out_dtype = dt.out;
    a.q = q.data();
    a.k_new = k.data();
    a.v_new = c.shared_kv ? nullptr : v.data();
    a.out = out_cpu.data();
    a.sinks = c.sinks ? sinks_[l].data() : nullptr;
    const size_t rows = size_t(T) * c.q_heads;
    std::vector<float> lse_cpu(lse_ ? rows : 0, NAN), lse_gpu(lse_cpu.size(), NAN);
    a.lse = lse_ ? lse_cpu.data() : nullptr;
    ASSERT_EQ(swa_step(cpu_, cpu_plan_, &a), SWA_OK) << swa_last_error();

    DeviceBuffer dq(q.size()), dk(k.size()), dv(v.size()), dout(out_bytes);
    dq.Upload(q.data(), q.size());
    dk.Upload(k.data(), k.size());
    if (!v.empty()) dv.Upload(v.data(), v.size());
    CUDA_ASSERT(cudaMemset(dout.get(), 0xFF, out_bytes));
    DeviceBuffer dlse(rows * 4);
    CUDA_ASSERT(cudaMemset(dlse.get(), 0xFF, rows * 4));  // NaN poison
    CUDA_ASSERT(cudaDeviceSynchronize());
    a.lse = lse_ ? static_cast<float*>(dlse.get()) : nullptr;
    a.q = dq.get();
    a.k_new = dk.get();
    a.v_new = c.shared_kv ? nullptr : dv.get();
    a.out = dout.get();
    a.sinks = c.sinks ? device_sinks(l) : nullptr;
    a.stream = stream_;
    ASSERT_EQ(swa_step(gpu_, gpu_plan_, &a), SWA_OK) << swa_last_error();
    CUDA_ASSERT(cudaStreamSynchronize(stream_));
    CUDA_ASSERT(cudaGetLastError());
    dout.Download(out_gpu.data(), out_bytes);

    if (lse_) {
      dlse.Download(lse_gpu.data(), rows * 4);
      // The same tolerance as the outputs, relative to 1 + |lse|.
      for (size_t i = 0; i < rows; ++i) {
        const float want = lse_cpu[i], got = lse_gpu[i];
        if (std::isinf(want)) {
          EXPECT_EQ(got, want) << "lse row " << i << " of layer " << l;
        } else {
          EXPECT_LE(std::fabs(double(got) - double(want)),
                    Budget(dt.out) * (1.0 + std::fabs(double(want))))
              << "lse row " << i << " of layer " << l << ": cuda " << got << ", cpu " << want
              << " (out dtype " << dt.out << ")";
        }
        if (::testing::Test::HasFailure()) break;
      }
    }
    std::vector<double> got = AsDouble(out_gpu, dt.out), want = AsDouble(out_cpu, dt.out);
    if (nonfinite_rows_) KeepFiniteRows(l, c.head_dim, &got, &want);
    const double err = RelL2(got, want);
    worst_ = std::max(worst_, err);
    EXPECT_LE(err, Budget(dt.out)) << "layer " << l << " (format " << c.format << ", Hq "
                                   << c.q_heads << ", Hkv " << c.kv_heads << ", D " << c.head_dim
                                   << ", shared " << c.shared_kv << ", sinks " << c.sinks
                                   << ", rope " << c.rope_style << " " << c.rope_first << "+"
                                   << c.rope_dims << ", softcap " << c.softcap
                                   << ", out dtype " << dt.out << ")";
  }

  // Checks that the same rows are non-finite on both backends and drops them.
  void KeepFiniteRows(size_t l, int d, std::vector<double>* got, std::vector<double>* want) {
    std::vector<double> g, w;
    const size_t rows = want->size() / size_t(d);
    for (size_t r = 0; r < rows; ++r) {
      bool g_bad = false, w_bad = false;
      for (int e = 0; e < d; ++e) {
        g_bad |= !std::isfinite((*got)[r * d + e]);
        w_bad |= !std::isfinite((*want)[r * d + e]);
      }
      EXPECT_EQ(g_bad, w_bad) << "layer " << l << " row " << r << " (token "
                              << r / size_t(layers_[l].q_heads) << ", head "
                              << r % size_t(layers_[l].q_heads) << "): non-finite on "
                              << (g_bad ? "the GPU only" : "the CPU only");
      if (g_bad || w_bad) {
        nonfinite_seen_ += g_bad && w_bad;
        continue;
      }
      g.insert(g.end(), got->begin() + r * d, got->begin() + (r + 1) * d);
      w.insert(w.end(), want->begin() + r * d, want->begin() + (r + 1) * d);
    }
    *got = std::move(g);
    *want = std::move(w);
  }

  std::vector<LayerCfg> layers_;
  std::vector<swa_layer_desc_t> descs_;
  std::vector<std::vector<float>> sinks_;
  std::vector<std::unique_ptr<DeviceBuffer>> d_sinks_;
  std::mt19937_64 rng_;
  swa_cache_t* cpu_ = nullptr;
  swa_cache_t* gpu_ = nullptr;
  swa_plan_t* cpu_plan_ = nullptr;
  swa_plan_t* gpu_plan_ = nullptr;
  cudaStream_t stream_ = nullptr;
  double worst_ = 0;
  bool lse_ = false;
  double pool_tolerance_ = 0;
  InputHook hook_;
  QueryHook query_hook_;
  bool nonfinite_rows_ = false;
  size_t nonfinite_seen_ = 0;
};

}  // namespace swa_gpu
