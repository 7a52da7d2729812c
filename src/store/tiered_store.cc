#include "store/tiered_store.h"

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

absl::Status TieredStore::Named(size_t tier, const absl::Status& status) const {
  return absl::Status(status.code(), absl::StrFormat("tiered store, tier %u of %u: %s", tier,
                                                     tiers_.size(), status.message()));
}

absl::Status TieredStore::Put(std::string_view key, absl::Span<const ConstByteSpan> pieces) {
  const uint64_t bytes = TotalBytes(pieces);
  for (size_t i = 0; i < tiers_.size(); ++i) {
    Counters& c = *tiers_[i].counters;
    absl::Status s = tiers_[i].store->Put(key, pieces);
    if (!s.ok()) {
      ++c.errors;
      for (size_t j = 0; j < i; ++j) (void)tiers_[j].store->Remove(key);
      return Named(i, s);
    }
    ++c.puts;
    c.bytes_written += bytes;
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
    } else {
      ++c.errors;
    }
  }
}

absl::StatusOr<uint64_t> TieredStore::Get(std::string_view key, absl::Span<const ByteSpan> pieces) {
  absl::Status first_error;
  for (size_t i = 0; i < tiers_.size(); ++i) {
    Counters& c = *tiers_[i].counters;
    absl::StatusOr<uint64_t> size = tiers_[i].store->Get(key, pieces);
    if (size.ok()) {
      ++c.hits;
      c.bytes_read += *size;
      // Only a blob that filled the buffers whole can be copied up.
      if (i > 0 && *size == TotalBytes(pieces)) Promote(key, pieces, i);
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
  absl::Status first_error;
  for (size_t i = 0; i < tiers_.size(); ++i) {
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
  absl::Status first_error;
  bool removed = false;
  for (size_t i = 0; i < tiers_.size(); ++i) {
    absl::Status s = tiers_[i].store->Remove(key);
    if (s.ok()) {
      removed = true;
    } else if (!absl::IsNotFound(s)) {
      ++tiers_[i].counters->errors;
      if (first_error.ok()) first_error = Named(i, s);
    }
  }
  if (!first_error.ok()) return first_error;
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
  return s;
}

}  // namespace swa
