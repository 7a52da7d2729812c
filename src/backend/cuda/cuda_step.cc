// CudaBackend::Prepare and RunStep: one layer of a planned step as a chain of
// kernels on the caller's stream (docs/semantics.md, "Steps and plans";
// docs/cuda_backend.md).
//   ring-only: encode new K/V into their ring rows -> decode attention (ring)
//   staged:    encode into section 2 -> load section 1 -> prefill attention
//              -> store section 2 into the ring
// A RoPE layer first fills the step's cos/sin table (one entry per token and
// frequency), which the encode and attention kernels read.
// Prepare() packs the plan's arrays into one host image once per build; each
// layer uploads it only when the last upload was another image (keyed), and
// adds the attention work list for its head shape; nothing waits for the device.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_status.h"
#include "backend/cuda/step_params.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/attention_shapes.h"
#include "kernels/step/kv_rows.h"
#include "kernels/step/rope_cos_sin.h"

namespace swa::cuda {
namespace {

size_t Align16(size_t x) { return (x + 15) & ~size_t{15}; }

// Keys of uploaded images: unique in the process, never 0.
uint64_t NextImageKey() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// swa_step is not capturable: it uploads the plan from a pinned buffer that a
// later step rewrites (a replayed graph would read another step's plan),
// queries and waits on events and may allocate. Refuse before touching
// anything; graph capture goes through swa_decode_graph_* (graph_executor.cc).
absl::Status CheckNotCapturing(cudaStream_t stream) {
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  SWA_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &cs),
                           "cudaStreamIsCapturing on the step's stream");
  if (cs != cudaStreamCaptureStatusNone)
    return absl::FailedPreconditionError(
        "stream is being captured into a CUDA graph: swa_step uploads a per-step plan and cannot "
        "be captured (use the device-driven decode step for graphs)");
  return absl::OkStatus();
}

}  // namespace

// The host image of a build's arrays: seqs | per-token (offset_len or pivots)
// | store rows | load segments | attention tiles (for one head shape).
struct CudaPreparedPlan final : PreparedPlan {
  std::vector<uint8_t> image;
  size_t off_per_token = 0, off_store_rows = 0, off_segments = 0, off_tiles = 0;
  int32_t max_seqlen_q = 0;
  // The work list at the image's tail: (sequence, row tile) pairs for query
  // rows grouped by `group` per token and `tile_rows` per CTA.
  int group = -1;
  int tile_rows = -1;
  size_t n_tiles = 0;
  // The caller's RoPE positions after the work list (swa_step_args_t::
  // positions): at off_positions, n_positions of them; 0 = none.
  size_t off_positions = 0;
  size_t n_positions = 0;
  uint64_t key = 0;  // names the image's current content
};

absl::Status CudaBackend::Prepare(const PlanView& plan, std::unique_ptr<PreparedPlan>* prepared) {
  auto* cp = dynamic_cast<CudaPreparedPlan*>(prepared->get());
  if (cp == nullptr) {
    auto fresh = std::make_unique<CudaPreparedPlan>();
    cp = fresh.get();
    *prepared = std::move(fresh);
  }
  const size_t T = static_cast<size_t>(plan.n_tokens);
  const size_t per_token = T * (plan.staged ? 4 : 2) * sizeof(int32_t);
  const size_t segments = plan.staged ? plan.n_load_segments * sizeof(RowSegment) : 0;
  cp->off_per_token = Align16(plan.n_seqs * sizeof(PlannedSeq));
  cp->off_store_rows = Align16(cp->off_per_token + per_token);
  cp->off_segments = Align16(cp->off_store_rows + T * sizeof(int32_t));
  cp->off_tiles = Align16(cp->off_segments + segments);
  cp->image.assign(cp->off_tiles, 0);
  uint8_t* img = cp->image.data();
  if (plan.n_seqs > 0) std::memcpy(img, plan.seqs, plan.n_seqs * sizeof(PlannedSeq));
  if (T > 0) {
    std::memcpy(img + cp->off_per_token, plan.staged ? plan.pivots : plan.offset_len, per_token);
    std::memcpy(img + cp->off_store_rows, plan.store_rows, T * sizeof(int32_t));
  }
  if (segments > 0) std::memcpy(img + cp->off_segments, plan.load_segments, segments);
  cp->max_seqlen_q = plan.max_seqlen_q;
  cp->group = cp->tile_rows = -1;  // no work list yet
  cp->n_tiles = 0;
  cp->off_positions = cp->n_positions = 0;
  cp->key = NextImageKey();
  cp->stamp = plan.stamp;
  return absl::OkStatus();
}

