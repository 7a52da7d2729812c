// Shared helpers of the store tests: a small cache, random slot contents, an
// independent bitwise CRC32C, and a fault-injecting store wrapper.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache/cache.h"
#include "gtest/gtest.h"
#include "store/blob_store.h"
#include "store/kv_store.h"
#include "cache/slot_io.h"

namespace swa::testing {

// 3 stored + 2 dropped layers (one with compression state), W = 16, N = 2.
inline ModelSpec SmallSpec(uint32_t window = 16) {
  ModelSpec spec;
  spec.window = window;
  spec.draft_tokens = 2;
  spec.max_slots = 8;
  for (int i = 0; i < 5; ++i) {
    LayerSpec l;
    l.role = i < 3 ? Role::kStored : Role::kDropped;
    l.head_dim = 64;
    l.kv_heads = 2;
    l.q_heads = 4;
    l.shared_kv = (i % 2) == 0;
    l.format = i == 1 ? Format::kBf16 : Format::kMxfp8;
    if (i == 4) {
      l.compress_ratio = 4;
      l.compress_entry_bytes = 100;
    }
    spec.layers.push_back(l);
  }
  return spec;
}

inline std::unique_ptr<Cache> MakeCache(const ModelSpec& spec = SmallSpec()) {
  absl::StatusOr<std::unique_ptr<Cache>> c = Cache::Create(spec, CacheOptions{});
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

inline void FillRandom(uint8_t* p, size_t n, std::mt19937_64& rng) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(rng() | 1);  // never zero
}

// A whole pool as a byte vector (host pools only).
inline std::vector<uint8_t> PoolBytes(const Cache& c) {
  return std::vector<uint8_t>(c.pool(), c.pool() + c.layout().pool_bytes());
}

// Bit-at-a-time CRC32C straight from the definition: the oracle.
inline uint32_t ReferenceCrc32c(const uint8_t* p, size_t n, uint32_t crc = 0) {
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
  }
  return ~crc;
}

