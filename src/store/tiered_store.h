// A stack of stores, fastest first (e.g. memory in front of a directory or a
// Redis Cluster): reads try each tier in order and copy a hit into the faster
// tiers; writes go through to every tier; statistics per tier.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "store/kv_store.h"

namespace swa {

struct TierStats {
  uint64_t hits = 0;           // gets answered by this tier
  uint64_t misses = 0;         // gets this tier did not have (NOT_FOUND)
  uint64_t errors = 0;         // calls of any kind that failed otherwise
  uint64_t bytes_read = 0;     // blob bytes of the hits
  uint64_t puts = 0;           // successful puts, promotions included
  uint64_t bytes_written = 0;  // blob bytes of those puts
  uint64_t promotions = 0;     // puts that copied a hit up from a slower tier
};

// Thread-safe when every tier is.
class TieredStore final : public KvStore {
 public:
  // INVALID_ARGUMENT for no tiers or a null one.
  static absl::StatusOr<std::unique_ptr<TieredStore>> Create(
      std::vector<std::unique_ptr<KvStore>> tiers);

  // Writes tier 0, 1, ...; on the first failure removes the key from the
  // tiers already written (so no faster tier holds a blob the slower ones
  // lack) and returns the failure naming the tier.
  absl::Status Put(std::string_view key, absl::Span<const ConstByteSpan> pieces) override;
  // The first tier that has the key answers; a whole hit is then put into
  // every faster tier (a failed promotion is counted, not returned). A tier
  // that fails is skipped; its error is returned only when no later tier has
  // the key.
  absl::StatusOr<uint64_t> Get(std::string_view key, absl::Span<const ByteSpan> pieces) override;
  // True when any tier has the key; a tier's error only when none does.
  absl::StatusOr<bool> Exists(std::string_view key) override;
  // Removes from every tier: OK when any held it, NOT_FOUND when none did,
  // the first tier's error (named) when one failed.
  absl::Status Remove(std::string_view key) override;

  size_t tier_count() const { return tiers_.size(); }
  KvStore& tier(size_t i) { return *tiers_[i].store; }
  TierStats Stats(size_t tier) const;

 private:
  struct Counters {
    std::atomic<uint64_t> hits{0}, misses{0}, errors{0}, bytes_read{0}, puts{0}, bytes_written{0},
        promotions{0};
  };
  struct Tier {
    std::unique_ptr<KvStore> store;
    std::unique_ptr<Counters> counters = std::make_unique<Counters>();
  };

  explicit TieredStore(std::vector<Tier> tiers) : tiers_(std::move(tiers)) {}
  absl::Status Named(size_t tier, const absl::Status& status) const;
  void Promote(std::string_view key, absl::Span<const ByteSpan> pieces, size_t below);

  std::vector<Tier> tiers_;
};

}  // namespace swa
