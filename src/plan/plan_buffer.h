// A growable array that never value-initialises: a plan rebuilt for batches of
// changing size must not pay a memset for memory it overwrites anyway.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>

#include "absl/types/span.h"

namespace swa::plan {

template <typename T>
class PlanBuffer {
 public:
  // Makes room for `n` elements, keeping the current ones (so a build that
  // fails after growing leaves the previous plan readable); may throw bad_alloc.
  void Reserve(size_t n) {
    if (n <= capacity_) return;
    size_t cap = capacity_ == 0 ? 64 : capacity_;
    while (cap < n) cap *= 2;
    std::unique_ptr<T[]> grown(new T[cap]);  // default-init: no zeroing
    std::copy(data_.get(), data_.get() + size_, grown.get());
    data_ = std::move(grown);
    capacity_ = cap;
  }
  void SetSize(size_t n) { size_ = n; }  // n <= capacity, after Reserve
  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  absl::Span<const T> span() const { return absl::Span<const T>(data_.get(), size_); }

 private:
  std::unique_ptr<T[]> data_;
  size_t capacity_ = 0;
  size_t size_ = 0;
};

}  // namespace swa::plan
