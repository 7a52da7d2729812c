#include "backend/cpu/thread_pool.h"

#include <algorithm>

namespace swa::cpu {
namespace {

// The pool whose job the current thread is executing, if any: a nested
// ParallelFor on the same pool must run inline instead of waiting on itself.
thread_local const ThreadPool* tls_running_pool = nullptr;

struct RunningScope {
  explicit RunningScope(const ThreadPool* pool) : saved(tls_running_pool) {
    tls_running_pool = pool;
  }
  ~RunningScope() { tls_running_pool = saved; }
  const ThreadPool* saved;
};

}  // namespace

ThreadPool::ThreadPool(unsigned num_threads)
    : num_threads_(num_threads != 0 ? num_threads
                                    : std::max(1u, std::thread::hardware_concurrency())) {
  workers_.reserve(num_threads_ - 1);
  for (unsigned i = 1; i < num_threads_; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunChunks() {
  RunningScope scope(this);
  for (;;) {
    const size_t begin = next_.fetch_add(grain_, std::memory_order_relaxed);
    if (begin >= n_) return;
    (*fn_)(begin, std::min(n_, begin + grain_));
  }
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    RunChunks();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--busy_workers_ == 0) done_cv_.notify_one();
    }
  }
}

void ThreadPool::ParallelFor(size_t n, size_t grain, const RangeFn& fn) {
  if (n == 0) return;
  grain = std::max<size_t>(grain, 1);
  if (workers_.empty() || n <= grain || tls_running_pool == this) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    grain_ = grain;
    next_.store(0, std::memory_order_relaxed);
    busy_workers_ = static_cast<unsigned>(workers_.size());
    ++generation_;
  }
  work_cv_.notify_all();
  RunChunks();
  // Every worker must check in, even one that found no chunk left, before the
  // job fields may be overwritten by the next call.
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return busy_workers_ == 0; });
  fn_ = nullptr;
}

}  // namespace swa::cpu
