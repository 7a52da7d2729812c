#include "store/tiered_store.h"

#include "absl/hash/hash.h"
#include "absl/strings/str_format.h"

namespace swa {

absl::StatusOr<std::unique_ptr<TieredStore>> TieredStore::Create(
    std::vector<std::unique_ptr<KvStore>> tiers) {
  if (tiers.empty()) return absl::InvalidArgumentError("tiered store: no tiers");
  std::vector<Tier> own;
  for (size_t i = 0; i < tiers.size(); ++i) {
    if (tiers[i] == nullptr)
      return absl::InvalidArgumentError(absl::StrFormat("tiered store: tier %u is null", i));
    own.push_back(Tier{std::move(tiers[i])});
  }
  return std::unique_ptr<TieredStore>(new TieredStore(std::move(own)));
}

TieredStore::TieredStore(std::vector<Tier> tiers)
    : tiers_(std::move(tiers)), fenced_(tiers_.size()) {}

absl::Status TieredStore::Named(size_t tier, const absl::Status& status) const {
  return absl::Status(status.code(), absl::StrFormat("tiered store, tier %u of %u: %s", tier,
                                                     tiers_.size(), status.message()));
}

absl::Mutex& TieredStore::KeyLock(std::string_view key) const {
  return key_locks_[absl::HashOf(key) % kKeyLocks];
}

bool TieredStore::Fenced(size_t tier, std::string_view key) const {
  if (fenced_keys_.load(std::memory_order_acquire) == 0) return false;
  absl::MutexLock lock(&fence_mu_);
  return fenced_[tier].contains(std::string(key));  // rare: only while keys are fenced
}

void TieredStore::SetFenced(size_t tier, std::string_view key, bool fenced) {
  if (!fenced && fenced_keys_.load(std::memory_order_acquire) == 0) return;
  absl::MutexLock lock(&fence_mu_);
  if (fenced) {
    if (fenced_[tier].emplace(std::string(key)).second) fenced_keys_.fetch_add(1, std::memory_order_release);
  } else if (fenced_[tier].erase(std::string(key)) > 0) {
    fenced_keys_.fetch_sub(1, std::memory_order_release);
  }
}

void TieredStore::ClearOrFence(size_t tier, std::string_view key) {
  absl::Status s = tiers_[tier].store->Remove(key);
  if (s.ok() || absl::IsNotFound(s)) {
    SetFenced(tier, key, false);
    return;
  }
  // The tier may still hold an older blob than the tier of record: never
  // serve it (an engine would restore a state it has since overwritten).
  ++tiers_[tier].counters->errors;
  SetFenced(tier, key, true);
}

absl::Status TieredStore::Put(std::string_view key, absl::Span<const ConstByteSpan> pieces) {
  const uint64_t bytes = TotalBytes(pieces);
  absl::WriterMutexLock lock(&KeyLock(key));
  // The slowest tier first: a put that fails there has changed nothing a
  // reader can see, so an engine may treat the save as never made (SPEC 7).
  for (size_t i = tiers_.size(); i-- > 0;) {
    Counters& c = *tiers_[i].counters;
    absl::Status s = tiers_[i].store->Put(key, pieces);
    if (s.ok()) {
      ++c.puts;
      c.bytes_written += bytes;
      SetFenced(i, key, false);
      continue;
    }
    ++c.errors;
    if (i + 1 == tiers_.size()) return Named(i, s);
    ClearOrFence(i, key);  // a faster tier is a cache: keep it from serving the old blob
  }
  return absl::OkStatus();
}

void TieredStore::Promote(std::string_view key, absl::Span<const ByteSpan> pieces, size_t below) {
  std::vector<ConstByteSpan> read_only(pieces.begin(), pieces.end());
  const uint64_t bytes = TotalBytes(pieces);
  for (size_t j = 0; j < below; ++j) {
    Counters& c = *tiers_[j].counters;
    if (tiers_[j].store->Put(key, read_only).ok()) {
      ++c.puts;
      ++c.promotions;
      c.bytes_written += bytes;
      SetFenced(j, key, false);  // it now holds the current blob
    } else {
      ++c.errors;  // unchanged: empty, current, or still fenced
    }
  }
}

absl::StatusOr<uint64_t> TieredStore::Get(std::string_view key, absl::Span<const ByteSpan> pieces) {
  return Read(key, pieces, nullptr, nullptr, /*promote_unverified=*/true);
}

absl::StatusOr<uint64_t> TieredStore::GetVerified(std::string_view key,
                                                  absl::Span<const ByteSpan> pieces,
                                                  const std::function<void(uint64_t)>& landed,
                                                  const std::function<absl::Status()>& verify) {
  return Read(key, pieces, landed, verify, /*promote_unverified=*/false);
}

absl::StatusOr<uint64_t> TieredStore::Read(std::string_view key,
                                           absl::Span<const ByteSpan> pieces,
                                           const std::function<void(uint64_t)>& landed,
                                           const std::function<absl::Status()>& verify,
                                           bool promote_unverified) {
  absl::ReaderMutexLock lock(&KeyLock(key));
  absl::Status first_error;
  for (size_t i = 0; i < tiers_.size(); ++i) {
    if (Fenced(i, key)) continue;
    Counters& c = *tiers_[i].counters;
    // Unverified here (a tiered store as a tier promotes nothing inside it).
    absl::StatusOr<uint64_t> size = tiers_[i].store->GetVerified(key, pieces, nullptr, nullptr);
    if (size.ok()) {
      ++c.hits;
      c.bytes_read += *size;
      // Only a blob that filled the buffers whole can be copied up, and only
      // one the reader accepted (under the key lock: no put came between).
      if (*size != TotalBytes(pieces)) return size;
      if (landed) landed(*size);
      if (verify) {
        if (absl::Status s = verify(); !s.ok()) return s;
      } else if (!promote_unverified) {
        return size;
      }
      if (i > 0) Promote(key, pieces, i);
      return size;
    }
    if (absl::IsNotFound(size.status())) {
      ++c.misses;
      continue;
    }
    ++c.errors;
    if (first_error.ok()) first_error = Named(i, size.status());
  }
  if (!first_error.ok()) return first_error;
  return absl::NotFoundError("tiered store: no tier has a blob under this key");
}

absl::StatusOr<bool> TieredStore::Exists(std::string_view key) {
  absl::ReaderMutexLock lock(&KeyLock(key));
  absl::Status first_error;
  for (size_t i = 0; i < tiers_.size(); ++i) {
    if (Fenced(i, key)) continue;
    absl::StatusOr<bool> found = tiers_[i].store->Exists(key);
    if (found.ok() && *found) return true;
    if (!found.ok()) {
      ++tiers_[i].counters->errors;
      if (first_error.ok()) first_error = Named(i, found.status());
    }
  }
  if (!first_error.ok()) return first_error;
  return false;
}

absl::Status TieredStore::Remove(std::string_view key) {
  absl::WriterMutexLock lock(&KeyLock(key));
  bool removed = false;
  for (size_t i = tiers_.size(); i-- > 0;) {
    const bool was_fenced = Fenced(i, key);
    absl::Status s = tiers_[i].store->Remove(key);
    if (s.ok() || absl::IsNotFound(s)) {
      removed |= s.ok() && !was_fenced;  // a fenced copy was never the key's blob
      SetFenced(i, key, false);
      continue;
    }
    ++tiers_[i].counters->errors;
    // As for a put: a failure in the tier of record changes nothing.
    if (i + 1 == tiers_.size()) return Named(i, s);
    SetFenced(i, key, true);
  }
  if (!removed) return absl::NotFoundError("tiered store: no tier has a blob under this key");
  return absl::OkStatus();
}

TierStats TieredStore::Stats(size_t tier) const {
  const Counters& c = *tiers_[tier].counters;
  TierStats s;
  s.hits = c.hits;
  s.misses = c.misses;
  s.errors = c.errors;
  s.bytes_read = c.bytes_read;
  s.puts = c.puts;
  s.bytes_written = c.bytes_written;
  s.promotions = c.promotions;
  absl::MutexLock lock(&fence_mu_);
  s.fenced = fenced_[tier].size();
  return s;
}

}  // namespace swa
