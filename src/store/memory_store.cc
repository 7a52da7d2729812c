#include "store/memory_store.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"

namespace swa {

void MemoryStore::EraseLocked(Lru::iterator it, std::shared_ptr<const Blob>* graveyard) {
  stats_.bytes -= it->charge();
  --stats_.entries;
  index_.erase(it->key);
  *graveyard = std::move(it->blob);
  lru_.erase(it);
}

absl::Status MemoryStore::Put(std::string_view key, absl::Span<const ConstByteSpan> pieces) {
  const uint64_t size = TotalBytes(pieces);
  const uint64_t charge = key.size() + size;
  {
    absl::MutexLock lock(&mu_);
    if (charge > stats_.budget_bytes) {
      ++stats_.rejected_puts;
      return absl::ResourceExhaustedError(absl::StrFormat(
          "memory store: a blob of %u bytes (with its key) exceeds the whole budget of %u bytes",
          charge, stats_.budget_bytes));
    }
  }
  // Copy before locking: readers and writers of other keys are not held up.
  auto blob = std::make_shared<Blob>();
  blob->bytes = std::make_unique_for_overwrite<uint8_t[]>(size == 0 ? 1 : size);
  blob->size = size;
  GatherInto(pieces, blob->bytes.get());

  std::vector<std::shared_ptr<const Blob>> graveyard;  // freed after unlocking
  absl::MutexLock lock(&mu_);
  if (auto found = index_.find(key); found != index_.end())
    EraseLocked(found->second, &graveyard.emplace_back());
  while (stats_.bytes + charge > stats_.budget_bytes && !lru_.empty()) {
    ++stats_.evictions;
    stats_.evicted_bytes += lru_.back().charge();
    EraseLocked(std::prev(lru_.end()), &graveyard.emplace_back());
  }
  lru_.push_front(Entry{std::string(key), std::move(blob)});
  index_.emplace(lru_.front().key, lru_.begin());
  stats_.bytes += charge;
  ++stats_.entries;
  ++stats_.puts;
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> MemoryStore::Get(std::string_view key,
                                          absl::Span<const ByteSpan> pieces) {
  return GetStreaming(key, pieces, nullptr);
}

absl::StatusOr<uint64_t> MemoryStore::GetStreaming(std::string_view key,
                                                   absl::Span<const ByteSpan> pieces,
                                                   const std::function<void(uint64_t)>& landed) {
  std::shared_ptr<const Blob> blob;
  {
    absl::MutexLock lock(&mu_);
    auto found = index_.find(key);
    if (found == index_.end()) {
      ++stats_.misses;
      return absl::NotFoundError("memory store: no blob under this key");
    }
    ++stats_.hits;
    lru_.splice(lru_.begin(), lru_, found->second);
    blob = found->second->blob;
  }
  if (blob->size != TotalBytes(pieces)) return uint64_t{blob->size};
  if (!landed) {
    ScatterFrom(blob->bytes.get(), pieces);
    return uint64_t{blob->size};
  }
  // In slices, each reported: the caller works on the first ones (hashes a
  // tag's chunks) while the later ones are copied.
  constexpr uint64_t kSlice = uint64_t{1} << 18;
  const uint8_t* src = blob->bytes.get();
  uint64_t done = 0;
  for (ByteSpan p : pieces) {
    for (uint64_t at = 0; at < p.size();) {
      const uint64_t n = std::min<uint64_t>(kSlice, p.size() - at);
      std::memcpy(p.data() + at, src + done, n);
      at += n;
      done += n;
      landed(done);
    }
  }
  if (done == 0) landed(0);
  return uint64_t{blob->size};
}

absl::StatusOr<bool> MemoryStore::Exists(std::string_view key) {
  absl::MutexLock lock(&mu_);
  return index_.contains(key);
}

absl::Status MemoryStore::Remove(std::string_view key) {
  std::shared_ptr<const Blob> graveyard;
  absl::MutexLock lock(&mu_);
  auto found = index_.find(key);
  if (found == index_.end()) return absl::NotFoundError("memory store: no blob under this key");
  EraseLocked(found->second, &graveyard);
  return absl::OkStatus();
}

MemoryStoreStats MemoryStore::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace swa
