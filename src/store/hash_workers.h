// The store layer's worker threads for hashing blob chunks in parallel
// (store/blob_auth.h, the chunked tag). One set per process, started on first
// use and never stopped (so no thread is created per restore, and none is
// joined at exit); the store layer cannot use the CPU backend's pool
// (docs/architecture.md), and a save or restore may run while that pool
// runs a step.
#pragma once

#include <cstddef>
#include <functional>

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

}  // namespace swa
