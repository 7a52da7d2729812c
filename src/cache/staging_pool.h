// Reusable host buffers for restores (and saves from device pools): a fresh
// 1 MiB+ allocation per call would cost more in page faults than the copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace swa {

class StagingPool {
 public:
  static constexpr size_t kAlignment = 64;
  static constexpr size_t kMaxIdle = 4;

  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  using Buffer = std::unique_ptr<uint8_t, Free>;

  // A buffer of at least the asked size, returned to the pool when destroyed.
  class Lease {
   public:
    Lease(StagingPool* pool, Buffer buffer, size_t capacity)
        : pool_(pool), buffer_(std::move(buffer)), capacity_(capacity) {}
    Lease(Lease&&) = default;
    ~Lease() {
      if (buffer_ != nullptr) pool_->Return(std::move(buffer_), capacity_);
    }
    uint8_t* data() const { return buffer_.get(); }

   private:
    StagingPool* pool_;
    Buffer buffer_;
    size_t capacity_;
  };

  Lease Acquire(size_t bytes) {
    {
      absl::MutexLock lock(&mu_);
      for (size_t i = 0; i < idle_.size(); ++i) {
        if (idle_[i].capacity < bytes) continue;
        Idle found = std::move(idle_[i]);
        idle_.erase(idle_.begin() + static_cast<ptrdiff_t>(i));
        return Lease(this, std::move(found.buffer), found.capacity);
      }
    }
    const size_t capacity = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    auto* p = static_cast<uint8_t*>(std::aligned_alloc(kAlignment, capacity == 0 ? kAlignment : capacity));
    if (p == nullptr) throw std::bad_alloc();
    return Lease(this, Buffer(p), capacity);
  }

 private:
  struct Idle {
    Buffer buffer;
    size_t capacity = 0;
  };

  void Return(Buffer buffer, size_t capacity) {
    absl::MutexLock lock(&mu_);
    if (idle_.size() < kMaxIdle) idle_.push_back(Idle{std::move(buffer), capacity});
  }

  absl::Mutex mu_;
  std::vector<Idle> idle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace swa
