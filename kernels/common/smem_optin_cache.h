// Which kernels have been allowed how much dynamic shared memory, per device,
// so that cudaFuncSetAttribute(MaxDynamicSharedMemorySize) runs once per
// kernel and device instead of before every launch (launch.cuh). Plain C++
// (no CUDA headers): unit-tested on the CPU with a counting setter
// (tests/unit/cuda_host_checks_test.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>

namespace swa::kernels {

class SmemOptinCache {
 public:
  // Calls `set()` unless `kernel` on `device` has already been allowed at
  // least `bytes`; remembers `bytes` once set() succeeds (returns a value
  // equal to its type's zero, e.g. cudaSuccess). A failure is returned and
  // not remembered, so the next launch tries again. Thread-safe: concurrent
  // first launches of one kernel call set() one after the other.
  template <class Set>
  auto Ensure(int device, const void* kernel, size_t bytes, Set&& set) -> decltype(set()) {
    using Result = decltype(set());
    const Key key{device, kernel};
    std::lock_guard<std::mutex> lock(mu_);
    auto it = allowed_.find(key);
    if (it != allowed_.end() && it->second >= bytes) return Result{};
    const Result r = set();
    if (r == Result{}) allowed_[key] = bytes;
    return r;
  }

  // Forgets every kernel of `device`: their next launches set the attribute
  // again (the backend calls it when it sets up on a device, since a
  // cudaDeviceReset in between dropped the attributes with the context).
  void Forget(int device) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = allowed_.begin(); it != allowed_.end();) {
      if (it->first.device == device)
        it = allowed_.erase(it);
      else
        ++it;
    }
  }

 private:
  struct Key {
    int device;
    const void* kernel;
    bool operator==(const Key& o) const { return device == o.device && kernel == o.kernel; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<const void*>()(k.kernel) ^ (size_t(uint32_t(k.device)) * 0x9E3779B9u);
    }
  };
  std::mutex mu_;
  // One entry per kernel instantiation launched above 48 KiB, per device.
  std::unordered_map<Key, size_t, KeyHash> allowed_;
};

}  // namespace swa::kernels
