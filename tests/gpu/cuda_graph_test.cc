// The graph-capturable decode of the C API (swa_decode_graph_*, executed on
// CUDA by src/backend/cuda/graph_executor.cc): captured once in a CUDA graph,
// replayed with new lengths written to device memory, checked bit for bit
// against host-planned steps.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>

#include "capi/handles.h"
#include "gpu/gpu_test_util.h"

namespace swa_gpu {
namespace {

// ---- The C API (swa_decode_graph_*): capture plan + every layer once, replay
// with new lengths, padding and a refused sequence; compare bit for bit with
// host-planned swa_plan_build + swa_step on a second CUDA cache.

class GraphApiRig {
 public:
  GraphApiRig(std::vector<LayerCfg> layers, uint32_t tokens, uint32_t max_seqs, uint64_t seed)
      : cfg_(std::move(layers)), tokens_(tokens), max_seqs_(max_seqs), rng_(seed) {
    for (const LayerCfg& c : cfg_) descs_.push_back(swa_test::ToDesc(c, SWA_LAYER_STORED));
    swa_config_t c;
    swa_config_init(&c);
    c.window = 32;
    c.draft_tokens = 2;  // R = 35, R - W + 1 = 4
    c.max_slots = 4;
    c.backend = SWA_BACKEND_CUDA;
    c.num_layers = uint32_t(descs_.size());
    c.layers = descs_.data();
    EXPECT_EQ(swa_cache_create(&c, &a_), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_cache_create(&c, &b_), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_plan_create(a_, &plan_a_), SWA_OK);
    EXPECT_EQ(swa_plan_create(b_, &plan_b_), SWA_OK);
    EXPECT_EQ(swa_decode_graph_create(a_, max_seqs, tokens, &graph_), SWA_OK) << swa_last_error();
    cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    const size_t rows = size_t(max_seqs) * tokens;
    for (const LayerCfg& l : cfg_) {
      auto d = std::make_unique<Dev>();
      d->q.Resize(rows * l.q_heads * l.head_dim * 2);
      d->k.Resize(rows * l.kv_heads * l.head_dim * 2);
      d->v.Resize(rows * l.kv_heads * l.head_dim * 2);
      d->out.Resize(rows * l.q_heads * l.head_dim * 2);
      d->lse.Resize(rows * l.q_heads * 4);
      std::vector<float> s(size_t(l.q_heads));
      for (float& x : s) x = std::uniform_real_distribution<float>(-1.5f, 1.5f)(rng_);
      d->sinks.Resize(s.size() * 4);
      d->sinks.Upload(s.data(), s.size() * 4);
      dev_.push_back(std::move(d));
    }
    d_slots_.Resize(max_seqs * 4);
    d_seqlen_k_.Resize(max_seqs * 4);
  }
  ~GraphApiRig() {
    swa_decode_graph_destroy(graph_);
    swa_plan_destroy(plan_a_);
    swa_plan_destroy(plan_b_);
    swa_cache_destroy(a_);
    swa_cache_destroy(b_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  struct Dev {
    DeviceBuffer q, k, v, out, lse, sinks;
  };
  struct Host {
    std::vector<uint8_t> q, k, v;
  };

  swa_step_args_t Args(size_t l, const void* q, const void* k, const void* v, void* out,
                       float* lse) {
    swa_step_args_t a;
    swa_step_args_init(&a);
    a.layer = uint32_t(l);
    a.q_dtype = a.kv_dtype = a.out_dtype = SWA_DTYPE_BF16;
    a.q = q;
    a.k_new = k;
    a.v_new = cfg_[l].shared_kv ? nullptr : v;
    a.out = out;
    a.lse = lse;
    a.sinks = cfg_[l].sinks ? static_cast<const float*>(dev_[l]->sinks.get()) : nullptr;
    a.stream = stream_;
    return a;
  }

  Host Random(size_t l, size_t rows) {
    const LayerCfg& c = cfg_[l];
    Host h;
    h.q = RandomTensor(rng_, rows * c.q_heads * c.head_dim, SWA_DTYPE_BF16, 1.0f);
    h.k = RandomTensor(rng_, rows * c.kv_heads * c.head_dim, SWA_DTYPE_BF16, 1.5f);
    h.v = RandomTensor(rng_, rows * c.kv_heads * c.head_dim, SWA_DTYPE_BF16, 1.0f);
    return h;
  }

  // Host-planned step on `cache` with host inputs `in` (uploaded); outputs downloaded.
  void HostStep(swa_cache_t* cache, swa_plan_t* plan, const std::vector<swa_seq_t>& seqs,
                const std::vector<Host>& in, std::vector<std::vector<uint8_t>>* outs) {
    ASSERT_EQ(swa_plan_build(plan, seqs.data(), uint32_t(seqs.size())), SWA_OK) << swa_last_error();
    outs->resize(cfg_.size());
    for (size_t l = 0; l < cfg_.size(); ++l) {
      DeviceBuffer q(in[l].q.size()), k(in[l].k.size()), v(in[l].v.size() + 1);
      const size_t rows = in[l].q.size() / (size_t(cfg_[l].q_heads) * cfg_[l].head_dim * 2);
      DeviceBuffer out(in[l].q.size());
      q.Upload(in[l].q.data(), in[l].q.size());
      k.Upload(in[l].k.data(), in[l].k.size());
      v.Upload(in[l].v.data(), in[l].v.size());
      CUDA_ASSERT(cudaMemset(out.get(), 0xFF, out.bytes()));
      CUDA_ASSERT(cudaDeviceSynchronize());
      swa_step_args_t a = Args(l, q.get(), k.get(), v.get(), out.get(), nullptr);
      ASSERT_EQ(swa_step(cache, plan, &a), SWA_OK) << swa_last_error();
      CUDA_ASSERT(cudaStreamSynchronize(stream_));
      (*outs)[l].resize(out.bytes());
      out.Download((*outs)[l].data(), out.bytes());
      (void)rows;
    }
  }

  void ComparePools() {
    swa_layout_t lay;
    lay.struct_size = sizeof lay;
    swa_cache_layout(a_, &lay);
    swa_tensor_view_t va, vb;
    va.struct_size = vb.struct_size = sizeof va;
    ASSERT_EQ(swa_cache_layer_view(a_, 0, &va), SWA_OK);  // layer 0's ring starts the slot
    ASSERT_EQ(swa_cache_layer_view(b_, 0, &vb), SWA_OK);
    std::vector<uint8_t> ha(lay.pool_bytes), hb(lay.pool_bytes);
    CUDA_ASSERT(cudaDeviceSynchronize());
    CUDA_ASSERT(cudaMemcpy(ha.data(), va.data, ha.size(), cudaMemcpyDeviceToHost));
    CUDA_ASSERT(cudaMemcpy(hb.data(), vb.data, hb.size(), cudaMemcpyDeviceToHost));
    ASSERT_TRUE(ha == hb) << "ring bytes differ";
  }

  std::vector<LayerCfg> cfg_;
  std::vector<swa_layer_desc_t> descs_;
  uint32_t tokens_, max_seqs_;
  std::mt19937_64 rng_;
  swa_cache_t *a_ = nullptr, *b_ = nullptr;
  swa_plan_t *plan_a_ = nullptr, *plan_b_ = nullptr;
  swa_decode_graph_t* graph_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::vector<std::unique_ptr<Dev>> dev_;
  DeviceBuffer d_slots_, d_seqlen_k_;
};

TEST(CudaGraph, CApiCaptureReplayMatchesHostPlannedSteps) {
  SWA_SKIP_WITHOUT_DEVICE();
  using Host = GraphApiRig::Host;
  LayerCfg mqa{SWA_FORMAT_MXFP8, 16, 1, 512, true, true};
  LayerCfg gqa{SWA_FORMAT_BF16, 8, 2, 128, false, true};
  gqa.softcap = 3.0f;
  LayerCfg ds_mla{SWA_FORMAT_FP8_DS_MLA, 16, 1, 512, true, false};  // DeepSeek-V4's record
  ds_mla.rope_style = SWA_ROPE_GPTJ;
  ds_mla.rope_first = 448;
  ds_mla.rope_dims = 64;
  const uint32_t tokens = 3, max_seqs = 4;
  GraphApiRig rig({mqa, gqa, ds_mla}, tokens, max_seqs, 77);
  const size_t L = rig.cfg_.size();
  // Prefill slots 0, 1, 2 on both caches with the same inputs.
  std::vector<int32_t> len = {40, 9, 66};
  for (uint32_t s = 0; s < 3; ++s) {
    std::vector<Host> in;
    for (size_t l = 0; l < L; ++l) in.push_back(rig.Random(l, size_t(len[s])));
    std::vector<std::vector<uint8_t>> oa, ob;
    const std::vector<swa_seq_t> seq = {{s, len[s], len[s], 0}};
    rig.HostStep(rig.a_, rig.plan_a_, seq, in, &oa);
    rig.HostStep(rig.b_, rig.plan_b_, seq, in, &ob);
    ASSERT_FALSE(HasFatalFailure());
  }
  const uint32_t imported[3] = {0, 1, 2};
  ASSERT_EQ(swa_decode_graph_import(rig.graph_, imported, 3, rig.stream_), SWA_OK) << swa_last_error();

  // Capture: plan + every layer, once.
  const int32_t* d_slots = static_cast<const int32_t*>(rig.d_slots_.get());
  const int32_t* d_k = static_cast<const int32_t*>(rig.d_seqlen_k_.get());
  cudaGraph_t cg = nullptr;
  CUDA_ASSERT(cudaStreamBeginCapture(rig.stream_, cudaStreamCaptureModeThreadLocal));
  swa_status_t st = swa_decode_graph_plan(rig.graph_, d_slots, d_k, max_seqs, rig.stream_);
  for (size_t l = 0; l < L && st == SWA_OK; ++l) {
    auto& d = *rig.dev_[l];
    swa_step_args_t a = rig.Args(l, d.q.get(), d.k.get(), d.v.get(), d.out.get(),
                                 static_cast<float*>(d.lse.get()));
    st = swa_decode_graph_step(rig.graph_, &a);
  }
  CUDA_ASSERT(cudaStreamEndCapture(rig.stream_, &cg));
  ASSERT_EQ(st, SWA_OK) << swa_last_error();
  cudaGraphExec_t exec = nullptr;
  CUDA_ASSERT(cudaGraphInstantiate(&exec, cg, 0));

  for (int it = 0; it < 7; ++it) {
    // Batch: slots at entries 0, 1, 3; entry 2 is padding. Replay 5 has a gap in entry 3.
    const bool gap = it == 5;
    std::vector<int32_t> slots = {1, 0, -1, 2}, k(max_seqs, 0);
    std::vector<bool> valid = {true, true, false, !gap};
    for (int e : {0, 1, 3}) {
      const int32_t s = slots[e];
      const int32_t back = (it + s) % 3 == 0 ? std::min<int32_t>(2, len[s]) : 0;  // rewind
      k[e] = len[s] - back + int32_t(tokens);
      if (e == 3 && gap) k[e] = len[s] + 2 + int32_t(tokens);
    }
    CUDA_ASSERT(cudaMemcpy(rig.d_slots_.get(), slots.data(), max_seqs * 4, cudaMemcpyHostToDevice));
    CUDA_ASSERT(cudaMemcpy(rig.d_seqlen_k_.get(), k.data(), max_seqs * 4, cudaMemcpyHostToDevice));
    std::vector<Host> in_a, in_b;
    for (size_t l = 0; l < L; ++l) {
      in_a.push_back(rig.Random(l, size_t(max_seqs) * tokens));
      auto& d = *rig.dev_[l];
      d.q.Upload(in_a[l].q.data(), in_a[l].q.size());
      d.k.Upload(in_a[l].k.data(), in_a[l].k.size());
      d.v.Upload(in_a[l].v.data(), in_a[l].v.size());
      CUDA_ASSERT(cudaMemset(d.out.get(), 0xFF, d.out.bytes()));
      CUDA_ASSERT(cudaMemset(d.lse.get(), 0xFF, d.lse.bytes()));
      Host g;  // the valid entries' rows for the host-planned twin
      const LayerCfg& c = rig.cfg_[l];
      const size_t qr = size_t(c.q_heads) * c.head_dim * 2 * tokens;
      const size_t kr = size_t(c.kv_heads) * c.head_dim * 2 * tokens;
      for (int e = 0; e < int(max_seqs); ++e)
        if (valid[e]) {
          g.q.insert(g.q.end(), in_a[l].q.begin() + e * qr, in_a[l].q.begin() + (e + 1) * qr);
          g.k.insert(g.k.end(), in_a[l].k.begin() + e * kr, in_a[l].k.begin() + (e + 1) * kr);
          g.v.insert(g.v.end(), in_a[l].v.begin() + e * kr, in_a[l].v.begin() + (e + 1) * kr);
        }
      in_b.push_back(std::move(g));
    }
    CUDA_ASSERT(cudaDeviceSynchronize());
    CUDA_ASSERT(cudaGraphLaunch(exec, rig.stream_));
    swa_graph_error_t rec;
    const swa_status_t check = swa_decode_graph_check(rig.graph_, rig.stream_, &rec);
    if (gap) {
      EXPECT_EQ(check, SWA_FAILED_PRECONDITION) << swa_last_error();
      EXPECT_EQ(rec.reason, SWA_GRAPH_GAP);
      EXPECT_EQ(rec.seq, 3);
      ASSERT_EQ(swa_decode_graph_reset_error(rig.graph_, rig.stream_), SWA_OK);
    } else {
      ASSERT_EQ(check, SWA_OK) << "replay " << it << ": " << swa_last_error();
    }
    std::vector<swa_seq_t> host;
    for (int e = 0; e < int(max_seqs); ++e)
      if (valid[e]) {
        host.push_back({uint32_t(slots[e]), int32_t(tokens), k[e], 0});
        len[slots[e]] = k[e];
      }
    std::vector<std::vector<uint8_t>> ob;
    rig.HostStep(rig.b_, rig.plan_b_, host, in_b, &ob);
    ASSERT_FALSE(HasFatalFailure());
    for (size_t l = 0; l < L; ++l) {
      const LayerCfg& c = rig.cfg_[l];
      std::vector<uint8_t> oa(rig.dev_[l]->out.bytes());
      rig.dev_[l]->out.Download(oa.data(), oa.size());
      const size_t qr = size_t(c.q_heads) * c.head_dim * 2 * tokens;
      size_t j = 0;
      for (int e = 0; e < int(max_seqs); ++e) {
        if (valid[e]) {
          ASSERT_EQ(0, std::memcmp(oa.data() + e * qr, ob[l].data() + j * qr, qr))
              << "replay " << it << " layer " << l << " entry " << e;
          ++j;
        } else {
          for (size_t b = 0; b < qr; ++b) ASSERT_EQ(oa[e * qr + b], 0) << "entry " << e;
        }
      }
      // LSE rows: -inf (an empty row's, which a merge weighs 0) where the entry
      // did not run, finite where it did.
      std::vector<float> la(rig.dev_[l]->lse.bytes() / sizeof(float));
      rig.dev_[l]->lse.Download(la.data(), la.size() * sizeof(float));
      const size_t lr = size_t(c.q_heads) * tokens;
      for (int e = 0; e < int(max_seqs); ++e)
        for (size_t h = 0; h < lr; ++h) {
          const float x = la[e * lr + h];
          if (valid[e])
            ASSERT_TRUE(std::isfinite(x)) << "replay " << it << " layer " << l << " entry " << e;
          else
            ASSERT_EQ(x, -std::numeric_limits<float>::infinity())
                << "replay " << it << " layer " << l << " entry " << e;
        }
    }
    rig.ComparePools();
    ASSERT_FALSE(HasFatalFailure()) << "replay " << it;
  }
  // The host learns the lengths; a host-planned step on both caches agrees.
  const int32_t ends[3] = {len[0], len[1], len[2]};
  ASSERT_EQ(swa_slot_set_lengths(rig.a_, imported, ends, nullptr, 3), SWA_OK) << swa_last_error();
  std::vector<Host> in;
  for (size_t l = 0; l < L; ++l) in.push_back(rig.Random(l, 1));
  std::vector<std::vector<uint8_t>> oa, ob;
  rig.HostStep(rig.a_, rig.plan_a_, {{0, 1, len[0] + 1, 0}}, in, &oa);
  rig.HostStep(rig.b_, rig.plan_b_, {{0, 1, len[0] + 1, 0}}, in, &ob);
  EXPECT_TRUE(oa == ob);
  rig.ComparePools();
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(cg);
}

}  // namespace
}  // namespace swa_gpu
