// The CUDA executor of the graph-capturable decode (backend/graph_work.h):
// one arena allocated at creation; Plan() and Step() only enqueue kernels
// (kernels/plan/graph_plan.h, the encode and decode-attention kernels of
// DeviceDecodeStep), so both are legal inside stream capture. The encoder's
// non-finite count accumulates in the arena; the backend's GraphCounters
// reads it when the cache's stats are read (device_scratch.h).
#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_status.h"
#include "backend/cuda/step_params.h"
#include "kernels/attention/attention.h"
#include "kernels/plan/graph_plan.h"
#include "kernels/step/kv_rows.h"

namespace swa::cuda {
namespace {

size_t Align256(size_t x) { return (x + 255) & ~size_t{255}; }

class CudaGraph final : public GraphExecutor {
 public:
  CudaGraph(CudaBackend& backend, const GraphSetup& setup)
      : backend_(backend), device_(backend.device()), s_(setup) {}
  ~CudaGraph() override {
    if (arena_ == nullptr) return;
    DeviceGuard guard(device_);
    if (!guard.status().ok()) return;
    if (counted_) {
      // Replays still running add to the counter: let them finish first
      // (cudaFree below waits for the device anyway), then keep its last counts.
      cudaDeviceSynchronize();
      backend_.graph_counters().Remove(nonfinite_);
    }
    cudaFree(arena_);
  }

