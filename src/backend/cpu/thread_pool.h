// A fixed-size pool for the CPU backend's data-parallel loops.
//
// `num_threads` counts the calling thread: a pool of N starts N-1 workers and
// the thread that calls ParallelFor works too. A pool of 1 starts nothing and
// runs every loop inline. A call allocates nothing: the range function is
// borrowed for the duration of the call and chunks are handed out through one
// atomic counter, so uneven work balances itself.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace swa::cpu {

class ThreadPool {
 public:
  // fn(begin, end) processes indices [begin, end); it must not throw.
  using RangeFn = std::function<void(size_t begin, size_t end)>;

  // `num_threads` = 0 means the machine's hardware threads.
  explicit ThreadPool(unsigned num_threads);
  ~ThreadPool();  // joins the workers; must not race with a ParallelFor

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  unsigned num_threads() const { return num_threads_; }

  // Calls fn on disjoint chunks of at most `grain` indices that together cover
  // [0, n) exactly once, on the calling thread and the workers, and returns
  // when all have finished. Calls from several threads are serialised; a call
  // made from inside a running fn of this pool runs inline (no deadlock).
  void ParallelFor(size_t n, size_t grain, const RangeFn& fn);
  void ParallelFor(size_t n, const RangeFn& fn) { ParallelFor(n, 1, fn); }

 private:
  void WorkerLoop();
  void RunChunks();  // claims chunks of the current job until none are left

  const unsigned num_threads_;
  std::vector<std::thread> workers_;

  std::mutex call_mu_;  // one ParallelFor at a time

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  uint64_t generation_ = 0;  // bumped per job; workers wake on a change
  unsigned busy_workers_ = 0;
  bool stop_ = false;

  // The current job; written under mu_ before generation_ is bumped.
  const RangeFn* fn_ = nullptr;
  size_t n_ = 0;
  size_t grain_ = 1;
  std::atomic<size_t> next_{0};
};

}  // namespace swa::cpu
