// swa_compress_step on device memory (docs/semantics.md, "Compression
// state"): the planner's windows and store segments and the entries' RoPE
// frequencies go up in one buffer from the backend's stream-ordered pool,
// then the entries kernel and the store kernel run on the caller's stream
// (kernels/compress/compress_entries.h).
#include <cstddef>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_status.h"
#include "kernels/compress/compress_entries.h"
#include "kernels/step/rope_cos_sin.h"

namespace swa::cuda {
namespace {

size_t AlignUp(size_t n) { return (n + 15) / 16 * 16; }

}  // namespace

absl::Status CudaBackend::CompressStep(const CompressWork& w) {
  if (w.n_windows == 0 && w.n_store == 0) return absl::OkStatus();
  if (w.n_windows > static_cast<size_t>(INT32_MAX) || w.n_store > static_cast<size_t>(INT32_MAX))
    return absl::InvalidArgumentError(absl::StrFormat(
        "swa_compress_step: %u windows and %u store segments exceed the kernel's int32 counts",
        w.n_windows, w.n_store));
  if ((w.row_format != Format::kFp32 && w.row_format != Format::kBf16) ||
      (w.dtype != Dtype::kFp32 && w.dtype != Dtype::kBf16) ||
      (w.out_dtype != Dtype::kFp32 && w.out_dtype != Dtype::kBf16))
    return absl::InvalidArgumentError(
        "swa_compress_step: the CUDA compressor handles FP32 and BF16 rows, inputs and outputs");
  DeviceGuard guard(device_);
  SWA_RETURN_IF_ERROR(guard.status());
  cudaStream_t stream = static_cast<cudaStream_t>(w.stream);
  const bool rope = w.rope != nullptr && w.rope->on() && w.rope->dims != 0;
  const size_t win_bytes = AlignUp(w.n_windows * sizeof(CompressWindow));
  const size_t seg_bytes = AlignUp(w.n_store * sizeof(RowSegment));
  const size_t pairs = rope ? w.rope->dims / 2 : 0;
  // With RoPE: the frequencies, the windows' positions and the cos/sin table.
  const size_t freq_bytes = rope ? AlignUp(pairs * sizeof(float)) : 0;
  const size_t pos_bytes = rope ? AlignUp(w.n_windows * sizeof(int32_t)) : 0;
  const size_t table_bytes = rope ? w.n_windows * pairs * sizeof(kernels::RopeCs) : 0;
  // Our own pageable copy: the runtime stages it before cudaMemcpyAsync
  // returns, so the planner's arrays may go once this call has returned.
  std::vector<uint8_t> host(win_bytes + seg_bytes + freq_bytes + pos_bytes, 0);
  if (w.n_windows) std::memcpy(host.data(), w.windows, w.n_windows * sizeof(CompressWindow));
  if (w.n_store) std::memcpy(host.data() + win_bytes, w.store, w.n_store * sizeof(RowSegment));
  uint8_t* const freq_at = host.data() + win_bytes + seg_bytes;
  if (rope) {
    std::memcpy(freq_at, w.rope->inv_freq.data(), pairs * sizeof(float));
    for (size_t k = 0; k < w.n_windows; ++k) {
      const int32_t pos = w.windows[k].position;
      std::memcpy(freq_at + freq_bytes + k * sizeof(int32_t), &pos, sizeof pos);
    }
  }
  absl::StatusOr<uint8_t*> buf = AllocScratch(host.size() + table_bytes, stream);
  SWA_RETURN_IF_ERROR(buf.status());
  absl::Status st = CudaStatus(
      cudaMemcpyAsync(*buf, host.data(), host.size(), cudaMemcpyHostToDevice, stream),
      "copy of the compressor windows and store segments");
  kernels::CompressEntriesParams p;
  if (st.ok()) {
    p.geometry = w.geometry;
    p.entry_dim = static_cast<int32_t>(w.entry_dim);
    p.row_values = static_cast<int32_t>(w.row_values);
    p.ring_bf16 = w.row_format == Format::kBf16;
    p.in_bf16 = w.dtype == Dtype::kBf16;
    p.out_bf16 = w.out_dtype == Dtype::kBf16;
    p.ring_base = w.ring_base;
    p.slot_bytes = w.slot_bytes;
    p.row_bytes = w.row_bytes;
    p.windows = reinterpret_cast<const kernels::CompressWindowDev*>(*buf);
    p.n_windows = static_cast<int32_t>(w.n_windows);
    p.store = reinterpret_cast<const RowSegment*>(*buf + win_bytes);
    p.n_store = static_cast<int32_t>(w.n_store);
    p.kv = w.kv;
    p.gate = w.gate;
    p.position_bias = w.position_bias;
    p.norm_weight = w.norm_weight;
    p.norm_eps = w.norm_eps;
    p.out = w.out;
    if (rope) {
      p.rope_table = reinterpret_cast<const kernels::RopeCs*>(*buf + host.size());
      p.rope_dims = static_cast<int32_t>(w.rope->dims);
      p.attention_factor = w.rope->attention_factor;
    }
    if (rope && w.n_windows > 0) {
      uint8_t* const dev_freq = *buf + win_bytes + seg_bytes;
      kernels::RopeCosSinParams rt;
      rt.n_tokens = static_cast<int32_t>(w.n_windows);
      rt.inv_freq = reinterpret_cast<const float*>(dev_freq);
      rt.pairs = static_cast<int32_t>(pairs);
      rt.table = reinterpret_cast<kernels::RopeCs*>(*buf + host.size());
      rt.positions = reinterpret_cast<const int32_t*>(dev_freq + freq_bytes);
      st = CudaStatus(kernels::LaunchRopeCosSin(rt, stream), "RoPE table of the compressed entries");
    }
  }
  if (st.ok()) st = CudaStatus(kernels::LaunchCompressStep(p, stream), "compressor step kernels");
  const absl::Status freed = FreeScratch(*buf, stream);
  SWA_RETURN_IF_ERROR(st);
  return freed;
}

}  // namespace swa::cuda
