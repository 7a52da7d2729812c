#include "store/hash_workers.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace swa {
namespace {

// One ParallelFor call. Shared with the workers that took it, so that one
// which takes it after the caller has returned finds it exhausted and never
// touches the caller's `fn`.
struct Job {
  const std::function<void(size_t)>* fn = nullptr;
  size_t n = 0;
  std::atomic<size_t> next{0};
  size_t helpers_left = 0;  // guarded by Workers::mu_
  std::mutex mu;
  std::condition_variable finished;
  size_t done = 0;  // guarded by mu

  // Takes indices until none is left; counts the ones run here.
  void Run() {
    size_t ran = 0;
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      (*fn)(i);
      ++ran;
    }
    if (ran == 0) return;
    std::lock_guard<std::mutex> lock(mu);
    done += ran;
    if (done == n) finished.notify_all();
  }
};

class Workers {
 public:
  static Workers& Get() {
    static Workers* const workers = new Workers();  // never destroyed: no join at exit
    return *workers;
  }

  void Run(size_t n, size_t threads, const std::function<void(size_t)>& fn) {
    auto job = std::make_shared<Job>();
    job->fn = &fn;
    job->n = n;
    const size_t helpers = std::min(threads, n) - 1;
    if (helpers > 0) {
      std::lock_guard<std::mutex> lock(mu_);
      while (threads_.size() < helpers) threads_.emplace_back([this] { Loop(); });
      job->helpers_left = helpers;
      queue_.push_back(job);
    }
    if (helpers > 0) wake_.notify_all();
    job->Run();
    {
      std::unique_lock<std::mutex> lock(job->mu);
      job->finished.wait(lock, [&] { return job->done == job->n; });
    }
    if (helpers > 0) {
      // Workers that have not come yet need not: take the job off the queue.
      std::lock_guard<std::mutex> lock(mu_);
      if (job->helpers_left > 0) queue_.erase(std::find(queue_.begin(), queue_.end(), job));
    }
  }

 private:
  void Loop() {
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [this] { return !queue_.empty(); });
        job = queue_.front();
        if (--job->helpers_left == 0) queue_.pop_front();
      }
      job->Run();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;  // jobs still wanting helpers
  std::vector<std::thread> threads_;        // grows to the most helpers ever asked for
};

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
  if (threads == 0) threads = DefaultHashThreads();
  threads = std::min(threads, kMaxHashThreads);
  if (threads <= 1 || n == 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  Workers::Get().Run(n, threads, fn);
}

}  // namespace swa
