// CudaBackend::RunStep: one layer of a planned step as a chain of kernels on
// the caller's stream (docs/semantics.md, "Steps and plans" and
// "Attention"; docs/cuda_backend.md).
//   ring-only: encode new K/V into their ring rows -> decode attention (ring)
//   staged:    encode into section 2 -> load section 1 -> prefill attention
//              -> store section 2 into the ring
// The plan's host arrays go up in one upload (skipped when unchanged, as for
// every layer after the first of a step); nothing waits for the device.
#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_status.h"
#include "kernels/attention/attention.h"
#include "kernels/step/kv_rows.h"

namespace swa::cuda {
namespace {

static_assert(sizeof(StepSeq) == sizeof(kernels::AttnSeq));
static_assert(sizeof(RowSegment) == sizeof(kernels::LoadSegment));

// Byte offsets of the plan arrays inside the uploaded blob.
struct BlobLayout {
  size_t seqs = 0, per_token = 0, store_rows = 0, segments = 0, tiles = 0, bytes = 0;
};

size_t Align16(size_t x) { return (x + 15) & ~size_t{15}; }

absl::Status CheckSupported(const StepWork& w) {
  if (!kernels::AttentionHeadDimSupported(w.head_dim))
    return absl::UnimplementedError(absl::StrFormat(
        "head_dim = %d is not supported by the CUDA attention kernels (64, 128, 256, 512)",
        w.head_dim));
  if (w.q_heads % w.kv_heads != 0)
    return absl::InvalidArgumentError(absl::StrFormat(
        "q_heads = %d is not a multiple of kv_heads = %d", w.q_heads, w.kv_heads));
  if (w.kv_heads > 65535)
    return absl::UnimplementedError(
        absl::StrFormat("kv_heads = %d exceeds the CUDA grid limit 65535", w.kv_heads));
  return absl::OkStatus();
}

// swa_step is not capturable: it uploads the plan from a pinned buffer that a
// later step rewrites (a replayed graph would read another step's plan),
// queries and waits on events and may allocate. Refuse before touching
// anything; graph capture goes through DeviceDecodeStep (decode_graph.h).
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

absl::Status CudaBackend::RunStep(const StepWork& work, StepResult* result) {
  absl::MutexLock lock(&mu_);
  DeviceGuard guard(device_);
  SWA_RETURN_IF_ERROR(guard.status());
  return RunStepLocked(work, result);
}

absl::Status CudaBackend::RunStepLocked(const StepWork& w, StepResult* result) {
  if (w.n_tokens == 0) return absl::OkStatus();
  SWA_RETURN_IF_ERROR(CheckSupported(w));
  cudaStream_t stream = static_cast<cudaStream_t>(w.stream);
  SWA_RETURN_IF_ERROR(CheckNotCapturing(stream));
  const bool use_mma = w.out_dtype == Dtype::kBf16 && w.format != Format::kFp32;
  const int tile_rows = kernels::AttentionTileRows(use_mma);
  const int group = w.q_heads / w.kv_heads;

  // ---- The plan's arrays, packed into one blob --------------------------------
  const size_t T = static_cast<size_t>(w.n_tokens);
  std::vector<int32_t> tiles;  // (seq, tile) pairs of the attention grid
  int32_t max_q = 0;
  for (uint32_t i = 0; i < w.n_seqs; ++i) {
    const int64_t rows = int64_t(w.seqs[i].seqlen_q) * group;
    for (int64_t t = 0; t * tile_rows < rows; ++t) {
      tiles.push_back(int32_t(i));
      tiles.push_back(int32_t(t));
    }
    max_q = std::max(max_q, w.seqs[i].seqlen_q);
  }
  if (tiles.size() / 2 > 0x7fffffff)
    return absl::UnimplementedError("the step has more than 2^31 attention tiles");
  BlobLayout b;
  b.seqs = 0;
  b.per_token = Align16(w.n_seqs * sizeof(StepSeq));
  b.store_rows = Align16(b.per_token + T * (w.staged ? 4 : 2) * sizeof(int32_t));
  b.segments = Align16(b.store_rows + T * sizeof(int32_t));
  b.tiles = Align16(b.segments + (w.staged ? w.n_load_segments * sizeof(RowSegment) : 0));
  b.bytes = Align16(b.tiles + tiles.size() * sizeof(int32_t));
  blob_.assign(b.bytes, 0);
  std::memcpy(blob_.data() + b.seqs, w.seqs, w.n_seqs * sizeof(StepSeq));
  std::memcpy(blob_.data() + b.per_token, w.staged ? w.pivots : w.offset_len,
              T * (w.staged ? 4 : 2) * sizeof(int32_t));
  std::memcpy(blob_.data() + b.store_rows, w.store_rows, T * sizeof(int32_t));
  if (w.staged && w.n_load_segments > 0)
    std::memcpy(blob_.data() + b.segments, w.load_segments,
                w.n_load_segments * sizeof(RowSegment));
  std::memcpy(blob_.data() + b.tiles, tiles.data(), tiles.size() * sizeof(int32_t));
  SWA_ASSIGN_OR_RETURN(const uint8_t* dev, uploader_.Upload(blob_.data(), b.bytes, stream));
  // From here on kernels that read `dev` may be enqueued, so the upload's
  // event must be re-recorded after them on every exit, failures included;
  // otherwise a later Upload could rewrite this device buffer (from another
  // stream) while those kernels still read it.
  const absl::Status launched = LaunchStepKernels(w, stream, use_mma, max_q, tiles.size() / 2,
                                                  dev, b.seqs, b.per_token, b.store_rows,
                                                  b.segments, b.tiles, result);
  const absl::Status released = uploader_.Release(stream);
  SWA_RETURN_IF_ERROR(launched);
  return released;
}

absl::Status CudaBackend::LaunchStepKernels(const StepWork& w, cudaStream_t stream, bool use_mma,
                                            int32_t max_q, size_t n_tiles, const uint8_t* dev,
                                            size_t off_seqs, size_t off_per_token,
                                            size_t off_store_rows, size_t off_segments,
                                            size_t off_tiles, StepResult* result) {
  const size_t T = static_cast<size_t>(w.n_tokens);
  const auto* d_seqs = reinterpret_cast<const kernels::AttnSeq*>(dev + off_seqs);
  const auto* d_per_token = reinterpret_cast<const int32_t*>(dev + off_per_token);
  const auto* d_store_rows = reinterpret_cast<const int32_t*>(dev + off_store_rows);
  const auto* d_segments = reinterpret_cast<const kernels::LoadSegment*>(dev + off_segments);
  const auto* d_tiles = reinterpret_cast<const int2*>(dev + off_tiles);

  SWA_ASSIGN_OR_RETURN(unsigned long long* d_nonfinite,
                       nonfinite_.Begin(stream, &result->nonfinite_blocks));

  // ---- Kernels -------------------------------------------------------------------
  const kernels::RingRows ring{w.ring_base, w.slot_bytes, w.bytes_per_token, w.ring_len};
  kernels::EncodeParams enc;
  enc.k_new = w.k_new;
  enc.v_new = w.shared_kv ? nullptr : w.v_new;
  enc.src_dtype = static_cast<uint32_t>(w.kv_dtype);
  enc.n_tokens = w.n_tokens;
  enc.kv_heads = w.kv_heads;
  enc.head_dim = w.head_dim;
  enc.format = static_cast<uint32_t>(w.format);
  enc.ceil = w.scale_mode == ScaleMode::kCeil;
  enc.vec_bytes = w.vec_bytes;
  enc.bytes_per_token = w.bytes_per_token;
  enc.ring = ring;
  enc.nonfinite = d_nonfinite;

  kernels::AttentionParams at;
  at.q = w.q;
  at.q_dtype = static_cast<uint32_t>(w.q_dtype);
  at.out = w.out;
  at.out_dtype = static_cast<uint32_t>(w.out_dtype);
  at.sinks = w.sinks;
  at.scale = w.scale;
  at.q_heads = w.q_heads;
  at.kv_heads = w.kv_heads;
  at.head_dim = w.head_dim;
  at.shared_kv = w.shared_kv;
  at.format = static_cast<uint32_t>(w.format);
  at.vec_bytes = w.vec_bytes;
  at.bytes_per_token = w.bytes_per_token;
  at.window = w.window;
  at.seqs = d_seqs;
  at.n_seqs = static_cast<int32_t>(w.n_seqs);
  at.tiles = d_tiles;
  at.n_tiles = static_cast<int32_t>(n_tiles);
  at.max_seqlen_q = max_q;
  at.use_mma = use_mma;

  if (!w.staged) {
    enc.store_rows = d_store_rows;
    SWA_CUDA_RETURN_IF_ERROR(kernels::LaunchEncodeKv(enc, stream), "encode K/V into the ring");
    at.offset_len = d_per_token;
    at.ring = ring;
    SWA_CUDA_RETURN_IF_ERROR(kernels::LaunchDecodeAttention(at, stream), "decode attention");
  } else {
    const size_t sec1_rows = size_t(w.n_seqs) * w.window;
    const size_t staging_bytes = (sec1_rows + T) * w.bytes_per_token;
    SWA_ASSIGN_OR_RETURN(uint8_t* staging, AllocScratch(staging_bytes, stream));
    uint8_t* sec2 = staging + sec1_rows * w.bytes_per_token;
    absl::Status st;
    enc.staging = sec2;
    st = CudaStatus(kernels::LaunchEncodeKv(enc, stream), "encode K/V into section 2");
    if (st.ok()) {
      kernels::LoadParams ld;
      ld.segments = d_segments;
      ld.n_segments = static_cast<int32_t>(w.n_load_segments);
      ld.ring = ring;
      ld.staging = staging;
      st = CudaStatus(kernels::LaunchLoadSection1(ld, stream), "load section 1");
    }
    if (st.ok()) {
      at.pivots = d_per_token;
      at.staging = staging;
      st = CudaStatus(kernels::LaunchPrefillAttention(at, stream), "prefill attention");
    }
    if (st.ok()) {  // only after attention has read section 1 ("Store plan")
      kernels::StoreParams sp;
      sp.staged = sec2;
      sp.store_rows = d_store_rows;
      sp.n_tokens = w.n_tokens;
      sp.ring = ring;
      st = CudaStatus(kernels::LaunchStoreRows(sp, stream), "store new rows into the ring");
    }
    const absl::Status freed = FreeScratch(staging, stream);
    SWA_RETURN_IF_ERROR(st);
    SWA_RETURN_IF_ERROR(freed);
  }
  return nonfinite_.End(stream);
}

}  // namespace swa::cuda
