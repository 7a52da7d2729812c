// CudaBackend: device selection, memory, synchronous copies, scratch pool.
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_status.h"
#include "backend/cuda/device_support.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/attention_shapes.h"
#include "kernels/attention/attention_variant.h"
#include "kernels/common/device_probe.h"
#include "kernels/common/launch.cuh"

namespace swa {
namespace cuda {

CudaBackend::CudaBackend(int device) : device_(device) {}

CudaBackend::~CudaBackend() {
  DeviceGuard guard(device_);
  // Every device resource goes while the backend's device is current: the
  // members' own destructors would run after this guard is gone.
  uploader_.Clear();
  nonfinite_.Clear();
  graph_counters_.Clear();
  for (auto& [table, dev] : rope_tables_) cudaFree(dev);
  DestroyBlas(blas_);
  if (pool_ != nullptr) cudaMemPoolDestroy(pool_);
}

absl::Status CudaBackend::Init() {
  int count = 0;
  SWA_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count),
                           "backend = SWA_BACKEND_CUDA: cudaGetDeviceCount");
  if (count == 0)
    return absl::UnavailableError("backend = SWA_BACKEND_CUDA: the CUDA runtime reports no device");
  if (device_ < 0 || device_ >= count)
    return absl::InvalidArgumentError(absl::StrFormat(
        "device = %d does not exist: the CUDA runtime reports %d device(s)", device_, count));
  DeviceGuard guard(device_);
  SWA_RETURN_IF_ERROR(guard.status());
  SWA_RETURN_IF_ERROR(CheckDevice());
  // A context made anew since the last cache here (cudaDeviceReset) has lost
  // the kernels' shared-memory opt-ins: launches set them again.
  kernels::KernelSmemOptins().Forget(device_);
  // A private stream-ordered pool for step scratch, kept warm between steps
  // (the device's default pool belongs to the application).
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device_;
  SWA_CUDA_RETURN_IF_ERROR(cudaMemPoolCreate(&pool_, &props), "cudaMemPoolCreate");
  uint64_t keep = UINT64_MAX;
  SWA_CUDA_RETURN_IF_ERROR(
      cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep),
      "cudaMemPoolSetAttribute");
  int optin = 0;
  SWA_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device_),
      "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
  smem_limit_ = static_cast<size_t>(optin);
  // A lower limit on request, so that the small tiles run (and are tested) on
  // a device that would take the large ones.
  if (const char* cap = std::getenv("SWACACHE_CUDA_SMEM_LIMIT"); cap != nullptr && *cap != 0) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(cap, &end, 10);
    if (end == cap || *end != 0 || v == 0)
      return absl::InvalidArgumentError(absl::StrFormat(
          "SWACACHE_CUDA_SMEM_LIMIT = \"%s\" is not a positive number of bytes", cap));
    smem_limit_ = std::min<size_t>(smem_limit_, v);
  }
  // The projection's handle and workspace now, not at the first call (which
  // may be inside a stream capture).
  return CreateBlas(&blas_);
}

absl::Status CudaBackend::CheckDevice() const {
  CudaDeviceInfo info;
  info.ordinal = device_;
  SWA_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&info.major, cudaDevAttrComputeCapabilityMajor, device_),
      "cudaDeviceGetAttribute(ComputeCapabilityMajor)");
  SWA_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&info.minor, cudaDevAttrComputeCapabilityMinor, device_),
      "cudaDeviceGetAttribute(ComputeCapabilityMinor)");
  cudaDeviceProp prop;
  SWA_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties");
  info.name = prop.name;
  KernelImage image = KernelImage::kPresent;
  if (info.major >= kMinComputeMajor) {  // below, the capability alone decides
    const cudaError_t e = kernels::ProbeKernelImage();
    if (kernels::IsMissingKernelImage(e))
      image = KernelImage::kMissing;
    else
      SWA_CUDA_RETURN_IF_ERROR(e, "cudaFuncGetAttributes of the probe kernel");
  }
  return CheckDeviceSupported(info, image);
}

absl::StatusOr<uint64_t> CudaBackend::TakeDeviceNonfiniteBlocks() {
  DeviceGuard guard(device_);
  SWA_RETURN_IF_ERROR(guard.status());
  uint64_t finished = 0;
  {
    absl::MutexLock lock(&mu_);
    // Event queries only: allowed in relaxed capture mode like the copies
    // of GraphCounters; a pending query leaves its step for a later call.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    SWA_CUDA_RETURN_IF_ERROR(cudaThreadExchangeStreamCaptureMode(&mode),
                             "cudaThreadExchangeStreamCaptureMode");
    finished = nonfinite_.HarvestFinished();
    cudaThreadExchangeStreamCaptureMode(&mode);
  }
  SWA_ASSIGN_OR_RETURN(const uint64_t graphs, graph_counters_.Collect());
  return finished + graphs;
}

absl::StatusOr<void*> CudaBackend::Allocate(size_t bytes, size_t alignment) {
  if (alignment > 256)
    return absl::InvalidArgumentError(absl::StrFormat(
        "alignment %u exceeds the 256 bytes cudaMalloc guarantees", alignment));
  DeviceGuard guard(device_);
  SWA_RETURN_IF_ERROR(guard.status());
  void* p = nullptr;
  SWA_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes == 0 ? 1 : bytes),
                           absl::StrFormat("cudaMalloc of %u bytes on device %d", bytes, device_));
  absl::Status st = CudaStatus(cudaMemset(p, 0, bytes), "cudaMemset of a new allocation");
  if (st.ok()) st = CudaStatus(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  if (!st.ok()) {
    cudaFree(p);
    return st;
  }
  return p;
}