// Puts the caller's RoPE positions (nullptr: none) at the image's tail, after
// the work list, unless it already ends with them: uploaded with the plan
// from the pinned buffer, so the caller may reuse its array on return.
static void EnsurePositions(const int32_t* positions, size_t n, CudaPreparedPlan* cp) {
  std::vector<uint8_t>& img = cp->image;
  const size_t bytes = n * sizeof(int32_t);
  if (positions == nullptr) {
    if (cp->n_positions == 0) return;
    img.resize(cp->off_positions);
    cp->off_positions = cp->n_positions = 0;
  } else {
    if (cp->n_positions == n && std::memcmp(img.data() + cp->off_positions, positions, bytes) == 0)
      return;
    if (cp->n_positions == 0) cp->off_positions = img.size();
    img.resize(cp->off_positions + Align16(bytes));
    std::memcpy(img.data() + cp->off_positions, positions, bytes);
    cp->n_positions = n;
  }
  cp->key = NextImageKey();
}

// Appends the work list for a head shape unless the image already ends with it.
static absl::Status EnsureTiles(const PlanView& plan, int group, int tile_rows,
                                CudaPreparedPlan* cp) {
  if (cp->group == group && cp->tile_rows == tile_rows) return absl::OkStatus();
  std::vector<uint8_t>& img = cp->image;
  img.resize(cp->off_tiles);
  size_t n_tiles = 0;
  for (uint32_t i = 0; i < plan.n_seqs; ++i) {
    const int64_t rows = int64_t(plan.seqs[i].seqlen_q) * group;
    for (int64_t t = 0; t * tile_rows < rows; ++t) {
      const int32_t pair[2] = {int32_t(i), int32_t(t)};
      const size_t at = img.size();
      img.resize(at + sizeof pair);
      std::memcpy(img.data() + at, pair, sizeof pair);
      if (++n_tiles > 0x7fffffff)
        return absl::UnimplementedError("the step has more than 2^31 attention tiles");
    }
  }
  img.resize(Align16(img.size()));
  cp->off_positions = cp->n_positions = 0;  // dropped with the old work list
  cp->group = group;
  cp->tile_rows = tile_rows;
  cp->n_tiles = n_tiles;
  cp->key = NextImageKey();
  return absl::OkStatus();
}

absl::Status CudaBackend::RunStep(const StepWork& work, PreparedPlan& prepared,
                                  StepResult* result) {
  auto* cp = dynamic_cast<CudaPreparedPlan*>(&prepared);
  if (cp == nullptr || cp->stamp != work.plan.stamp)
    return absl::InternalError("the CUDA step was handed a plan prepared for another build");
  absl::MutexLock lock(&mu_);
  DeviceGuard guard(device_);
  SWA_RETURN_IF_ERROR(guard.status());
  return RunStepLocked(work, *cp, result);
}

absl::Status CudaBackend::RunStepLocked(const StepWork& w, CudaPreparedPlan& cp,
                                        StepResult* result) {
  if (w.plan.n_tokens == 0) return absl::OkStatus();
  cudaStream_t stream = static_cast<cudaStream_t>(w.tensors->stream);
  SWA_RETURN_IF_ERROR(CheckNotCapturing(stream));
  const bool use_mma = UseMma(w.layer, *w.tensors);
  SWA_ASSIGN_OR_RETURN(const kernels::AttentionVariant variant, AttentionVariantOf(w.layer));
  // The work list is the one part that depends on the layer's head shape.
  SWA_RETURN_IF_ERROR(EnsureTiles(
      w.plan, w.layer.q_heads / w.layer.kv_heads,
      kernels::AttentionTileRows(use_mma, w.layer.head_dim, w.layer.shared_kv, variant), &cp));
  EnsurePositions(w.layer.rope->on() ? w.tensors->positions : nullptr,
                  static_cast<size_t>(w.plan.n_tokens), &cp);
  SWA_ASSIGN_OR_RETURN(const uint8_t* dev,
                       uploader_.Upload(cp.key, cp.image.data(), cp.image.size(), stream));
  // From here on kernels that read `dev` may be enqueued, so the upload's
  // event must be re-recorded after them on every exit, failures included;
  // otherwise a later Upload could rewrite this device buffer (from another
  // stream) while those kernels still read it.
  const absl::Status launched = LaunchStepKernels(w, cp, dev, stream, result);
  const absl::Status released = uploader_.Release(stream);
  SWA_RETURN_IF_ERROR(launched);
  return released;
}

