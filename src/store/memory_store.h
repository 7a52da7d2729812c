// The built-in in-process store: byte budget, LRU eviction, statistics,
// one mutex (blob bytes are copied outside it).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "store/kv_store.h"

namespace swa {

struct MemoryStoreStats {
  uint64_t budget_bytes = 0;
  uint64_t bytes = 0;  // keys + blobs held now
  uint64_t entries = 0;
  uint64_t puts = 0;
  uint64_t rejected_puts = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;
  uint64_t evicted_bytes = 0;
};

class MemoryStore final : public KvStore {
 public:
  explicit MemoryStore(uint64_t budget_bytes) { stats_.budget_bytes = budget_bytes; }

  absl::Status Put(std::string_view key, absl::Span<const ConstByteSpan> pieces) override;
  absl::StatusOr<uint64_t> Get(std::string_view key, absl::Span<const ByteSpan> pieces) override;
  // Copies in 256 KiB slices, `landed` after each (KvStore::GetStreaming).
  absl::StatusOr<uint64_t> GetStreaming(std::string_view key, absl::Span<const ByteSpan> pieces,
                                        const std::function<void(uint64_t)>& landed) override;
  absl::StatusOr<bool> Exists(std::string_view key) override;
  absl::Status Remove(std::string_view key) override;

  MemoryStoreStats Stats() const;

 private:
  struct Blob {
    std::unique_ptr<uint8_t[]> bytes;
    size_t size = 0;
  };
  struct Entry {
    std::string key;
    std::shared_ptr<const Blob> blob;  // readers copy from it outside the lock
    uint64_t charge() const { return key.size() + blob->size; }
  };
  using Lru = std::list<Entry>;  // front = most recently used

  // Unlinks `it`; its blob goes to `graveyard` so that it is freed unlocked.
  void EraseLocked(Lru::iterator it, std::shared_ptr<const Blob>* graveyard)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  Lru lru_ ABSL_GUARDED_BY(mu_);
  // Keys are views of the Entry's own key (list nodes never move).
  absl::flat_hash_map<std::string_view, Lru::iterator> index_ ABSL_GUARDED_BY(mu_);
  MemoryStoreStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace swa