  absl::Status Init() {
    const size_t slots = size_t(s_.max_slots), seqs = size_t(s_.max_seqs);
    const size_t rows = seqs * size_t(s_.tokens);
    size_t at = 0;
    auto take = [&](size_t bytes) {
      const size_t o = at;
      at = Align256(at + bytes);
      return o;
    };
    const size_t o_table = take(slots * sizeof(plan::GraphSlot));
    const size_t o_claim = take(slots * sizeof(int32_t));
    const size_t o_reason = take(seqs * sizeof(int32_t));
    const size_t o_seqs = take(seqs * sizeof(PlannedSeq));
    const size_t o_ol = take(rows * 2 * sizeof(int32_t));
    const size_t o_sr = take(rows * sizeof(int32_t));
    const size_t o_err = take(sizeof(plan::GraphError));
    const size_t o_ent = take(slots * sizeof(kernels::GraphSlotEntry));
    const size_t o_nf = take(sizeof(unsigned long long));
    DeviceGuard guard(device_);
    SWA_RETURN_IF_ERROR(guard.status());
    SWA_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&arena_), at),
                             "cudaMalloc of the graph decode arena");
    SWA_CUDA_RETURN_IF_ERROR(cudaMemset(arena_, 0, at), "cudaMemset");
    // Unclaimed slots: any value above every sequence index.
    SWA_CUDA_RETURN_IF_ERROR(cudaMemset(arena_ + o_claim, 0x7F, slots * sizeof(int32_t)),
                             "cudaMemset");
    SWA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    table_ = reinterpret_cast<plan::GraphSlot*>(arena_ + o_table);
    claim_ = reinterpret_cast<int32_t*>(arena_ + o_claim);
    reason_ = reinterpret_cast<int32_t*>(arena_ + o_reason);
    seqs_ = reinterpret_cast<PlannedSeq*>(arena_ + o_seqs);
    offset_len_ = reinterpret_cast<int32_t*>(arena_ + o_ol);
    store_rows_ = reinterpret_cast<int32_t*>(arena_ + o_sr);
    error_ = reinterpret_cast<plan::GraphError*>(arena_ + o_err);
    entries_ = reinterpret_cast<kernels::GraphSlotEntry*>(arena_ + o_ent);
    nonfinite_ = reinterpret_cast<unsigned long long*>(arena_ + o_nf);
    SWA_RETURN_IF_ERROR(backend_.graph_counters().Add(nonfinite_));
    counted_ = true;
    return absl::OkStatus();
  }

  absl::Status SetSlots(const uint32_t* slots, const plan::GraphSlot* values, size_t n,
                        void* stream) override {
    DeviceGuard guard(device_);
    SWA_RETURN_IF_ERROR(guard.status());
    const cudaStream_t st = static_cast<cudaStream_t>(stream);
    std::vector<kernels::GraphSlotEntry> host;
    for (size_t first = 0; first < n; first += size_t(s_.max_slots)) {
      const size_t m = std::min(n - first, size_t(s_.max_slots));
      host.resize(m);
      for (size_t i = 0; i < m; ++i) host[i] = {slots[first + i], values[first + i]};
      // From pageable memory: returns once `host` has been staged, so it may be reused.
      SWA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(entries_, host.data(), m * sizeof host[0],
                                               cudaMemcpyHostToDevice, st),
                               "copy of the slot lengths to the graph");
      SWA_CUDA_RETURN_IF_ERROR(kernels::LaunchGraphSetSlots(table_, entries_, int32_t(m), st),
                               "graph slot update");
    }
    return absl::OkStatus();
  }

  absl::Status Plan(const int32_t* slots, const int32_t* seqlen_k, int32_t n_seqs,
                    void* stream) override {
    DeviceGuard guard(device_);
    SWA_RETURN_IF_ERROR(guard.status());
    kernels::GraphPlanParams p;
    p.slots = slots;
    p.seqlen_k = seqlen_k;
    p.n_seqs = n_seqs;
    p.tokens = s_.tokens;
    p.max_slots = s_.max_slots;
    p.window = s_.window;
    p.ring_len = s_.ring_len;
    p.table = table_;
    p.claim = claim_;
    p.reason = reason_;
    p.seqs = seqs_;
    p.offset_len = offset_len_;
    p.store_rows = store_rows_;
    p.error = error_;
    SWA_CUDA_RETURN_IF_ERROR(kernels::LaunchGraphPlan(p, static_cast<cudaStream_t>(stream)),
                             "graph decode planner");
    n_seqs_ = n_seqs;
    return absl::OkStatus();
  }

  absl::Status Step(const StepLayer& L, const StepTensors& x, float scale,
                    StepResult*) override {
    if (n_seqs_ == 0) return absl::OkStatus();
    DeviceGuard guard(device_);
    SWA_RETURN_IF_ERROR(guard.status());
    const cudaStream_t stream = static_cast<cudaStream_t>(x.stream);
    const int32_t rows = n_seqs_ * s_.tokens;
    kernels::EncodeParams enc = EncodeParamsOf(L, x, rows);
    enc.store_rows = store_rows_;  // -1 for padding and refused sequences
    enc.nonfinite = nonfinite_;
    SWA_CUDA_RETURN_IF_ERROR(kernels::LaunchEncodeKv(enc, stream), "encode K/V into the ring");

    kernels::AttentionParams at = AttentionParamsOf(L, x, scale);
    // The tiles of the backend's limit (SWACACHE_CUDA_SMEM_LIMIT included).
    SWA_ASSIGN_OR_RETURN(at.variant, backend_.AttentionVariantOf(L));
    at.seqs = seqs_;
    at.n_seqs = n_seqs_;
    at.max_seqlen_q = s_.tokens;
    at.offset_len = offset_len_;
    at.ring = L.ring;
    SWA_CUDA_RETURN_IF_ERROR(kernels::LaunchDecodeAttention(at, stream), "decode attention");

    const size_t elem = x.out_dtype == Dtype::kFp32 ? 4 : 2;
    kernels::GraphZeroParams z;
    z.seqs = seqs_;
    z.n_seqs = n_seqs_;
    z.tokens = s_.tokens;
    z.out = static_cast<uint32_t*>(x.out);
    z.out_row_words = int32_t(size_t(L.q_heads) * L.head_dim * elem / 4);
    z.lse = x.lse;
    z.lse_row = L.q_heads;
    return CudaStatus(kernels::LaunchGraphZeroRows(z, stream), "zero rows of refused sequences");
  }

  plan::GraphError* error_record() override { return error_; }

  absl::Status ReadError(void* stream, plan::GraphError* out) override {
    DeviceGuard guard(device_);
    SWA_RETURN_IF_ERROR(guard.status());
    const cudaStream_t st = static_cast<cudaStream_t>(stream);
    SWA_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(out, error_, sizeof *out, cudaMemcpyDeviceToHost, st),
        "read of the graph error record");
    SWA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(st), "cudaStreamSynchronize");
    return absl::OkStatus();
  }

  absl::Status ResetError(void* stream) override {
    DeviceGuard guard(device_);
    SWA_RETURN_IF_ERROR(guard.status());
    return CudaStatus(
        cudaMemsetAsync(error_, 0, sizeof *error_, static_cast<cudaStream_t>(stream)),
        "reset of the graph error record");
  }

 private:
  CudaBackend& backend_;  // outlives the graph (the cache owns it)
  const int device_;
  const GraphSetup s_;
  bool counted_ = false;  // nonfinite_ is registered with the backend
  int32_t n_seqs_ = 0;  // of the last Plan(): fixed for a captured graph
  uint8_t* arena_ = nullptr;
  plan::GraphSlot* table_ = nullptr;
  int32_t* claim_ = nullptr;
  int32_t* reason_ = nullptr;
  PlannedSeq* seqs_ = nullptr;
  int32_t* offset_len_ = nullptr;
  int32_t* store_rows_ = nullptr;
  plan::GraphError* error_ = nullptr;
  kernels::GraphSlotEntry* entries_ = nullptr;
  unsigned long long* nonfinite_ = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GraphExecutor>> CudaBackend::MakeGraph(const GraphSetup& setup) {
  auto g = std::make_unique<CudaGraph>(*this, setup);
  SWA_RETURN_IF_ERROR(g->Init());
  return std::unique_ptr<GraphExecutor>(std::move(g));
}

}  // namespace swa::cuda
