#include "backend/cuda/device_scratch.h"

#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_status.h"

namespace swa::cuda {

PlanUploader::~PlanUploader() { Clear(); }

void PlanUploader::Clear() {
  for (Slot& s : slots_) {
    if (s.done != nullptr) {
      cudaEventSynchronize(s.done);
      cudaEventDestroy(s.done);
    }
    if (s.dev != nullptr) cudaFree(s.dev);
    if (s.host != nullptr) cudaFreeHost(s.host);
    s = Slot{};
  }
  current_ = -1;
}

absl::StatusOr<const uint8_t*> PlanUploader::Upload(uint64_t key, const void* host, size_t bytes,
                                                    cudaStream_t stream) {
  if (current_ >= 0) {
    Slot& s = slots_[current_];
    if (s.key == key && s.used == bytes) {
      // Unchanged: order `stream` after the copy (and the last readers).
      SWA_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, s.done, 0), "cudaStreamWaitEvent");
      return s.dev;
    }
  }
  const int next = (current_ + 1) % kSlots;
  Slot& s = slots_[next];
  if (s.done == nullptr) {
    SWA_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming),
                             "cudaEventCreate");
  } else {
    // Back-pressure: the device must be done with this pair's last use.
    SWA_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(s.done), "waiting for a plan buffer");
  }
  if (s.capacity < bytes) {
    const size_t cap = std::max({bytes, 2 * s.capacity, size_t{64} << 10});
    if (s.dev != nullptr) SWA_CUDA_RETURN_IF_ERROR(cudaFree(s.dev), "cudaFree");
    if (s.host != nullptr) SWA_CUDA_RETURN_IF_ERROR(cudaFreeHost(s.host), "cudaFreeHost");
    s.dev = nullptr;
    s.host = nullptr;
    s.capacity = 0;
    s.used = 0;
    SWA_CUDA_RETURN_IF_ERROR(cudaMallocHost(reinterpret_cast<void**>(&s.host), cap),
                             absl::StrFormat("cudaMallocHost of %u bytes", cap));
    SWA_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&s.dev), cap),
                             absl::StrFormat("cudaMalloc of %u bytes", cap));
    s.capacity = cap;
  }
  current_ = -1;  // until the copy is enqueued, nothing is reusable
  std::memcpy(s.host, host, bytes);
  SWA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s.dev, s.host, bytes, cudaMemcpyHostToDevice, stream),
                           "uploading the plan (cudaMemcpyAsync)");
  s.used = bytes;
  s.key = key;
  current_ = next;
  SWA_CUDA_RETURN_IF_ERROR(cudaEventRecord(s.done, stream), "cudaEventRecord");
  return s.dev;
}

absl::Status PlanUploader::Release(cudaStream_t stream) {
  if (current_ < 0) return absl::OkStatus();
  return CudaStatus(cudaEventRecord(slots_[current_].done, stream), "cudaEventRecord");
}

NonfiniteCounters::~NonfiniteCounters() { Clear(); }

void NonfiniteCounters::Clear() {
  for (cudaEvent_t& e : events_)
    if (e != nullptr) {
      cudaEventSynchronize(e);
      cudaEventDestroy(e);
      e = nullptr;
    }
  if (dev_ != nullptr) cudaFree(dev_);
  if (host_ != nullptr) cudaFreeHost(host_);
  dev_ = nullptr;
  host_ = nullptr;
  for (bool& p : pending_) p = false;
  next_ = 0;
  current_ = -1;
}

absl::Status NonfiniteCounters::Init() {
  if (dev_ != nullptr) return absl::OkStatus();
  SWA_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&dev_), kSlots * sizeof *dev_),
                           "cudaMalloc of the non-finite counters");
  SWA_CUDA_RETURN_IF_ERROR(
      cudaMallocHost(reinterpret_cast<void**>(&host_), kSlots * sizeof *host_), "cudaMallocHost");
  for (cudaEvent_t& e : events_)
    SWA_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
                             "cudaEventCreate");
  return absl::OkStatus();
}

uint64_t NonfiniteCounters::HarvestFinished() {
  uint64_t sum = 0;
  // "Not ready" becomes the thread's last runtime error, which we clear below
  // so that the application never reads ours. Clearing would also take an
  // error the application left pending, and the query would overwrite it: so
  // with one pending, harvest nothing now (a later call does).
  if (cudaPeekAtLastError() != cudaSuccess) return 0;
  for (int i = 0; i < kSlots; ++i) {
    if (!pending_[i]) continue;
    const cudaError_t q = cudaEventQuery(events_[i]);
    if (q == cudaSuccess) {
      sum += host_[i];
      pending_[i] = false;
    } else if (q == cudaErrorNotReady) {
      cudaGetLastError();  // ours: nothing was pending before the query
    }
  }
  return sum;
}