// The encode -> (load ->) attention (-> store) kernels of a step over the
// uploaded image `dev`, with `enc` and `at` filled but for the path's arrays.
static absl::Status LaunchKernelChain(CudaBackend& b, const StepWork& w,
                                      const CudaPreparedPlan& cp, const uint8_t* dev,
                                      kernels::EncodeParams& enc, kernels::AttentionParams& at,
                                      cudaStream_t stream) {
  const StepLayer& L = w.layer;
  const size_t T = static_cast<size_t>(w.plan.n_tokens);
  const auto* d_per_token = reinterpret_cast<const int32_t*>(dev + cp.off_per_token);
  const auto* d_store_rows = reinterpret_cast<const int32_t*>(dev + cp.off_store_rows);
  const auto* d_segments = reinterpret_cast<const RowSegment*>(dev + cp.off_segments);
  if (!w.plan.staged) {
    enc.store_rows = d_store_rows;
    SWA_CUDA_RETURN_IF_ERROR(kernels::LaunchEncodeKv(enc, stream), "encode K/V into the ring");
    at.offset_len = d_per_token;
    at.ring = L.ring;
    SWA_CUDA_RETURN_IF_ERROR(kernels::LaunchDecodeAttention(at, stream), "decode attention");
    return absl::OkStatus();
  }
  const size_t sec1_rows = size_t(w.plan.n_seqs) * L.window;
  const size_t bpt = L.ring.bytes_per_token;
  SWA_ASSIGN_OR_RETURN(uint8_t* staging, b.AllocScratch((sec1_rows + T) * bpt, stream));
  uint8_t* sec2 = staging + sec1_rows * bpt;
  enc.staging = sec2;
  absl::Status st = CudaStatus(kernels::LaunchEncodeKv(enc, stream), "encode K/V into section 2");
  if (st.ok()) {
    kernels::LoadParams ld;
    ld.segments = d_segments;
    ld.n_segments = static_cast<int32_t>(w.plan.n_load_segments);
    ld.ring = L.ring;
    ld.staging = staging;
    st = CudaStatus(kernels::LaunchLoadSection1(ld, stream), "load section 1");
  }
  if (st.ok()) {
    at.pivots = d_per_token;
    at.staging = staging;
    st = CudaStatus(kernels::LaunchPrefillAttention(at, stream), "prefill attention");
  }
  if (st.ok()) {  // only after attention has read section 1
    kernels::StoreParams sp;
    sp.staged = sec2;
    sp.store_rows = d_store_rows;
    sp.n_tokens = w.plan.n_tokens;
    sp.ring = L.ring;
    st = CudaStatus(kernels::LaunchStoreRows(sp, stream), "store new rows into the ring");
  }
  const absl::Status freed = b.FreeScratch(staging, stream);
  SWA_RETURN_IF_ERROR(st);
  return freed;
}

absl::Status CudaBackend::LaunchStepKernels(const StepWork& w, const CudaPreparedPlan& cp,
                                            const uint8_t* dev, cudaStream_t stream,
                                            StepResult* result) {
  const StepLayer& L = w.layer;
  const StepTensors& x = *w.tensors;
  const size_t T = static_cast<size_t>(w.plan.n_tokens);
  const auto* d_seqs = reinterpret_cast<const PlannedSeq*>(dev);
  const auto* d_tiles = reinterpret_cast<const int2*>(dev + cp.off_tiles);

  SWA_ASSIGN_OR_RETURN(unsigned long long* d_nonfinite,
                       nonfinite_.Begin(stream, &result->nonfinite_blocks));

  kernels::EncodeParams enc = EncodeParamsOf(L, x, w.plan.n_tokens);
  enc.nonfinite = d_nonfinite;
  kernels::AttentionParams at = AttentionParamsOf(L, x, w.scale);
  // The variant the tile list was built for (RunStepLocked).
  SWA_ASSIGN_OR_RETURN(at.variant, AttentionVariantOf(L));
  at.seqs = d_seqs;
  at.n_seqs = static_cast<int32_t>(w.plan.n_seqs);
  at.tiles = d_tiles;
  at.n_tiles = static_cast<int32_t>(cp.n_tiles);
  at.max_seqlen_q = cp.max_seqlen_q;

  // RoPE: the step's cos/sin table, in stream-ordered scratch freed after the
  // kernels that read it.
  kernels::RopeCs* d_cos_sin = nullptr;
  if (L.rope->on()) {
    SWA_ASSIGN_OR_RETURN(const float* d_inv_freq, RopeTableOnDevice(*L.rope));
    const size_t pairs = L.rope->dims / 2;
    SWA_ASSIGN_OR_RETURN(uint8_t* table, AllocScratch(T * pairs * sizeof(kernels::RopeCs), stream));
    d_cos_sin = reinterpret_cast<kernels::RopeCs*>(table);
    kernels::RopeCosSinParams rt;
    rt.seqs = d_seqs;
    rt.n_seqs = at.n_seqs;
    rt.n_tokens = w.plan.n_tokens;
    rt.inv_freq = d_inv_freq;
    rt.pairs = static_cast<int32_t>(pairs);
    rt.table = d_cos_sin;
    if (cp.n_positions > 0)
      rt.positions = reinterpret_cast<const int32_t*>(dev + cp.off_positions);
    const absl::Status st = CudaStatus(kernels::LaunchRopeCosSin(rt, stream), "RoPE cos/sin table");
    if (!st.ok()) {
      FreeScratch(table, stream).IgnoreError();
      return st;
    }
  }
  enc.rope = at.rope = RopeParamsOf(*L.rope, d_cos_sin);
  absl::Status st = LaunchKernelChain(*this, w, cp, dev, enc, at, stream);
  if (d_cos_sin != nullptr) {
    const absl::Status freed = FreeScratch(reinterpret_cast<uint8_t*>(d_cos_sin), stream);
    if (st.ok()) st = freed;
  }
  SWA_RETURN_IF_ERROR(st);
  return nonfinite_.End(stream);
}

}  // namespace swa::cuda