inline uint64_t ReadLe(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

inline void WriteLe(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Recomputes a blob's checksum field with the reference CRC, so that a
// test can forge a *valid* blob from another layout or writer.
inline void ResealBlob(std::vector<uint8_t>& blob) {
  uint32_t crc = ReferenceCrc32c(blob.data(), 60);
  crc = ReferenceCrc32c(blob.data() + 64, blob.size() - 64, crc);
  WriteLe(blob.data() + 60, crc, 4);
}

// Holds calls at one point until the test opens it, to force an interleaving
// of two threads: Hold(n) makes the next n callers of Pass() wait; the test
// waits until they have arrived, does its part, then Open()s.
class Gate {
 public:
  void Hold(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = n;
    arrived_ = 0;
    open_ = false;
  }
  void Pass() {
    std::unique_lock<std::mutex> lock(mu_);
    if (held_ <= 0) return;
    --held_;
    ++arrived_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
  }
  bool WaitArrived(int n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return arrived_ >= n; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    held_ = 0;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int held_ = 0, arrived_ = 0;
  bool open_ = true;
};

// What the fault store does to calls; every field may change while in use.
struct Faults {
  std::atomic<int> fail_put{0};      // status code returned instead, 0 = none
  std::atomic<int> fail_get{0};
  std::atomic<int> fail_exists{0};
  std::atomic<int> fail_remove{0};
  std::atomic<int64_t> flip_bit{-1};     // get: flip this bit of the blob
  std::atomic<int64_t> truncate_to{-1};  // get: blob cut to this many bytes
  std::atomic<int64_t> extend_by{0};     // get: this many extra bytes appended
  std::atomic<int64_t> short_read{0};    // get: report this many bytes fewer, OK, fill nothing
  std::atomic<bool> ok_without_data{false};  // get: OK, right size, buffers untouched
  std::atomic<int> set_version{-1};      // get: version field replaced (not resealed)
  std::atomic<int64_t> set_fingerprint_xor{0};  // get: fingerprint XORed, then resealed
  std::atomic<int> delay_ms{0};          // every call sleeps first
  std::atomic<int> gets{0};
  std::atomic<int> puts{0};
  std::atomic<int> removes{0};
  Gate put_gate;  // put: before the failure check and the inner put
  Gate get_gate;  // get: after the inner store was read, before returning
};

// Wraps another store (and owns it).
class FaultStore final : public KvStore {
 public:
  FaultStore(std::unique_ptr<KvStore> inner, std::shared_ptr<Faults> faults)
      : inner_(std::move(inner)), faults_(std::move(faults)) {}

  absl::Status Put(std::string_view key, absl::Span<const ConstByteSpan> pieces) override {
    Delay();
    ++faults_->puts;
    faults_->put_gate.Pass();
    if (int c = faults_->fail_put.load()) return Injected(c, "put");
    return inner_->Put(key, pieces);
  }

  absl::StatusOr<uint64_t> Get(std::string_view key, absl::Span<const ByteSpan> pieces) override {
    Delay();
    ++faults_->gets;
    if (int c = faults_->fail_get.load()) return Injected(c, "get");
    const uint64_t want = TotalBytes(pieces);
    if (faults_->ok_without_data.load()) return want;
    // Read the true blob whole, then mutate it.
    std::vector<uint8_t> blob(want);
    for (int attempt = 0; attempt < 2; ++attempt) {
      const ByteSpan one[1] = {ByteSpan(blob.data(), blob.size())};
      absl::StatusOr<uint64_t> size = inner_->Get(key, one);
      if (!size.ok()) return size.status();
      if (*size == blob.size()) break;
      blob.resize(*size);
    }
    faults_->get_gate.Pass();
    if (int64_t bit = faults_->flip_bit.load(); bit >= 0 && static_cast<uint64_t>(bit / 8) < blob.size())
      blob[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    if (int64_t t = faults_->truncate_to.load(); t >= 0 && static_cast<uint64_t>(t) < blob.size())
      blob.resize(t);
    for (int64_t i = 0; i < faults_->extend_by.load(); ++i) blob.push_back(static_cast<uint8_t>(0xA5 ^ i));
    if (int v = faults_->set_version.load(); v >= 0 && blob.size() >= 64) WriteLe(&blob[4], v, 2);
    if (int64_t x = faults_->set_fingerprint_xor.load(); x != 0 && blob.size() >= 64) {
      WriteLe(&blob[8], ReadLe(&blob[8], 8) ^ static_cast<uint64_t>(x), 8);
      ResealBlob(blob);
    }
    if (int64_t s = faults_->short_read.load(); s > 0)
      return blob.size() > static_cast<uint64_t>(s) ? blob.size() - s : 0;
    if (blob.size() == want) ScatterFrom(blob.data(), pieces);
    return blob.size();
  }

  absl::StatusOr<bool> Exists(std::string_view key) override {
    Delay();
    if (int c = faults_->fail_exists.load()) return Injected(c, "exists");
    return inner_->Exists(key);
  }

  absl::Status Remove(std::string_view key) override {
    Delay();
    ++faults_->removes;
    if (int c = faults_->fail_remove.load()) return Injected(c, "remove");
    return inner_->Remove(key);
  }

 private:
  static absl::Status Injected(int code, const char* call) {
    return absl::Status(static_cast<absl::StatusCode>(code),
                        std::string("injected failure of ") + call);
  }
  void Delay() const {
    if (int ms = faults_->delay_ms.load(); ms > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  }

  std::unique_ptr<KvStore> inner_;
  std::shared_ptr<Faults> faults_;
};

// A cache's attached store used the way swa_slot_save / swa_slot_restore use it.
inline absl::Status Save(Cache& cache, uint32_t slot, std::string_view key) {
  absl::StatusOr<std::shared_ptr<BlobStore>> store = cache.store();
  if (!store.ok()) return store.status();
  return SaveSlot(cache.slot_io(), **store, slot, key);
}

inline absl::Status Restore(Cache& cache, uint32_t slot, std::string_view key) {
  absl::StatusOr<std::shared_ptr<BlobStore>> store = cache.store();
  if (!store.ok()) return store.status();
  return RestoreSlot(cache.slot_io(), **store, slot, key);
}

// A view of a store shared by several caches (BlobStore owns its KvStore).
class SharedStore final : public KvStore {
 public:
  explicit SharedStore(std::shared_ptr<KvStore> s) : s_(std::move(s)) {}
  absl::Status Put(std::string_view k, absl::Span<const ConstByteSpan> p) override {
    return s_->Put(k, p);
  }
  absl::StatusOr<uint64_t> Get(std::string_view k, absl::Span<const ByteSpan> p) override {
    return s_->Get(k, p);
  }
  absl::StatusOr<bool> Exists(std::string_view k) override { return s_->Exists(k); }
  absl::Status Remove(std::string_view k) override { return s_->Remove(k); }

 private:
  std::shared_ptr<KvStore> s_;
};

}  // namespace swa::testing