void CudaBackend::Free(void* ptr, size_t) {
  if (ptr == nullptr) return;
  DeviceGuard guard(device_);
  cudaFree(ptr);
}

absl::Status CudaBackend::Copy(void* dst, const void* src, size_t bytes) {
  DeviceGuard guard(device_);
  SWA_RETURN_IF_ERROR(guard.status());
  SWA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), "cudaDeviceSynchronize before a copy");
  SWA_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
  return CudaStatus(cudaDeviceSynchronize(), "cudaDeviceSynchronize after a copy");
}

absl::Status CudaBackend::CopyToHost(void* dst, const void* src, size_t bytes) {
  DeviceGuard guard(device_);
  SWA_RETURN_IF_ERROR(guard.status());
  // Whole-device sync first: the ring may still be written by steps queued on
  // any of the engine's streams.
  SWA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), "cudaDeviceSynchronize before a read");
  return CudaStatus(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost),
                    "cudaMemcpy device to host");
}

absl::Status CudaBackend::CopyFromHost(void* dst, const void* src, size_t bytes) {
  DeviceGuard guard(device_);
  SWA_RETURN_IF_ERROR(guard.status());
  SWA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), "cudaDeviceSynchronize before a write");
  SWA_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice),
                           "cudaMemcpy host to device");
  return CudaStatus(cudaDeviceSynchronize(), "cudaDeviceSynchronize after a write");
}

absl::Status CudaBackend::Memset(void* dst, int value, size_t bytes) {
  DeviceGuard guard(device_);
  SWA_RETURN_IF_ERROR(guard.status());
  // Like the copies: steps queued on the engine's streams may still write the
  // bytes being cleared, and cudaMemset runs on the legacy default stream,
  // which does not wait for non-blocking streams.
  SWA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), "cudaDeviceSynchronize before a memset");
  SWA_CUDA_RETURN_IF_ERROR(cudaMemset(dst, value, bytes), "cudaMemset");
  return CudaStatus(cudaDeviceSynchronize(), "cudaDeviceSynchronize after a memset");
}

absl::StatusOr<uint8_t*> CudaBackend::AllocScratch(size_t bytes, cudaStream_t stream) {
  void* p = nullptr;
  SWA_CUDA_RETURN_IF_ERROR(cudaMallocFromPoolAsync(&p, bytes == 0 ? 1 : bytes, pool_, stream),
                           absl::StrFormat("cudaMallocFromPoolAsync of %u bytes", bytes));
  return static_cast<uint8_t*>(p);
}

absl::Status CudaBackend::FreeScratch(uint8_t* ptr, cudaStream_t stream) {
  return CudaStatus(cudaFreeAsync(ptr, stream), "cudaFreeAsync");
}

absl::Status CudaBackend::Supports(const LayerSpec& layer) const {
  // FP8_DS_MLA (head_dim 512 only, checked by the layout) has its own
  // attention instantiations, small tiles only (AttentionVariantOf).
  const kernels::AttentionLayerShape shape{int(layer.head_dim), layer.shared_kv,
                                           layer.format != Format::kFp32};
  SWA_RETURN_IF_ERROR(kernels::AttentionVariantFor(shape, smem_limit_).status());
  if (layer.kv_heads > 65535)
    return absl::UnimplementedError(
        absl::StrFormat("kv_heads = %u exceeds the CUDA grid limit 65535", layer.kv_heads));
  return absl::OkStatus();
}

absl::StatusOr<kernels::AttentionVariant> CudaBackend::AttentionVariantOf(
    const StepLayer& layer) const {
  // FP8_DS_MLA has the small tiles only (attention_dispatch.cuh); they fit
  // wherever the large ones do (Supports checked the layer).
  if (layer.format == Format::kFp8DsMla) return kernels::AttentionVariant::kSmall;
  return kernels::AttentionVariantFor(
      {layer.head_dim, layer.shared_kv, layer.format != Format::kFp32}, smem_limit_);
}

absl::StatusOr<const float*> CudaBackend::RopeTableOnDevice(const RopeTable& table) {
  if (auto it = rope_tables_.find(&table); it != rope_tables_.end()) return it->second;
  const size_t bytes = table.inv_freq.size() * sizeof(float);
  float* dev = nullptr;
  SWA_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&dev), bytes == 0 ? 4 : bytes),
                           "cudaMalloc of a RoPE frequency table");
  // Complete before any kernel of this step reads it (a pageable cudaMemcpy
  // may return before its DMA lands; the caller's stream is non-blocking).
  cudaError_t e = cudaMemcpy(dev, table.inv_freq.data(), bytes, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    cudaFree(dev);
    return CudaStatus(e, "cudaMemcpy of a RoPE frequency table");
  }
  rope_tables_.emplace(&table, dev);
  return dev;
}

absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(int device) {
  auto b = std::make_unique<CudaBackend>(device);
  SWA_RETURN_IF_ERROR(b->Init());
  return std::unique_ptr<Backend>(std::move(b));
}

bool DeviceAvailable() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error of this thread
    return false;
  }
  return count > 0;
}

}  // namespace cuda
}  // namespace swa
