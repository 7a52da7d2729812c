#include "backend/cuda/decode_graph.h"

#include <cmath>

#include "backend/cuda/cuda_status.h"
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

absl::Status DeviceDecodeStep::Enqueue(const DeviceDecodeBatch& b, const DecodeTensors& x,
                                       cudaStream_t stream) {
  if (b.n_seqs < 0 || b.n_seqs > max_seqs_)
    return absl::InvalidArgumentError(
        absl::StrFormat("n_seqs = %d is outside [0, max_seqs = %d]", b.n_seqs, max_seqs_));
  const Layout& lay = cache_->layout();
  const LayerSpec& spec = lay.spec().layers[layer_];
  const LayerLayout& ll = lay.layer(layer_);
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
  pp.slot = b.slot;
  pp.seqlen_q = b.seqlen_q;
  pp.seqlen_k = b.seqlen_k;
  pp.valid_start = b.valid_start;
  pp.n_seqs = b.n_seqs;
  pp.max_tokens = max_tokens_;
  pp.window = window;
  pp.ring_len = ring_len;
  pp.max_slots = int32_t(lay.max_slots());
  pp.cu_seqlens = cu_seqlens_;
  pp.offset_len = offset_len_;
  pp.error = error_;
  SWA_CUDA_RETURN_IF_ERROR(kernels::LaunchDecodePlan(pp, stream), "device decode planner");

  kernels::DecodePrepareParams pr;
  pr.slot = b.slot;
  pr.seqlen_q = b.seqlen_q;
  pr.seqlen_k = b.seqlen_k;
  pr.valid_start = b.valid_start;
  pr.cu_seqlens = cu_seqlens_;
  pr.error = error_;
  pr.n_seqs = b.n_seqs;
  pr.max_tokens = max_tokens_;
  pr.ring_len = ring_len;
  pr.seqs = seqs_;
  pr.store_rows = store_rows_;
  SWA_CUDA_RETURN_IF_ERROR(kernels::LaunchDecodePrepare(pr, stream), "decode prepare");

  const RingRows ring{cache_->pool() + ll.ring_offset, lay.slot_bytes(), ll.bytes_per_token,
                      ring_len};
  kernels::EncodeParams enc;
  enc.k_new = x.k_new;
  enc.v_new = x.v_new;
  enc.src_dtype = x.kv_dtype;
  enc.n_tokens = max_tokens_;
  enc.n_tokens_dev = cu_seqlens_ + b.n_seqs;  // on a planner error every store row is -1
  enc.kv_heads = int32_t(spec.kv_heads);
  enc.head_dim = int32_t(spec.head_dim);
  enc.format = spec.format;
  enc.ceil = lay.spec().scale_mode == ScaleMode::kCeil;
  enc.vec_bytes = ll.vec_bytes;
  enc.bytes_per_token = ll.bytes_per_token;
  enc.store_rows = store_rows_;
  enc.ring = ring;
  enc.nonfinite = nonfinite_;
  SWA_CUDA_RETURN_IF_ERROR(kernels::LaunchEncodeKv(enc, stream), "encode K/V into the ring");

  kernels::AttentionParams at;
  at.q = x.q;
  at.q_dtype = x.q_dtype;
  at.out = x.out;
  at.out_dtype = x.out_dtype;
  at.sinks = x.sinks;
  at.scale = x.softmax_scale != 0 ? x.softmax_scale : 1.0f / std::sqrt(float(spec.head_dim));
  at.q_heads = int32_t(spec.q_heads);
  at.kv_heads = int32_t(spec.kv_heads);
  at.head_dim = int32_t(spec.head_dim);
  at.shared_kv = spec.shared_kv;
  at.format = spec.format;
  at.vec_bytes = ll.vec_bytes;
  at.bytes_per_token = ll.bytes_per_token;
  at.window = window;
  at.seqs = seqs_;
  at.n_seqs = b.n_seqs;
  at.max_seqlen_q = max_seqlen_q_;
  at.offset_len = offset_len_;
  at.ring = ring;
  at.use_mma = x.out_dtype == Dtype::kBf16 && spec.format != Format::kFp32;
  return CudaStatus(kernels::LaunchDecodeAttention(at, stream), "decode attention");
}

}  // namespace swa::cuda
