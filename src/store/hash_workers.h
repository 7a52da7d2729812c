// The store layer's worker threads for hashing blob chunks in parallel
// (store/blob_auth.h, the chunked tag). One set per process, started on first
// use and never stopped (so no thread is created per restore, and none is
// joined at exit); the store layer cannot use the CPU backend's pool
// (docs/architecture.md), and a save or restore may run while that pool
// runs a step.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

namespace swa {

// Most threads a ParallelFor uses, the caller's included.
inline constexpr size_t kMaxHashThreads = 16;
// Most threads DefaultHashThreads picks by itself.
inline constexpr size_t kDefaultMaxHashThreads = 8;

// The threads a ParallelFor with `threads` = 0 uses: SWACACHE_STORE_HASH_THREADS
// when it is a number >= 1 (read once; at most kMaxHashThreads), else the
// machine's hardware threads, at most kDefaultMaxHashThreads.
size_t DefaultHashThreads();

// Runs fn(0) ... fn(n - 1), each exactly once, on the calling thread and up to
// `threads` - 1 workers (0: DefaultHashThreads()); returns when all have
// returned. The caller works too and waits only for indices a worker has
// already taken, so a call never waits for a free worker: calls from several
// threads at once share the workers and all make progress. `fn` must not
// throw and must not call ParallelFor.
void ParallelFor(size_t n, size_t threads, const std::function<void(size_t)>& fn);

class HashJob;

// fn(0) ... fn(n - 1), each at most once, run by up to `threads` workers (0:
// DefaultHashThreads()) as the owner marks them ready: for chunks hashed
// while the rest of a blob is still arriving. One owner thread calls Ready,
// Finish and Cancel. `fn` must not throw. A worker that took the stream
// waits in it for its next chunk (at most as long as the owner's receive);
// a stream that finds every worker busy elsewhere is hashed by its owner at
// Finish, so no stream ever waits for a worker.
class ChunkStream {
 public:
  ChunkStream(size_t n, size_t threads, std::function<void(size_t)> fn);
  ~ChunkStream();  // Cancel() unless closed
  ChunkStream(const ChunkStream&) = delete;
  ChunkStream& operator=(const ChunkStream&) = delete;

  // Indices [0, k) may run (k never decreases; larger than n means n).
  void Ready(size_t k);
  // Every index runs: the owner runs those no worker has taken; returns when
  // every fn has returned.
  void Finish() { Close(/*cancel=*/false); }
  // Indices not yet started never run; returns when the running ones have.
  void Cancel() { Close(/*cancel=*/true); }

 private:
  void Close(bool cancel);

  std::function<void(size_t)> fn_;
  size_t n_;
  std::shared_ptr<HashJob> job_;
  bool closed_ = false;
};

}  // namespace swa
