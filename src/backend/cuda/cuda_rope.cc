// swa_rope_apply on device memory: the step's cos/sin kernel at the caller's
// positions, then the pair rotation (kernels/step/rope_rotate.h), on the
// caller's stream with stream-ordered scratch (the device's default pool).
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_status.h"
#include "kernels/step/rope_cos_sin.h"
#include "kernels/step/rope_rotate.h"

namespace swa::cuda {

absl::Status RopeApplyOnDevice(int device, const RopeWork& w) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error of this thread
    count = 0;
  }
  if (device >= count)
    return absl::InvalidArgumentError(absl::StrFormat(
        "device = %d does not exist: the CUDA runtime reports %d device(s)", device, count));
  if (w.tokens == 0) return absl::OkStatus();
  DeviceGuard guard(device);
  SWA_RETURN_IF_ERROR(guard.status());
  cudaStream_t stream = static_cast<cudaStream_t>(w.stream);
  const RopeTable& table = *w.table;
  const size_t pairs = table.dims / 2, T = static_cast<size_t>(w.tokens);
  // One buffer: table [T, pairs] | inv_freq [pairs] | positions [T]. The
  // host side is copied from our own pageable buffer, which the runtime
  // stages before returning, so the caller's arrays are free on return.
  const size_t table_bytes = T * pairs * sizeof(kernels::RopeCs);
  const size_t freq_bytes = pairs * sizeof(float), pos_bytes = T * sizeof(int32_t);
  std::vector<uint8_t> host(freq_bytes + pos_bytes);
  std::memcpy(host.data(), table.inv_freq.data(), freq_bytes);
  std::memcpy(host.data() + freq_bytes, w.positions, pos_bytes);
  void* buf = nullptr;
  SWA_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&buf, table_bytes + host.size(), stream),
                           "cudaMallocAsync for the RoPE table");
  auto* d_table = static_cast<kernels::RopeCs*>(buf);
  auto* d_rest = static_cast<uint8_t*>(buf) + table_bytes;
  absl::Status st = CudaStatus(
      cudaMemcpyAsync(d_rest, host.data(), host.size(), cudaMemcpyHostToDevice, stream),
      "copy of the RoPE frequencies and positions");
  if (st.ok()) {
    kernels::RopeCosSinParams rt;
    rt.n_tokens = static_cast<int32_t>(T);
    rt.inv_freq = reinterpret_cast<const float*>(d_rest);
    rt.pairs = static_cast<int32_t>(pairs);
    rt.table = d_table;
    rt.positions = reinterpret_cast<const int32_t*>(d_rest + freq_bytes);
    st = CudaStatus(kernels::LaunchRopeCosSin(rt, stream), "RoPE cos/sin table");
  }
  if (st.ok()) {
    kernels::RopeRotateParams rp;
    rp.x = w.x;
    rp.dtype = w.dtype;
    rp.tokens = w.tokens;
    rp.heads = static_cast<int32_t>(w.heads);
    rp.head_dim = static_cast<int32_t>(w.head_dim);
    rp.rope.style = table.style;
    rp.rope.first_dim = static_cast<int32_t>(table.first_dim);
    rp.rope.dims = static_cast<int32_t>(table.dims);
    rp.rope.cos_sin = d_table;
    rp.factor = RopeWorkFactor(w);
    rp.sign = RopeWorkSign(w);
    st = CudaStatus(kernels::LaunchRopeRotate(rp, stream), "RoPE rotation");
  }
  const absl::Status freed = CudaStatus(cudaFreeAsync(buf, stream), "cudaFreeAsync of the RoPE table");
  SWA_RETURN_IF_ERROR(st);
  return freed;
}

}  // namespace swa::cuda
