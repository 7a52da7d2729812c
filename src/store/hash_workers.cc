#include "store/hash_workers.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace swa {

// One ParallelFor call or ChunkStream. Shared with the workers that took
// it, so that one which takes it after its owner is done finds every index
// claimed and never touches `fn`.
class HashJob {
 public:
  HashJob(const std::function<void(size_t)>* fn, size_t n, size_t ready)
      : fn_(fn), n_(n), ready_(ready) {}

  // Claims ready indices and runs them until every index is claimed; with
  // `wait`, waits for indices to become ready instead of returning.
  void Work(bool wait) {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (wait) cv_.wait(lock, [this] { return next_ < ready_ || next_ >= n_; });
      if (next_ >= n_ || next_ >= ready_) return;
      const size_t i = next_++;
      const bool skip = cancelled_;
      lock.unlock();
      if (!skip) (*fn_)(i);
      lock.lock();
      if (++done_ == n_) cv_.notify_all();
    }
  }
  void SetReady(size_t k) {
    std::lock_guard<std::mutex> lock(mu_);
    if (k <= ready_) return;
    ready_ = std::min(k, n_);
    cv_.notify_all();
  }
  // Every index ready; with `cancel`, those not yet started are skipped.
  void Close(bool cancel) {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = cancelled_ || cancel;
    ready_ = n_;
    cv_.notify_all();
  }
  void WaitDone() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_ == n_; });
  }

  size_t helpers_left = 0;  // guarded by Workers::mu_

 private:
  const std::function<void(size_t)>* const fn_;
  const size_t n_;
  std::mutex mu_;
  std::condition_variable cv_;  // readiness and completion
  size_t next_ = 0, ready_, done_ = 0;
  bool cancelled_ = false;
};

namespace {

class Workers {
 public:
  // Never destroyed: no join at exit, and no mutex or condition variable
  // destroyed under threads that wait on them. A child that fork() makes
  // has none of the threads, yet the parent's (its copy of mu_ possibly
  // held by one, wake_ counting their waits, so that a notify there can
  // block for good): it starts over with a set of its own, the parent's
  // copy left alone (leaked).
  static Workers& Get() {
    static std::once_flag once;
    std::call_once(once, [] {
      current_.store(new Workers(), std::memory_order_release);
      pthread_atfork(nullptr, nullptr,
                     [] { current_.store(new Workers(), std::memory_order_release); });
    });
    return *current_.load(std::memory_order_acquire);
  }

  // Lets `helpers` workers take `job` (started here if there are fewer).
  // A thread that cannot be started (the process's or container's thread
  // limit, no memory for its stack) is not: the job's owner runs what no
  // worker takes, so the call only loses parallelism, and a later call tries
  // again.
  void Submit(const std::shared_ptr<HashJob>& job, size_t helpers) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      try {
        while (threads_.size() < helpers) threads_.emplace_back([this] { Loop(); });
      } catch (const std::system_error&) {
      }
      job->helpers_left = helpers;
      queue_.push_back(job);
    }
    wake_.notify_all();
  }
  // Workers that have not come for `job` yet need not: takes it off the queue.
  // (Not queued here, e.g. submitted before a fork to the parent's set: nothing.)
  void Withdraw(const std::shared_ptr<HashJob>& job) {
    std::lock_guard<std::mutex> lock(mu_);
    if (job->helpers_left == 0) return;
    const auto it = std::find(queue_.begin(), queue_.end(), job);
    if (it != queue_.end()) queue_.erase(it);
  }

 private:
  void Loop() {
    for (;;) {
      std::shared_ptr<HashJob> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [this] { return !queue_.empty(); });
        job = queue_.front();
        if (--job->helpers_left == 0) queue_.pop_front();
      }
      job->Work(/*wait=*/true);
    }
  }

  static inline std::atomic<Workers*> current_{nullptr};
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<HashJob>> queue_;  // jobs still wanting helpers
  std::vector<std::thread> threads_;            // grows to the most helpers ever asked for
};

size_t Threads(size_t threads) {
  return std::min(threads == 0 ? DefaultHashThreads() : threads, kMaxHashThreads);
}

}  // namespace

size_t DefaultHashThreads() {
  static const size_t threads = [] {
    if (const char* env = std::getenv("SWACACHE_STORE_HASH_THREADS"); env != nullptr && *env != 0) {
      char* end = nullptr;
      const long v = std::strtol(env, &end, 10);
      if (*end == 0 && v >= 1) return std::min<size_t>(static_cast<size_t>(v), kMaxHashThreads);
    }
    return std::clamp<size_t>(std::thread::hardware_concurrency(), 1, kDefaultMaxHashThreads);
  }();
  return threads;
}

void ParallelFor(size_t n, size_t threads, const std::function<void(size_t)>& fn) {
  if (n == 0) return;
  threads = Threads(threads);
  if (threads <= 1 || n == 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  auto job = std::make_shared<HashJob>(&fn, n, n);
  const size_t helpers = std::min(threads, n) - 1;
  Workers::Get().Submit(job, helpers);
  job->Work(/*wait=*/false);
  job->WaitDone();
  Workers::Get().Withdraw(job);
}

ChunkStream::ChunkStream(size_t n, size_t threads, std::function<void(size_t)> fn)
    : fn_(std::move(fn)), n_(n) {
  if (n_ == 0) return;
  job_ = std::make_shared<HashJob>(&fn_, n_, 0);
  Workers::Get().Submit(job_, std::min(Threads(threads), n_));
}

ChunkStream::~ChunkStream() {
  if (!closed_) Cancel();
}

void ChunkStream::Ready(size_t k) {
  if (job_ != nullptr) job_->SetReady(k);
}

void ChunkStream::Close(bool cancel) {
  closed_ = true;
  if (job_ == nullptr) return;
  job_->Close(cancel);
  job_->Work(/*wait=*/false);  // runs (or, cancelled, skips) what no worker has taken
  job_->WaitDone();
  Workers::Get().Withdraw(job_);
}

}  // namespace swa
