#include "backend/cuda/decode_graph.h"

#include <cmath>

#include "backend/cuda/cuda_status.h"
#include "backend/cuda/step_params.h"
#include "kernels/attention/attention.h"
#include "kernels/plan/decode_plan.h"
#include "kernels/step/decode_prepare.h"
#include "kernels/step/kv_rows.h"

namespace swa::cuda {
namespace {
size_t Align256(size_t x) { return (x + 255) & ~size_t{255}; }
}  // namespace

absl::StatusOr<std::unique_ptr<DeviceDecodeStep>> DeviceDecodeStep::Create(
    Cache& cache, uint32_t layer, int32_t max_seqs, int32_t max_tokens) {
  if (cache.backend().kind() != BackendKind::kCuda)
    return absl::FailedPreconditionError("the device decode step needs a CUDA cache");
  const Layout& lay = cache.layout();
  if (layer >= lay.num_layers())
    return absl::OutOfRangeError(absl::StrFormat("layer = %u is out of range", layer));
  const LayerSpec& spec = lay.spec().layers[layer];
  if (!kernels::AttentionHeadDimSupported(int(spec.head_dim)))
    return absl::UnimplementedError(absl::StrFormat(
        "head_dim = %u is not supported by the CUDA attention kernels", spec.head_dim));
  if (spec.rope.style != RopeStyle::kNone)
    return absl::UnimplementedError(absl::StrFormat(
        "layer %u has RoPE inside the step, which the device decode step does not do (no "
        "per-token positions on the device path): use swa_step, or rotate in the engine",
        layer));
  const int32_t max_q = int32_t(lay.ring_len() - lay.window() + 1);
  if (max_seqs < 1 || max_tokens < 1)
    return absl::InvalidArgumentError(absl::StrFormat(
        "max_seqs = %d, max_tokens = %d: need >= 1 each", max_seqs, max_tokens));
  std::unique_ptr<DeviceDecodeStep> s(new DeviceDecodeStep());
  s->cache_ = &cache;
  s->layer_ = layer;
  s->max_seqs_ = max_seqs;
  s->max_tokens_ = max_tokens;
  s->max_seqlen_q_ = max_q;  // the grid covers any legal ring-only seqlen_q
  const size_t o_cu = 0;
  const size_t o_ol = Align256(o_cu + (max_seqs + 1) * sizeof(int32_t));
  const size_t o_sr = Align256(o_ol + size_t(max_tokens) * 2 * sizeof(int32_t));
  const size_t o_err = Align256(o_sr + size_t(max_tokens) * sizeof(int32_t));
  const size_t o_nf = Align256(o_err + sizeof(int32_t));
  const size_t o_seq = Align256(o_nf + sizeof(unsigned long long));
  const size_t bytes = Align256(o_seq + size_t(max_seqs) * sizeof(PlannedSeq));
  DeviceGuard guard(cache.backend().device());
  SWA_RETURN_IF_ERROR(guard.status());
  SWA_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&s->arena_), bytes),
                           "cudaMalloc of the decode-step arena");
  SWA_CUDA_RETURN_IF_ERROR(cudaMemset(s->arena_, 0, bytes), "cudaMemset");
  SWA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  s->cu_seqlens_ = reinterpret_cast<int32_t*>(s->arena_ + o_cu);
  s->offset_len_ = reinterpret_cast<int32_t*>(s->arena_ + o_ol);
  s->store_rows_ = reinterpret_cast<int32_t*>(s->arena_ + o_sr);
  s->error_ = reinterpret_cast<int32_t*>(s->arena_ + o_err);
  s->nonfinite_ = reinterpret_cast<unsigned long long*>(s->arena_ + o_nf);
  s->seqs_ = reinterpret_cast<PlannedSeq*>(s->arena_ + o_seq);
  return s;
}

DeviceDecodeStep::~DeviceDecodeStep() {
  if (arena_ != nullptr) {
    DeviceGuard guard(cache_->backend().device());
    cudaFree(arena_);
  }
}

absl::Status DeviceDecodeStep::Enqueue(const DeviceDecodeBatch& b, const StepTensors& x,
                                       cudaStream_t stream) {
  if (b.n_seqs < 0 || b.n_seqs > max_seqs_)
    return absl::InvalidArgumentError(
        absl::StrFormat("n_seqs = %d is outside [0, max_seqs = %d]", b.n_seqs, max_seqs_));
  const Layout& lay = cache_->layout();
  const LayerSpec& spec = lay.spec().layers[layer_];
  if (x.q == nullptr || x.k_new == nullptr || x.out == nullptr)
    return absl::InvalidArgumentError("q, k_new and out must not be NULL");
  if (spec.shared_kv != (x.v_new == nullptr))
    return absl::InvalidArgumentError(absl::StrFormat(
        "v_new must be %s for layer %u", spec.shared_kv ? "NULL" : "given", layer_));
  if (spec.has_sinks != (x.sinks != nullptr))
    return absl::InvalidArgumentError(absl::StrFormat(
        "sinks must be %s for layer %u", spec.has_sinks ? "given" : "NULL", layer_));
  DeviceGuard guard(cache_->backend().device());
  SWA_RETURN_IF_ERROR(guard.status());

  const int32_t window = int32_t(lay.window());
  const int32_t ring_len = int32_t(lay.ring_len());
  kernels::DecodePlanParams pp;
  pp.batch = b;
  pp.max_tokens = max_tokens_;
  pp.window = window;
  pp.ring_len = ring_len;
  pp.max_slots = int32_t(lay.max_slots());
  pp.cu_seqlens = cu_seqlens_;
  pp.offset_len = offset_len_;
  pp.error = error_;
  SWA_CUDA_RETURN_IF_ERROR(kernels::LaunchDecodePlan(pp, stream), "device decode planner");

  kernels::DecodePrepareParams pr;
  pr.batch = b;
  pr.cu_seqlens = cu_seqlens_;
  pr.error = error_;
  pr.max_tokens = max_tokens_;
  pr.ring_len = ring_len;
  pr.seqs = seqs_;
  pr.store_rows = store_rows_;
  SWA_CUDA_RETURN_IF_ERROR(kernels::LaunchDecodePrepare(pr, stream), "decode prepare");

  const StepLayer L = cache_->StepLayerOf(layer_);
  kernels::EncodeParams enc = EncodeParamsOf(L, x, max_tokens_);
  enc.n_tokens_dev = cu_seqlens_ + b.n_seqs;  // on a planner error every store row is -1
  enc.store_rows = store_rows_;
  enc.nonfinite = nonfinite_;
  SWA_CUDA_RETURN_IF_ERROR(kernels::LaunchEncodeKv(enc, stream), "encode K/V into the ring");

  const float scale =
      x.softmax_scale != 0 ? x.softmax_scale : 1.0f / std::sqrt(float(spec.head_dim));
  kernels::AttentionParams at = AttentionParamsOf(L, x, scale);
  at.seqs = seqs_;
  at.n_seqs = b.n_seqs;
  at.max_seqlen_q = max_seqlen_q_;
  at.offset_len = offset_len_;
  at.ring = L.ring;
  return CudaStatus(kernels::LaunchDecodeAttention(at, stream), "decode attention");
}

}  // namespace swa::cuda
