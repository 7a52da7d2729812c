// Per-step device memory of the CUDA backend that must not cost a host
// synchronisation: the plan's host arrays uploaded through pinned staging,
// and the non-finite block counters read back asynchronously.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace swa::cuda {

// A ring of (pinned host, device) buffer pairs. Upload() reuses the last pair
// without copying when the key is the last upload's (every layer of a step
// uploads the same prepared plan, and a key names one content); otherwise it takes the next pair, waiting on the host only
// if the device has not yet finished the work that used that pair last
// (back-pressure when the host runs kSlots plans ahead).
class PlanUploader {
 public:
  static constexpr int kSlots = 4;
  PlanUploader() = default;
  ~PlanUploader();
  PlanUploader(const PlanUploader&) = delete;
  PlanUploader& operator=(const PlanUploader&) = delete;

  // Device copy of `bytes` host bytes, ordered before later work on `stream`.
  // `key` identifies the content: equal keys must mean equal bytes.
  absl::StatusOr<const uint8_t*> Upload(uint64_t key, const void* host, size_t bytes,
                                        cudaStream_t stream);
  // Records that the work enqueued on `stream` so far used the last upload.
  absl::Status Release(cudaStream_t stream);
  // Waits for and frees every buffer (the owner calls it with its device current).
  void Clear();

 private:
  struct Slot {
    uint8_t* host = nullptr;
    uint8_t* dev = nullptr;
    size_t capacity = 0;
    size_t used = 0;
    uint64_t key = 0;
    cudaEvent_t done = nullptr;  // last work that read `dev`
  };
  Slot slots_[kSlots];
  int current_ = -1;
};

// Device counters of non-finite blocks met by the encoder, one per step in a
// ring; each is copied back to pinned memory after its step and harvested by
// a later call once its event has completed (never waited for, except when a
// ring entry is reused while still pending).
class NonfiniteCounters {
 public:
  static constexpr int kSlots = 8;
  NonfiniteCounters() = default;
  ~NonfiniteCounters();
  NonfiniteCounters(const NonfiniteCounters&) = delete;
  NonfiniteCounters& operator=(const NonfiniteCounters&) = delete;

  // A zeroed device counter for the next step; adds finished steps' counts
  // to *harvested.
  absl::StatusOr<unsigned long long*> Begin(cudaStream_t stream, uint64_t* harvested);
  // Enqueues the read-back of the counter returned by the last Begin().
  absl::Status End(cudaStream_t stream);
  // Counts of every finished step not yet harvested.
  uint64_t HarvestFinished();
  // Waits for and frees the counters (the owner calls it with its device current).
  void Clear();

 private:
  absl::Status Init();
  unsigned long long* dev_ = nullptr;   // [kSlots]
  unsigned long long* host_ = nullptr;  // [kSlots], pinned
  cudaEvent_t events_[kSlots] = {};
  bool pending_[kSlots] = {};
  int next_ = 0;
  int current_ = -1;
};

// The non-finite block counters of a backend's graph decodes. Each graph's
// encoder adds to its own device counter at every replay and nothing resets
// it (a captured graph cannot read anything back), so the counts are read
// here, at calls that may wait: Collect() (swa_cache_stats) copies every
// counter on a private stream and returns what was added since the last
// Collect(); Remove() (graph destruction) keeps a graph's last unread count
// for the next Collect(). Counts of replays still running are picked up by a
// later Collect(). Thread-safe; may be called while any thread captures (the
// copies run in relaxed capture mode on a stream that is never captured).
class GraphCounters {
 public:
  GraphCounters() = default;
  ~GraphCounters();
  GraphCounters(const GraphCounters&) = delete;
  GraphCounters& operator=(const GraphCounters&) = delete;

  // Starts reading `dev` (a zeroed device counter). At set-up, device current.
  absl::Status Add(const unsigned long long* dev);
  // Reads `dev` a last time and stops (before it is freed), device current.
  void Remove(const unsigned long long* dev);
  // Blocks counted since the last call, device current.
  absl::StatusOr<uint64_t> Collect();
  // Frees the stream and host memory (the owner calls it with its device current).
  void Clear();

 private:
  struct Entry {
    const unsigned long long* dev;
    unsigned long long* host;  // pinned word the copy lands in
    uint64_t reported;         // the counter's value at the last read
  };
  // Copies the counters of `entries_[first, last)` to their host words and
  // waits for those copies only.
  absl::Status ReadLocked(size_t first, size_t last) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::vector<Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t removed_ ABSL_GUARDED_BY(mu_) = 0;  // unread counts of removed graphs
  cudaStream_t stream_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace swa::cuda