absl::StatusOr<unsigned long long*> NonfiniteCounters::Begin(cudaStream_t stream,
                                                             uint64_t* harvested) {
  SWA_RETURN_IF_ERROR(Init());
  *harvested += HarvestFinished();
  const int i = next_;
  if (pending_[i]) {  // the ring is full of unfinished steps: wait for the oldest
    SWA_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(events_[i]), "waiting for a counter");
    *harvested += host_[i];
    pending_[i] = false;
  }
  SWA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dev_ + i, 0, sizeof *dev_, stream), "cudaMemsetAsync");
  current_ = i;
  next_ = (next_ + 1) % kSlots;
  return dev_ + i;
}

absl::Status NonfiniteCounters::End(cudaStream_t stream) {
  if (current_ < 0) return absl::OkStatus();
  const int i = current_;
  current_ = -1;
  SWA_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host_ + i, dev_ + i, sizeof *dev_, cudaMemcpyDeviceToHost, stream),
      "reading back the non-finite counter");
  SWA_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[i], stream), "cudaEventRecord");
  pending_[i] = true;
  return absl::OkStatus();
}

namespace {

// Runs `fn` with this thread in relaxed capture mode: the counters are read
// with synchronous calls on a stream that is never captured, which must not
// invalidate a capture that this or (in global mode) another thread has open.
template <class Fn>
cudaError_t Relaxed(Fn&& fn) {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaError_t e = cudaThreadExchangeStreamCaptureMode(&mode);
  if (e != cudaSuccess) return e;
  e = fn();
  const cudaError_t restored = cudaThreadExchangeStreamCaptureMode(&mode);
  return e != cudaSuccess ? e : restored;
}

}  // namespace

GraphCounters::~GraphCounters() { Clear(); }

void GraphCounters::Clear() {
  absl::MutexLock lock(&mu_);
  Relaxed([&] {
    for (Entry& e : entries_) cudaFreeHost(e.host);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    return cudaSuccess;
  });
  entries_.clear();
  stream_ = nullptr;
}

absl::Status GraphCounters::Add(const unsigned long long* dev) {
  absl::MutexLock lock(&mu_);
  Entry e{dev, nullptr, 0};
  SWA_CUDA_RETURN_IF_ERROR(Relaxed([&] {
                             cudaError_t r = cudaSuccess;
                             if (stream_ == nullptr)
                               r = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
                             if (r == cudaSuccess)
                               r = cudaMallocHost(reinterpret_cast<void**>(&e.host),
                                                  sizeof *e.host);
                             return r;
                           }),
                           "setting up the graph decode's non-finite counter read-back");
  entries_.push_back(e);
  return absl::OkStatus();
}

absl::Status GraphCounters::ReadLocked(size_t first, size_t last) {
  return CudaStatus(Relaxed([&] {
                      for (size_t i = first; i < last; ++i) {
                        const cudaError_t r =
                            cudaMemcpyAsync(entries_[i].host, entries_[i].dev, sizeof(uint64_t),
                                            cudaMemcpyDeviceToHost, stream_);
                        if (r != cudaSuccess) return r;
                      }
                      return cudaStreamSynchronize(stream_);
                    }),
                    "reading the graph decode's non-finite counter");
}

void GraphCounters::Remove(const unsigned long long* dev) {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].dev != dev) continue;
    // A failed read (a broken context) loses this graph's last counts.
    if (ReadLocked(i, i + 1).ok()) removed_ += *entries_[i].host - entries_[i].reported;
    Relaxed([&] { return cudaFreeHost(entries_[i].host); });
    entries_.erase(entries_.begin() + static_cast<ptrdiff_t>(i));
    return;
  }
}

absl::StatusOr<uint64_t> GraphCounters::Collect() {
  absl::MutexLock lock(&mu_);
  if (!entries_.empty()) SWA_RETURN_IF_ERROR(ReadLocked(0, entries_.size()));
  uint64_t sum = removed_;
  for (Entry& e : entries_) {
    sum += *e.host - e.reported;
    e.reported = *e.host;
  }
  removed_ = 0;
  return sum;
}

}  // namespace swa::cuda
